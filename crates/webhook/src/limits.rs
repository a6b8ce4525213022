//! What one client can take from the webhook: time, buffered bytes, review slots, connections.
//!
//! The API server is the webhook's only legitimate client; anything else that can open a
//! connection (any pod, without the chart's NetworkPolicy) may be hostile. Every resource a
//! request holds is bounded here, and a client that holds much of one is bounded apart from the
//! others (per peer address), so that a hostile client slows itself down, not the API server:
//!
//! - a request has [`Limits::request_timeout`] from its headers to its answer, reading the body,
//!   waiting for room and the recheck loop included ([`super::handle`]);
//! - request bodies are buffered against a byte budget shared by all requests
//!   ([`Limits::max_buffered_bytes`]), of which one peer address may hold a quarter
//!   ([`Limits::max_buffered_bytes_per_peer`]); a body is charged as it arrives, so a client that
//!   announces a large body and trickles it holds what it sent, not what it announced;
//! - at most [`Limits::max_concurrent_reviews`] bodies are decoded and checked at once;
//! - the listener's limits (connections, per-peer connections, TLS handshake, HTTP/1 header read,
//!   idle connections, HTTP/2 streams and keepalive) are in [`super::server`].
//!
//! docs/webhook.md, "Limits", lists each with its default and what a client sees.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use http_body::Body as _;
use http_body_util::BodyExt as _;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Largest request body accepted: objects can reach ~3 MB (the API server's request limit) and an
/// UPDATE review carries the old object too; anything larger is answered 413 without being read
/// further.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;

/// `--webhook-request-timeout`'s default: the `timeoutSeconds` of sluice's validating webhook
/// (config/webhooks.yaml, the chart's `webhook.timeoutSeconds`).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// The API server's largest `timeoutSeconds`; a longer request timeout would only hold memory for
/// answers nobody waits for.
pub const MAX_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `--webhook-max-buffered-mib`'s default, in bytes.
pub const DEFAULT_MAX_BUFFERED_BYTES: usize = 32 * 1024 * 1024;
/// `--webhook-max-concurrent-reviews`'s default.
pub const DEFAULT_MAX_CONCURRENT_REVIEWS: usize = 16;
/// `--webhook-http2-max-streams`' default.
pub const DEFAULT_HTTP2_MAX_STREAMS: u32 = 32;

/// The webhook's resource limits. [`Limits::default`] is what `sluice serve` uses without the
/// `--webhook-*` limit flags.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Bounds the TLS handshake, the HTTP/1 header read, and a request from its headers to its
    /// answer (`--webhook-request-timeout`).
    pub request_timeout: Duration,
    /// Largest body of one request ([`MAX_BODY_BYTES`]).
    pub max_body_bytes: usize,
    /// Request bodies buffered at once, all requests together (`--webhook-max-buffered-mib`).
    pub max_buffered_bytes: usize,
    /// Reviews (decode, rules, encode) running at once (`--webhook-max-concurrent-reviews`).
    pub max_concurrent_reviews: usize,
    /// Connections open at once.
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 streams one connection may have open (`--webhook-http2-max-streams`).
    pub http2_max_streams: u32,
    /// HTTP/2 PING every interval on a connection; no answer within the timeout closes it.
    pub http2_keepalive_interval: Duration,
    pub http2_keepalive_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            max_body_bytes: MAX_BODY_BYTES,
            max_buffered_bytes: DEFAULT_MAX_BUFFERED_BYTES,
            max_concurrent_reviews: DEFAULT_MAX_CONCURRENT_REVIEWS,
            max_connections: 1024,
            idle_timeout: Duration::from_secs(60),
            http2_max_streams: DEFAULT_HTTP2_MAX_STREAMS,
            http2_keepalive_interval: Duration::from_secs(20),
            http2_keepalive_timeout: Duration::from_secs(10),
        }
    }
}

impl Limits {
    /// What one peer address may hold of the byte budget: a quarter, but at least one body of
    /// the largest size (and never more than the budget).
    pub fn max_buffered_bytes_per_peer(&self) -> usize {
        (self.max_buffered_bytes / 4)
            .max(self.max_body_bytes)
            .min(self.max_buffered_bytes)
    }

    /// Connections one peer address may have open: a quarter of [`Limits::max_connections`].
    pub fn max_connections_per_peer(&self) -> usize {
        (self.max_connections / 4).max(1)
    }
}

