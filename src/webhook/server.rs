//! The HTTPS listener: TLS via tokio-rustls (axum::serve does not do TLS), HTTP/1.1 and HTTP/2 via
//! hyper-util, one task per connection, graceful shutdown.
//!
//! Bounded everywhere: a TLS handshake must finish in [`HANDSHAKE_TIMEOUT`], request headers arrive
//! within [`HEADER_READ_TIMEOUT`], at most [`MAX_CONNECTIONS`] connections are served at once, and on
//! shutdown open connections get [`SHUTDOWN_GRACE`] to finish their requests.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
pub const MAX_CONNECTIONS: usize = 1024;
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// Serves `router` over TLS on an already bound listener until `shutdown` resolves, then lets open
/// connections finish (up to [`SHUTDOWN_GRACE`]).
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    shutdown: impl Future<Output = ()>,
) {
    let acceptor = TlsAcceptor::from(tls);
    let (stop_tx, stop_rx) = watch::channel(false);
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let (stream, peer) = match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off instead of spinning.
                        tracing::warn!(error = %e, "webhook accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                    tracing::warn!(%peer, "webhook connection refused: {MAX_CONNECTIONS} connections open");
                    continue;
                };
                let _ = stream.set_nodelay(true);
                let acceptor = acceptor.clone();
                let router = router.clone();
                let mut stop = stop_rx.clone();
                conns.spawn(async move {
                    let _slot = slot;
                    let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "webhook TLS handshake timed out");
                            return;
                        }
                    };
                    let service = hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                        router.clone().oneshot(req.map(axum::body::Body::new))
                    });
                    let mut builder = auto::Builder::new(TokioExecutor::new());
                    builder
                        .http1()
                        .timer(TokioTimer::new())
                        .header_read_timeout(HEADER_READ_TIMEOUT);
                    builder.http2().timer(TokioTimer::new());
                    let conn = builder.serve_connection(TokioIo::new(tls), service);
                    tokio::pin!(conn);
                    tokio::select! {
                        r = conn.as_mut() => {
                            if let Err(e) = r {
                                tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
                            }
                        }
                        _ = stopped(&mut stop) => {
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        }
                    }
                });
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let drained = tokio::time::timeout(SHUTDOWN_GRACE, async {
        while conns.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            "webhook connections still open after the shutdown grace period; closing them"
        );
        conns.abort_all();
    }
}

/// Resolves once shutdown is signalled (or the sender is gone).
async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
