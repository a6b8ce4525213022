//! The listeners: HTTPS for admission (TLS via tokio-rustls, since axum::serve does not do TLS;
//! HTTP/2 or HTTP/1.1 as ALPN chose) and plain HTTP/1.1 for the health port; one task per
//! connection, graceful shutdown.
//!
//! Bounded everywhere ([`Listener`], docs/webhook.md "Limits"): at most so many connections, a
//! quarter of them per peer address (a connection over either is closed at once); a TLS handshake
//! and HTTP/1 request headers must arrive within the request timeout; a connection without a
//! request in flight for the idle timeout is closed; an HTTP/2 connection may have so many streams
//! open (more are refused with `REFUSED_STREAM`), small flow-control windows (what a client may
//! send before sluice reads it), and is pinged (no answer closes it). On shutdown open
//! connections get [`SHUTDOWN_GRACE`] to finish their requests.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use rustls::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsAcceptor;
use tower::ServiceExt as _;

use super::limits::{Limits, Peer};
use super::metrics::{Limit, Metrics};

pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);
/// A connection closed for idleness gets this long to say goodbye (HTTP/2 GOAWAY).
const CLOSE_GRACE: Duration = Duration::from_secs(1);
/// HTTP/2 flow-control windows: what a client may send on a stream, and on a connection, before
/// sluice reads it. Small, so that a connection whose requests wait for room in the byte budget
/// holds little memory outside the budget; ample for the API server on a cluster network.
const H2_STREAM_WINDOW: u32 = 128 * 1024;
const H2_CONNECTION_WINDOW: u32 = 256 * 1024;
/// Largest HTTP/2 header block (the API server sends a few hundred bytes).
const H2_MAX_HEADER_LIST: u32 = 16 * 1024;
/// Largest HTTP/1 read buffer (request headers must fit; bodies are read in pieces this size).
const H1_MAX_BUF: usize = 64 * 1024;

/// How a listener treats its connections.
#[derive(Clone, Debug)]
pub struct Listener {
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    /// For the TLS handshake and for HTTP/1 request headers.
    pub timeout: Duration,
    pub idle_timeout: Duration,
    /// HTTP/2 (by ALPN) with these settings; None serves HTTP/1.1 only.
    pub http2: Option<Http2>,
}

#[derive(Clone, Debug)]
pub struct Http2 {
    pub max_streams: u32,
    pub keepalive_interval: Duration,
    pub keepalive_timeout: Duration,
}

impl Listener {
    /// The admission listener.
    pub fn webhook(limits: &Limits) -> Listener {
        Listener {
            max_connections: limits.max_connections,
            max_connections_per_peer: limits.max_connections_per_peer(),
            timeout: limits.request_timeout,
            idle_timeout: limits.idle_timeout,
            http2: Some(Http2 {
                max_streams: limits.http2_max_streams,
                keepalive_interval: limits.http2_keepalive_interval,
                keepalive_timeout: limits.http2_keepalive_timeout,
            }),
        }
    }

    /// The health listener: probes open a connection, ask, and close it.
    pub fn health() -> Listener {
        Listener {
            max_connections: 64,
            max_connections_per_peer: 16,
            timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(10),
            http2: None,
        }
    }

    fn builder(&self, h2: bool) -> auto::Builder<TokioExecutor> {
        let b = auto::Builder::new(TokioExecutor::new());
        match &self.http2 {
            Some(h) if h2 => {
                let mut b = b.http2_only();
                b.http2()
                    .timer(TokioTimer::new())
                    .max_concurrent_streams(h.max_streams)
                    .keep_alive_interval(h.keepalive_interval)
                    .keep_alive_timeout(h.keepalive_timeout)
                    .initial_stream_window_size(H2_STREAM_WINDOW)
                    .initial_connection_window_size(H2_CONNECTION_WINDOW)
                    .max_header_list_size(H2_MAX_HEADER_LIST);
                b
            }
            _ => {
                let mut b = b.http1_only();
                b.http1()
                    .timer(TokioTimer::new())
                    .header_read_timeout(self.timeout)
                    .max_buf_size(H1_MAX_BUF);
                b
            }
        }
    }
}