/// The peer address of a request's connection, put in its extensions by the listener. Requests
/// without one (the router driven directly, in tests) count as one peer.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub SocketAddr);

/// The byte budget of buffered request bodies: all requests together, and each peer address.
#[derive(Debug)]
pub(crate) struct Budget {
    total: Arc<Semaphore>,
    per_peer: usize,
    peers: Mutex<HashMap<Option<IpAddr>, Arc<Semaphore>>>,
    gauge: Gauge,
    peak: AtomicU64,
}

impl Budget {
    pub(crate) fn new(limits: &Limits, gauge: Gauge) -> Arc<Budget> {
        Arc::new(Budget {
            total: Arc::new(Semaphore::new(limits.max_buffered_bytes)),
            per_peer: limits.max_buffered_bytes_per_peer(),
            peers: Mutex::new(HashMap::new()),
            gauge,
            peak: AtomicU64::new(0),
        })
    }

    /// The most bytes charged at once so far.
    pub(crate) fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }

    fn peer_semaphore(&self, peer: Option<IpAddr>) -> Arc<Semaphore> {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        Arc::clone(
            peers
                .entry(peer)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_peer))),
        )
    }

    /// Forgets a peer's semaphore nobody holds (only the map does).
    fn forget_peer(&self, peer: Option<IpAddr>) {
        let mut peers = self.peers.lock().unwrap_or_else(|p| p.into_inner());
        if peers.get(&peer).is_some_and(|s| Arc::strong_count(s) == 1) {
            peers.remove(&peer);
        }
    }
}

/// Bytes charged to the budget for one request; given back when dropped.
#[derive(Debug)]
pub(crate) struct Charge {
    budget: Arc<Budget>,
    peer: Option<IpAddr>,
    peer_permit: Option<OwnedSemaphorePermit>,
    total_permit: Option<OwnedSemaphorePermit>,
    bytes: usize,
}

impl Charge {
    pub(crate) fn new(budget: &Arc<Budget>, peer: Option<IpAddr>) -> Charge {
        Charge {
            budget: Arc::clone(budget),
            peer,
            peer_permit: None,
            total_permit: None,
            bytes: 0,
        }
    }

    /// Charges `n` more bytes, waiting (cancel-safe) for the peer's share and then the total to
    /// have room.
    async fn grow(&mut self, n: usize) {
        if n == 0 {
            return;
        }
        // Both limits are at least MAX_BODY_BYTES-sized and far below u32::MAX; a body is never
        // charged more than its limit (see read_body).
        let permits = u32::try_from(n).unwrap_or(u32::MAX);
        let peer_sem = self.budget.peer_semaphore(self.peer);
        let Ok(peer) = peer_sem.acquire_many_owned(permits).await else {
            return;
        };
        let Ok(total) = Arc::clone(&self.budget.total)
            .acquire_many_owned(permits)
            .await
        else {
            return;
        };
        merge(&mut self.peer_permit, peer);
        merge(&mut self.total_permit, total);
        self.bytes += n;
        let now = self.budget.gauge.inc_by(n as i64) + n as i64;
        self.budget
            .peak
            .fetch_max(now.max(0) as u64, Ordering::Relaxed);
    }
}

fn merge(slot: &mut Option<OwnedSemaphorePermit>, more: OwnedSemaphorePermit) {
    match slot {
        Some(p) => p.merge(more),
        None => *slot = Some(more),
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        if self.bytes > 0 {
            self.budget.gauge.dec_by(self.bytes as i64);
        }
        self.total_permit.take();
        if self.peer_permit.take().is_some() {
            self.budget.forget_peer(self.peer);
        }
    }
}

/// A request body read into memory, holding its charge until the last clone is dropped (a
/// review on the blocking pool may outlive the request that gave up on it).
#[derive(Debug)]
pub(crate) struct Buffered {
    pub(crate) bytes: Bytes,
    _charge: Charge,
}

/// Why a body was not read.
#[derive(Debug)]
pub(crate) enum BodyError {
    /// Larger than [`Limits::max_body_bytes`] (announced or sent).
    TooLarge,
    /// Not all of it arrived before the deadline.
    Timeout,
    /// The byte budget had no room for it before the deadline.
    Busy,
    /// The connection failed while it was read.
    Read(String),
}

