//! The admission webhook against a hostile client, over the real HTTPS listener with the limits
//! `sluice serve` ships (docs/webhook.md, "Limits").
//!
//! One client address (127.0.0.1, as a hostile pod would have one) opens 200 HTTP/1.1
//! connections announcing 8 MB bodies, sends 2 MiB of each at once and trickles the rest, and 20
//! HTTP/2 connections each opening 100 streams whose bodies it trickles as fast as flow control
//! lets it, reconnecting whenever sluice closes a connection. Meanwhile the API server (another
//! address, 127.0.0.2) sends real AdmissionReviews from `tests/fixtures/admission/` over HTTP/2
//! and HTTP/1.1, and one of about 1 MiB. Asserted: every review is answered correctly within the
//! request timeout, 99% within 2.5 s; every hostile request is ended by sluice within the request timeout (5 s)
//! plus a margin; sluice's HTTP/2 SETTINGS allow at most 32 streams and the streams over that are
//! refused; the bodies buffered stay within the byte budget and the process's resident memory
//! grows by less than 256 MiB. The numbers are printed (`--nocapture`); docs/webhook.md quotes
//! them. Every loop is bounded in time and count, and every task is stopped at the end.
//!
//! A second test checks the listener's connection limits with small values: a quarter of the
//! connections per address, a TLS handshake that never starts, a connection that says nothing.

mod tls_support;
mod webhook_support;

// The allocator `sluice serve` runs with (src/main.rs), so that resident memory is what sluice's
// would be.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use sluice::dag::Options;
use sluice::webhook::{IndexHandle, Limit, Limits, Metrics, ReloadingCert, State, serve_on};
use tls_support::{Ca, Files};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadHalf, WriteHalf};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::{Mutex, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;
use webhook_support::*;

const HOSTILE: [u8; 4] = [127, 0, 0, 1];
const API_SERVER: [u8; 4] = [127, 0, 0, 2];
/// What sluice ships: the request timeout, the HTTP/2 streams per connection, the byte budget.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_STREAMS: u32 = 32;
const BUDGET: u64 = 32 * 1024 * 1024;
/// How much later than the request timeout a hostile request may end (scheduling on a loaded
/// 2-core machine).
const MARGIN: Duration = Duration::from_secs(2);
/// What the attack may add to the resident memory of the API server's traffic alone.
/// The API server's 99th percentile latency bound (a 1 MiB review takes ~0.3 s in a debug build).
const API_SERVER_P99: Duration = Duration::from_millis(2500);
const RSS_GROWTH_MAX_MIB: u64 = 128;

const SLOW_CONNECTIONS: usize = 200;
const SLOW_ANNOUNCED: usize = 8_000_000;
const SLOW_BURST: usize = 2 * 1024 * 1024;
const FLOOD_CONNECTIONS: usize = 20;
const FLOOD_STREAMS: u32 = 100;
/// The API server alone first, then the attack beside it.
const CALM: Duration = Duration::from_secs(4);
const ATTACK: Duration = Duration::from_secs(12);
/// Most attempts one attacking task makes (it reconnects after sluice ends a request).
const MAX_ATTEMPTS: usize = 50;

struct Server {
    addr: SocketAddr,
    state: State,
    stop: Option<oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Result<(), sluice::webhook::WebhookError>>,
    _files: Files,
}

impl Server {
    async fn start(ca: &Ca, limits: Limits) -> Server {
        let files = Files::new();
        let (cert, key, _) = ca.leaf("webhook");
        files.write(&cert, &key);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let cert = ReloadingCert::load(&files.cert, &files.key).unwrap();
        let index = IndexHandle::from_snapshot(&mk_snapshot("index.yaml"), Options::default());
        let state = State::with_limits(mk_settings(), index, Metrics::new(), limits);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve_on(
            listener,
            cert,
            Duration::from_secs(60),
            state.clone(),
            async move {
                let _ = rx.await;
            },
        ));
        Server {
            addr,
            state,
            stop: Some(tx),
            task,
            _files: files,
        }
    }

    async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(Duration::from_secs(15), self.task)
            .await
            .expect("the webhook stops")
            .unwrap()
            .unwrap();
    }
}