/// Serves `router` over TLS on an already bound listener until `shutdown` resolves, then lets open
/// connections finish (up to [`SHUTDOWN_GRACE`]).
pub async fn serve_tls(
    listener: TcpListener,
    tls: Arc<ServerConfig>,
    router: Router,
    config: Listener,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    serve(
        listener,
        Some(TlsAcceptor::from(tls)),
        router,
        config,
        metrics,
        shutdown,
    )
    .await
}

/// Serves `router` over plain HTTP/1.1 (the health port) until `shutdown` resolves.
pub async fn serve_plain(
    listener: TcpListener,
    router: Router,
    config: Listener,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    serve(listener, None, router, config, metrics, shutdown).await
}

/// The accept loop: admits each connection within the limits and serves it on its own task until
/// `shutdown` resolves, then drains the open ones.
async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    router: Router,
    config: Listener,
    metrics: Metrics,
    shutdown: impl Future<Output = ()>,
) {
    let config = Arc::new(config);
    let (stop_tx, stop_rx) = watch::channel(false);
    let shared = Shared {
        tls,
        router,
        config: Arc::clone(&config),
        metrics: metrics.clone(),
        stop: stop_rx,
    };
    let slots = Arc::new(Semaphore::new(config.max_connections));
    let peers = PeerCounts::default();
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
                let Some(held) = admit(peer, &slots, &peers, &config, &metrics) else {
                    continue;
                };
                let _ = stream.set_nodelay(true);
                conns.spawn(handle_connection(stream, peer, held, shared.clone()));
            }
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drain(conns).await;
}

/// What every connection task of a listener gets a copy of.
#[derive(Clone)]
struct Shared {
    /// None serves plain HTTP/1.1.
    tls: Option<TlsAcceptor>,
    router: Router,
    config: Arc<Listener>,
    metrics: Metrics,
    /// Becomes true on shutdown.
    stop: watch::Receiver<bool>,
}

/// A slot among the listener's connections and one among `peer`'s, or None (counted and logged)
/// when either limit is reached.
fn admit(
    peer: SocketAddr,
    slots: &Arc<Semaphore>,
    peers: &PeerCounts,
    config: &Listener,
    metrics: &Metrics,
) -> Option<(OwnedSemaphorePermit, PeerSlot)> {
    let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
        metrics.hit(Limit::Connections);
        tracing::debug!(%peer, "connection refused: {} connections open", config.max_connections);
        return None;
    };
    let Some(peer_slot) = peers.take(peer.ip(), config.max_connections_per_peer) else {
        metrics.hit(Limit::PeerConnections);
        tracing::debug!(
            %peer,
            "connection refused: {} connections open from this address",
            config.max_connections_per_peer
        );
        return None;
    };
    Some((slot, peer_slot))
}

/// One accepted connection's task: the TLS handshake (within the timeout) if the listener has
/// TLS, then [`serve_connection`]; holds its slots until it ends.
async fn handle_connection(
    stream: TcpStream,
    peer: SocketAddr,
    (slot, peer_slot): (OwnedSemaphorePermit, PeerSlot),
    shared: Shared,
) {
    let Shared {
        tls,
        router,
        config,
        metrics,
        stop,
    } = shared;
    let _slots = (slot, peer_slot, Open::new(&metrics));
    let Some(tls) = tls else {
        return serve_connection(stream, false, peer, router, &config, &metrics, stop).await;
    };
    let tls = match tokio::time::timeout(config.timeout, tls.accept(stream)).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(%peer, error = %e, "webhook TLS handshake failed");
            return;
        }
        Err(_) => {
            metrics.hit(Limit::Handshake);
            tracing::debug!(%peer, "webhook TLS handshake timed out");
            return;
        }
    };
    // HTTP/2 over TLS is chosen by ALPN (RFC 9113 §3.2), never by sniffing the first bytes,
    // which would wait on a silent client with no timeout.
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    serve_connection(tls, h2, peer, router, &config, &metrics, stop).await
}

