//! The ADS gRPC server (envoy.service.discovery.v3.AggregatedDiscoveryService). Each stream runs
//! one task that feeds requests and snapshot changes to its [`Stream`] state machine and sends
//! whatever it answers. Snapshots arrive over a `tokio::sync::watch` channel shared by every
//! stream, so any number of Envoys follow the same state.

use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::service::discovery::v3::{
    DeltaDiscoveryRequest, DeltaDiscoveryResponse, DiscoveryRequest, DiscoveryResponse,
    aggregated_discovery_service_server::{
        AggregatedDiscoveryService, AggregatedDiscoveryServiceServer,
    },
};
use futures::Stream as FutureStream;
use tokio::sync::{mpsc, watch};
use tokio_stream::wrappers::ReceiverStream;
use tonic::transport::ServerTlsConfig;
use tonic::{Request, Status, Streaming};

use super::cache::Snapshot;
use super::stream::{Mode, Response, Stats, Stream};

/// The ADS service.
#[derive(Clone)]
pub struct AdsServer {
    snapshots: watch::Receiver<Arc<Snapshot>>,
    shutdown: watch::Receiver<bool>,
    stats: Arc<Stats>,
}

impl AdsServer {
    /// Serves the snapshots published on `snapshots`; every stream ends when `shutdown` turns true
    /// (or its sender goes away).
    pub fn new(
        snapshots: watch::Receiver<Arc<Snapshot>>,
        shutdown: watch::Receiver<bool>,
    ) -> AdsServer {
        AdsServer {
            snapshots,
            shutdown,
            stats: Arc::default(),
        }
    }

    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    fn spawn<Req, Resp>(
        &self,
        mode: Mode,
        mut inbound: Streaming<Req>,
        handle: fn(&mut Stream, &Req, &Snapshot) -> Vec<Response>,
        unwrap: fn(Response) -> Option<Resp>,
    ) -> ReceiverStream<Result<Resp, Status>>
    where
        Req: Send + 'static,
        Resp: Send + 'static,
        Streaming<Req>: Send,
    {
        let (tx, rx) = mpsc::channel(32);
        let mut snapshots = self.snapshots.clone();
        let mut shutdown = self.shutdown.clone();
        let stats = self.stats.clone();
        tokio::spawn(async move {
            let mut sm = Stream::new(mode, stats);
            loop {
                let out = tokio::select! {
                    msg = inbound.message() => match msg {
                        Ok(Some(req)) => {
                            let snap = snapshots.borrow_and_update().clone();
                            handle(&mut sm, &req, &snap)
                        }
                        Ok(None) => break,
                        Err(e) => {
                            tracing::debug!(node = sm.node(), error = %e, "xDS stream error");
                            break;
                        }
                    },
                    changed = snapshots.changed() => {
                        if changed.is_err() {
                            break;
                        }
                        let snap = snapshots.borrow_and_update().clone();
                        sm.on_snapshot(&snap)
                    }
                    _ = shutdown.wait_for(|s| *s) => break,
                };
                for r in out {
                    if let Some(resp) = unwrap(r)
                        && tx.send(Ok(resp)).await.is_err()
                    {
                        return;
                    }
                }
            }
            tracing::info!(node = sm.node(), ?mode, "xDS stream closed");
        });
        ReceiverStream::new(rx)
    }
}

type BoxStream<T> = Pin<Box<dyn FutureStream<Item = Result<T, Status>> + Send + 'static>>;

#[tonic::async_trait]
impl AggregatedDiscoveryService for AdsServer {
    type StreamAggregatedResourcesStream = BoxStream<DiscoveryResponse>;
    type DeltaAggregatedResourcesStream = BoxStream<DeltaDiscoveryResponse>;

    async fn stream_aggregated_resources(
        &self,
        request: Request<Streaming<DiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::StreamAggregatedResourcesStream>, Status> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (state of the world)");
        let out = self.spawn(
            Mode::Sotw,
            request.into_inner(),
            Stream::on_sotw_request,
            |r| match r {
                Response::Sotw(d) => Some(d),
                Response::Delta(_) => None,
            },
        );
        Ok(tonic::Response::new(Box::pin(out)))
    }

    async fn delta_aggregated_resources(
        &self,
        request: Request<Streaming<DeltaDiscoveryRequest>>,
    ) -> Result<tonic::Response<Self::DeltaAggregatedResourcesStream>, Status> {
        tracing::info!(peer = ?request.remote_addr(), "xDS stream opened (delta)");
        let out = self.spawn(
            Mode::Delta,
            request.into_inner(),
            Stream::on_delta_request,
            |r| match r {
                Response::Delta(d) => Some(d),
                Response::Sotw(_) => None,
            },
        );
        Ok(tonic::Response::new(Box::pin(out)))
    }
}

/// Why the xDS server could not run.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("xDS server on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
    #[error("xDS server TLS: {0}")]
    Tls(tonic::transport::Error),
    #[error("xDS server: {0}")]
    Transport(#[from] tonic::transport::Error),
}

/// The connections of `listener`, with Nagle's algorithm off (tonic's own `tcp_nodelay` applies
/// only to listeners it binds). With it on, the last segment of a large push (a route
/// configuration of hundreds of KB) waited for the client's delayed ACK: ~40 ms added to about
/// a third of the pushes.
fn incoming(listener: tokio::net::TcpListener) -> tonic::transport::server::TcpIncoming {
    tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true))
}

/// Serves ADS on an already bound listener until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    server: AdsServer,
    tls: Option<ServerTlsConfig>,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> Result<(), ServeError> {
    let mut builder = tonic::transport::Server::builder()
        .http2_keepalive_interval(Some(std::time::Duration::from_secs(30)));
    if let Some(tls) = tls {
        builder = builder.tls_config(tls).map_err(ServeError::Tls)?;
    }
    builder
        .add_service(AggregatedDiscoveryServiceServer::new(server))
        .serve_with_incoming_shutdown(incoming(listener), shutdown)
        .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use tokio_stream::StreamExt;

    #[tokio::test]
    async fn accepted_connections_have_nagle_off() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let mut incoming = super::incoming(listener);
        let _client = tokio::net::TcpStream::connect(address).await.unwrap();
        let accepted = incoming.next().await.unwrap().unwrap();
        assert!(accepted.nodelay().unwrap());
    }
}