fn connector(ca: &Ca, alpn: &[u8]) -> TlsConnector {
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pemfile::certs(&mut ca.pem().as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    config.alpn_protocols = vec![alpn.to_vec()];
    TlsConnector::from(Arc::new(config))
}

async fn tcp_from(from: [u8; 4], addr: SocketAddr) -> io::Result<TcpStream> {
    let socket = TcpSocket::new_v4()?;
    socket.bind(SocketAddr::new(IpAddr::from(from), 0))?;
    socket.connect(addr).await
}

async fn tls_from(
    tls: &TlsConnector,
    from: [u8; 4],
    addr: SocketAddr,
) -> io::Result<TlsStream<TcpStream>> {
    let connect = async {
        let tcp = tcp_from(from, addr).await?;
        let name = ServerName::try_from("localhost").unwrap();
        tls.connect(name, tcp).await
    };
    tokio::time::timeout(Duration::from_secs(3), connect)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// Resident memory of this process, KiB.
fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Resolves when `stop` turns true or `until` passes.
async fn over(stop: &mut watch::Receiver<bool>, until: Instant) {
    tokio::select! {
        _ = stop.wait_for(|s| *s) => {}
        _ = tokio::time::sleep_until(until) => {}
    }
}

// The helpers live beside this file (tests/webhook_hostile/); a test crate's root looks for
// its modules in tests/ itself, so their paths are given.
#[path = "webhook_hostile/flood.rs"]
mod flood;
#[path = "webhook_hostile/reviews.rs"]
mod reviews;
#[path = "webhook_hostile/slow.rs"]
mod slow;

use flood::*;
use reviews::*;
use slow::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reviews_are_answered_while_a_hostile_client_floods_the_webhook() {
    let ca = Ca::new();
    let server = Server::start(&ca, Limits::default()).await;
    let addr = server.addr;
    let metrics = server.state.metrics.clone();
    let (stop_tx, stop) = watch::channel(false);

    // The API server reviews alone for a while (its own memory: the decoding of 1 MiB reviews),
    // then the attack runs beside it. Resident memory: before, the highest while the API server
    // is alone, the highest during the attack.
    let rss_before = rss_kib();
    let started = Instant::now();
    let attack_from = started + CALM;
    let until = attack_from + ATTACK;
    let sampler = {
        let mut stop = stop.clone();
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let (mut calm, mut attacked, mut conns) = (0u64, 0u64, 0i64);
            for _ in 0..1000 {
                let rss = rss_kib();
                if Instant::now() < attack_from {
                    calm = calm.max(rss);
                } else {
                    attacked = attacked.max(rss);
                }
                conns = conns.max(metrics.open_connections());
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(50)) => {}
                    _ = stop.wait_for(|s| *s) => break,
                }
            }
            (calm, attacked, conns)
        })
    };
    let mut reviews = JoinSet::new();
    for http1 in [false, true] {
        let client = api_server_client(&ca, http1);
        let end = until - Duration::from_secs(1);
        reviews.spawn(api_server(client, addr, end, stop.clone()));
    }
    tokio::time::sleep_until(attack_from).await;
    let mut slow = JoinSet::new();
    let h1 = connector(&ca, b"http/1.1");
    for _ in 0..SLOW_CONNECTIONS {
        slow.spawn(slow_body_client(h1.clone(), addr, until, stop.clone()));
    }
    let mut floods = JoinSet::new();
    let h2 = connector(&ca, b"h2");
    for _ in 0..FLOOD_CONNECTIONS {
        floods.spawn(flood_client(h2.clone(), addr, until, stop.clone()));
    }

    let mut api = Reviews::default();
    while let Some(r) = reviews.join_next().await {
        let r = r.unwrap();
        api.latencies.extend(r.latencies);
        api.failures.extend(r.failures);
    }
    tokio::time::sleep_until(until).await;
    let _ = stop_tx.send(true);
    let mut slow_stats = SlowStats::default();
    let collect = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(s) = slow.join_next().await {
            let s = s.unwrap();
            slow_stats.attempts += s.attempts;
            slow_stats.longest = slow_stats.longest.max(s.longest);
            for (k, v) in s.endings {
                *slow_stats.endings.entry(k).or_default() += v;
            }
        }
    })
    .await;
    assert!(collect.is_ok(), "the slow clients stop");
    let mut flood = FloodStats::default();
    let collect = tokio::time::timeout(Duration::from_secs(20), async {
        while let Some(f) = floods.join_next().await {
            let f = f.unwrap();
            flood.connections += f.connections;
            flood.max_streams = flood.max_streams.max(f.max_streams);
            flood.opened += f.opened;
            flood.refused += f.refused;
            flood.ended += f.ended;
            flood.longest = flood.longest.max(f.longest);
            flood.goaways += f.goaways;
        }
    })
    .await;
    assert!(collect.is_ok(), "the flooding clients stop");
    let (rss_calm, rss_peak, conns_peak) = sampler.await.unwrap();
    let peak_buffered = server.state.peak_buffered_bytes();
    let hits: BTreeMap<&str, u64> = Limit::ALL
        .iter()
        .map(|l| (l.as_str(), metrics.hits(*l)))
        .filter(|(_, n)| *n > 0)
        .collect();
    server.stop().await;

    let mut lat = api.latencies.clone();
    lat.sort();
    let growth_mib = rss_peak.saturating_sub(rss_calm) / 1024;
    println!(
        "API server: {} reviews answered, {} failed; latency p50 {:?}, p99 {:?}, max {:?}",
        lat.len(),
        api.failures.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        lat.last().copied().unwrap_or_default()
    );
    println!(
        "slow HTTP/1.1 bodies: {} connections, {} requests, ended by sluice as {:?} (status: count; 0 = closed), longest open {:?}",
        SLOW_CONNECTIONS, slow_stats.attempts, slow_stats.endings, slow_stats.longest
    );
    println!(
        "HTTP/2 floods: {} connections, SETTINGS_MAX_CONCURRENT_STREAMS {:?}, {} streams opened, {} refused, {} ended by sluice, longest open {:?}, {} GOAWAYs",
        flood.connections,
        flood.max_streams,
        flood.opened,
        flood.refused,
        flood.ended,
        flood.longest,
        flood.goaways
    );
    println!(
        "memory: request bodies buffered at most {:.1} MiB (budget {} MiB); resident {} MiB at the start, {} MiB with the API server alone, {} MiB under attack (+{} MiB); connections open at most {}",
        peak_buffered as f64 / (1024.0 * 1024.0),
        BUDGET >> 20,
        rss_before / 1024,
        rss_calm / 1024,
        rss_peak / 1024,
        growth_mib,
        conns_peak
    );
    println!("limit hits: {hits:?}");

    assert!(
        api.failures.is_empty(),
        "every review is answered, right, within {REQUEST_TIMEOUT:?}: {:#?}",
        api.failures
    );
    assert!(lat.len() >= 40, "reviews kept flowing: {}", lat.len());
    // Not just within the timeout: the hostile client's requests wait for room, the API
    // server's do not wait behind them (its address has its own share of the byte budget).
    assert!(
        percentile(&lat, 0.99) <= API_SERVER_P99,
        "the API server's reviews are not held up: p99 {:?}",
        percentile(&lat, 0.99)
    );
    assert!(
        slow_stats.longest <= REQUEST_TIMEOUT + MARGIN,
        "sluice ends a request whose body does not arrive within its timeout: one stayed open {:?}",
        slow_stats.longest
    );
    assert!(
        slow_stats.attempts > SLOW_CONNECTIONS,
        "the slow clients were cut off and came back: {} requests",
        slow_stats.attempts
    );
    assert!(
        flood.max_streams.is_some_and(|m| m <= MAX_STREAMS),
        "sluice allows at most {MAX_STREAMS} streams per connection: {:?}",
        flood.max_streams
    );
    assert!(
        flood.refused >= (FLOOD_STREAMS - MAX_STREAMS) as usize,
        "streams over the limit are refused: {}",
        flood.refused
    );
    assert!(
        flood.longest <= REQUEST_TIMEOUT + MARGIN,
        "sluice ends a stream whose body does not arrive within the timeout: one stayed open {:?}",
        flood.longest
    );
    assert!(
        peak_buffered <= BUDGET,
        "buffered bodies stay within the budget: {peak_buffered}"
    );
    assert!(
        growth_mib < RSS_GROWTH_MAX_MIB,
        "the attack adds less than {RSS_GROWTH_MAX_MIB} MiB of resident memory: +{growth_mib} MiB"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_per_address_and_silent_ones_are_closed() {
    let ca = Ca::new();
    let limits = Limits {
        max_connections: 16,
        request_timeout: Duration::from_secs(1),
        idle_timeout: Duration::from_secs(2),
        ..Limits::default()
    };
    assert_eq!(limits.max_connections_per_peer(), 4);
    let server = Server::start(&ca, limits).await;
    let metrics = server.state.metrics.clone();
    let h2 = connector(&ca, b"h2");

    // Four connections from one address are served; the fifth is closed at once.
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(tls_from(&h2, HOSTILE, server.addr).await.unwrap());
    }
    let fifth = tls_from(&h2, HOSTILE, server.addr).await;
    assert!(
        fifth.is_err(),
        "a fifth connection from one address is refused"
    );
    assert_eq!(metrics.hits(Limit::PeerConnections), 1);
    // Another address is served meanwhile.
    let client = api_server_client(&ca, false);
    let resp = client
        .post(format!("https://127.0.0.1:{}/validate", server.addr.port()))
        .body(fixture_bytes("ir_v1beta1_valid"))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    drop(client);

    // The held connections said nothing (not even the HTTP/2 preface): closed once idle.
    let t0 = Instant::now();
    for mut c in held {
        let mut buf = [0u8; 256];
        let closed = tokio::time::timeout(Duration::from_secs(5), async {
            // Sluice's SETTINGS, then GOAWAY, then EOF; bounded by the timeout.
            loop {
                match c.read(&mut buf).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        })
        .await;
        assert!(closed.is_ok(), "a silent connection is closed");
    }
    assert!(t0.elapsed() <= Duration::from_secs(4), "{:?}", t0.elapsed());
    assert!(metrics.hits(Limit::Idle) >= 4);

    // A TCP connection that never starts TLS is closed after the handshake timeout.
    let mut raw = tcp_from(HOSTILE, server.addr).await.unwrap();
    let t0 = Instant::now();
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf))
        .await
        .expect("closed within the handshake timeout");
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(metrics.hits(Limit::Handshake), 1);

    server.stop().await;
}