/// Waits up to [`SHUTDOWN_GRACE`] for the open connections to finish, then aborts the rest.
async fn drain(mut conns: JoinSet<()>) {
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

/// Serves one connection until it ends, shutdown is signalled, or it is idle too long.
async fn serve_connection<IO>(
    io: IO,
    h2: bool,
    peer: SocketAddr,
    router: Router,
    config: &Listener,
    metrics: &Metrics,
    mut stop: watch::Receiver<bool>,
) where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let activity = Arc::new(Activity::new());
    let seen = Arc::clone(&activity);
    let service =
        hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
            req.extensions_mut().insert(Peer(peer));
            let busy = Busy::new(&seen);
            let answer = router.clone().oneshot(req.map(axum::body::Body::new));
            async move {
                let r = answer.await;
                drop(busy);
                r
            }
        });
    let builder = config.builder(h2);
    let conn = builder.serve_connection(TokioIo::new(io), service);
    tokio::pin!(conn);
    loop {
        let wake = activity.idle_deadline(config.idle_timeout);
        tokio::select! {
            r = conn.as_mut() => {
                if let Err(e) = r {
                    tracing::debug!(%peer, error = %e, "webhook connection ended with an error");
                }
                return;
            }
            _ = stopped(&mut stop) => {
                conn.as_mut().graceful_shutdown();
                let _ = conn.as_mut().await;
                return;
            }
            _ = tokio::time::sleep_until(wake) => {
                if activity.idle_deadline(config.idle_timeout) <= Instant::now() {
                    metrics.hit(Limit::Idle);
                    tracing::debug!(%peer, "closing an idle webhook connection");
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(CLOSE_GRACE, conn.as_mut()).await;
                    return;
                }
            }
        }
    }
}

/// Requests in flight on a connection, and when the last one ended.
#[derive(Debug)]
struct Activity {
    in_flight: AtomicUsize,
    last: Mutex<Instant>,
}

impl Activity {
    fn new() -> Activity {
        Activity {
            in_flight: AtomicUsize::new(0),
            last: Mutex::new(Instant::now()),
        }
    }

    /// When the connection counts as idle if nothing happens until then.
    fn idle_deadline(&self, idle: Duration) -> Instant {
        let last = *self.last.lock().unwrap_or_else(|p| p.into_inner());
        if self.in_flight.load(Ordering::Acquire) > 0 {
            Instant::now() + idle
        } else {
            last + idle
        }
    }
}

/// One request in flight on a connection.
struct Busy(Arc<Activity>);

impl Busy {
    fn new(a: &Arc<Activity>) -> Busy {
        a.in_flight.fetch_add(1, Ordering::AcqRel);
        Busy(Arc::clone(a))
    }
}

impl Drop for Busy {
    fn drop(&mut self) {
        *self.0.last.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Open connections by peer address.
#[derive(Clone, Debug, Default)]
struct PeerCounts(Arc<Mutex<HashMap<IpAddr, usize>>>);

impl PeerCounts {
    /// A slot for one more connection from `ip`, None when it has `max` open.
    fn take(&self, ip: IpAddr, max: usize) -> Option<PeerSlot> {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(ip).or_insert(0);
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(PeerSlot {
            counts: self.clone(),
            ip,
        })
    }
}

struct PeerSlot {
    counts: PeerCounts,
    ip: IpAddr,
}

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut m = self.counts.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.ip);
            }
        }
    }
}

/// One open connection in the connections gauge.
struct Open(Metrics);

impl Open {
    fn new(m: &Metrics) -> Open {
        m.connections.inc();
        Open(m.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.connections.dec();
    }
}

/// Resolves once shutdown is signalled (or the sender is gone).
async fn stopped(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}
