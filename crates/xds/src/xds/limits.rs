//! Limits of the xDS server, so that one client — a misbehaving Envoy, or anyone who reaches the
//! xDS address when it serves without client authentication — cannot make sluice hold unbounded
//! state: HTTP/2 streams per connection, connections at once, and resource names per stream.
//!
//! An Envoy holds one connection with one ADS stream and subscribes to as many names as the
//! routing model has clusters, route configurations and secrets (~20k at 10k routing objects),
//! so none of these limits is near what Envoys need.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_stream::{Stream, StreamExt};
use tonic::transport::server::Connected;

/// HTTP/2 streams a connection may have open at once (`SETTINGS_MAX_CONCURRENT_STREAMS`); Envoy
/// opens one ADS stream per connection.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 16;

/// Connections served at once; a connection over the limit is closed as it arrives (after its TLS
/// handshake, with TLS).
pub const MAX_CONNECTIONS: usize = 4096;

/// Resource names one stream may subscribe to, over all types (each name a few dozen bytes of
/// the stream's state); a stream that asks for more ends with `RESOURCE_EXHAUSTED`.
pub const MAX_SUBSCRIBED_NAMES: usize = 250_000;

/// A connection holding one of the [`MAX_CONNECTIONS`] places until it is dropped.
pub struct Limited<IO> {
    io: IO,
    _place: OwnedSemaphorePermit,
}

/// The connections of `incoming` while fewer than `max` are open; others are closed at once.
pub fn limit_connections<S, IO, E>(
    incoming: S,
    max: usize,
) -> impl Stream<Item = Result<Limited<IO>, E>>
where
    S: Stream<Item = Result<IO, E>>,
{
    let places = Arc::new(Semaphore::new(max));
    incoming.filter_map(move |conn| match conn {
        Ok(io) => match places.clone().try_acquire_owned() {
            Ok(place) => Some(Ok(Limited { io, _place: place })),
            Err(_) => {
                tracing::warn!(max, "xDS connection refused: too many connections");
                None
            }
        },
        Err(e) => Some(Err(e)),
    })
}

impl<IO: Connected> Connected for Limited<IO> {
    type ConnectInfo = IO::ConnectInfo;

    fn connect_info(&self) -> Self::ConnectInfo {
        self.io.connect_info()
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Limited<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Limited<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_over_the_limit_are_closed_and_a_closed_one_frees_its_place() {
        let (tx, rx) =
            tokio::sync::mpsc::unbounded_channel::<Result<tokio::io::DuplexStream, ()>>();
        let mut limited = Box::pin(limit_connections(
            tokio_stream::wrappers::UnboundedReceiverStream::new(rx),
            2,
        ));
        let mut clients = Vec::new();
        let mut conn = || {
            let (client, server) = tokio::io::duplex(64);
            clients.push(client);
            tx.send(Ok(server)).unwrap();
        };
        conn();
        conn();
        conn();
        let first = limited.next().await.unwrap().unwrap();
        let _second = limited.next().await.unwrap().unwrap();
        // The third was refused: nothing more until another connection arrives.
        let pending =
            tokio::time::timeout(std::time::Duration::from_millis(50), limited.next()).await;
        assert!(pending.is_err(), "a third connection was served");
        drop(first);
        conn();
        assert!(limited.next().await.unwrap().is_ok());
    }
}