/// Reads a body into memory, charging the budget for the memory it takes as it grows, until
/// `deadline`. A body announced larger than the limit is refused without reading it.
pub(crate) async fn read_body(
    mut body: Body,
    limit: usize,
    budget: &Arc<Budget>,
    peer: Option<IpAddr>,
    deadline: Instant,
) -> Result<Buffered, BodyError> {
    let hint = body.size_hint();
    if hint.lower() > limit as u64 {
        return Err(BodyError::TooLarge);
    }
    // The buffer doubles as data arrives, up to the length announced (if any): a client that
    // announces a large body and sends little of it holds little.
    let cap = hint
        .upper()
        .map_or(limit, |n| usize::try_from(n).unwrap_or(limit).min(limit));
    let mut charge = Charge::new(budget, peer);
    let mut buf: Vec<u8> = Vec::new();
    loop {
        let frame = match tokio::time::timeout_at(deadline, body.frame()).await {
            Err(_) => return Err(BodyError::Timeout),
            Ok(None) => break,
            Ok(Some(Err(e))) => return Err(BodyError::Read(e.to_string())),
            Ok(Some(Ok(frame))) => frame,
        };
        let Ok(data) = frame.into_data() else {
            continue; // trailers
        };
        let needed = buf.len() + data.len();
        if needed > limit {
            return Err(BodyError::TooLarge);
        }
        if needed > buf.capacity() {
            let want = (buf.capacity() * 2).max(16 * 1024).min(cap).max(needed);
            let more = want.saturating_sub(charge.bytes);
            if tokio::time::timeout_at(deadline, charge.grow(more))
                .await
                .is_err()
            {
                return Err(BodyError::Busy);
            }
            buf.reserve_exact(want - buf.len());
        }
        buf.extend_from_slice(&data);
    }
    Ok(Buffered {
        bytes: Bytes::from(buf),
        _charge: charge,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: usize) -> Arc<Budget> {
        let limits = Limits {
            max_buffered_bytes: total,
            max_body_bytes: 1024,
            ..Limits::default()
        };
        Budget::new(&limits, Gauge::default())
    }

    #[tokio::test]
    async fn bodies_are_charged_and_given_back() {
        let b = budget(8192);
        let deadline = Instant::now() + Duration::from_secs(1);
        let got = read_body(Body::from(vec![b'x'; 1000]), 1024, &b, None, deadline)
            .await
            .unwrap();
        assert_eq!(got.bytes.len(), 1000);
        assert_eq!(b.gauge.get(), 1000);
        drop(got);
        assert_eq!(b.gauge.get(), 0);
        assert_eq!(b.peak(), 1000);
        assert!(b.peers.lock().unwrap().is_empty(), "the peer is forgotten");
    }

    #[tokio::test]
    async fn announced_bodies_over_the_limit_are_refused_unread() {
        let b = budget(8192);
        let deadline = Instant::now() + Duration::from_secs(1);
        let r = read_body(Body::from(vec![0u8; 1025]), 1024, &b, None, deadline).await;
        assert!(matches!(r, Err(BodyError::TooLarge)), "{r:?}");
        assert_eq!(b.peak(), 0);
    }

    #[tokio::test]
    async fn a_peer_holding_its_share_waits_and_others_do_not() {
        // Total 4096: a peer may hold 1024 (a quarter, at least one body of 1024).
        let b = budget(4096);
        let far = Instant::now() + Duration::from_secs(5);
        let a: Option<IpAddr> = Some([10, 0, 0, 1].into());
        let first = read_body(Body::from(vec![1u8; 1024]), 1024, &b, a, far)
            .await
            .unwrap();
        let soon = Instant::now() + Duration::from_millis(100);
        let second = read_body(Body::from(vec![1u8; 10]), 1024, &b, a, soon).await;
        assert!(matches!(second, Err(BodyError::Busy)), "{second:?}");
        let other = Some([10, 0, 0, 2].into());
        let third = read_body(Body::from(vec![1u8; 1024]), 1024, &b, other, far)
            .await
            .unwrap();
        assert_eq!(b.gauge.get(), 2048);
        drop((first, third));
        assert_eq!(b.gauge.get(), 0);
    }

    #[test]
    fn the_per_peer_share_is_a_quarter_but_at_least_one_body() {
        let l = Limits::default();
        assert_eq!(l.max_buffered_bytes_per_peer(), 8 * 1024 * 1024);
        let big = Limits {
            max_buffered_bytes: 256 * 1024 * 1024,
            ..Limits::default()
        };
        assert_eq!(big.max_buffered_bytes_per_peer(), 64 * 1024 * 1024);
        assert_eq!(l.max_connections_per_peer(), 256);
    }
}
