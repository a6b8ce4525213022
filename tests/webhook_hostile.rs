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

// ---- slow HTTP/1.1 bodies ----

#[derive(Debug, Default)]
struct SlowStats {
    attempts: usize,
    /// How sluice ended each request: an HTTP status, or 0 when it closed without one.
    endings: BTreeMap<u16, usize>,
    /// The longest a request stayed open (ended by sluice, or still open when the attack ended).
    longest: Duration,
}

/// Reads an HTTP/1.1 response head; its status, or 0 on EOF without one.
async fn read_status<R: AsyncRead + Unpin>(rd: &mut R) -> u16 {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while head.len() < 16 * 1024 {
        match rd.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
        if head.windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    std::str::from_utf8(&head)
        .ok()
        .and_then(|h| h.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

/// Sends `burst` bytes of body at once, then 1 KiB every 100 ms, forever; parks on a write
/// error (the reader then sees how sluice ended the request).
async fn trickle<W: AsyncWrite + Unpin>(wr: &mut W, burst: usize) {
    static CHUNK: [u8; 64 * 1024] = [b' '; 64 * 1024];
    let chunk = &CHUNK[..];
    let mut sent = 0;
    while sent < burst {
        if wr.write_all(chunk).await.is_err() {
            return std::future::pending().await;
        }
        sent += chunk.len();
    }
    let _ = wr.flush().await;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        if wr.write_all(&chunk[..1024]).await.is_err() || wr.flush().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn slow_body_client(
    tls: TlsConnector,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> SlowStats {
    let mut stats = SlowStats::default();
    while Instant::now() < until && stats.attempts < MAX_ATTEMPTS && !*stop.borrow() {
        let Ok(stream) = tls_from(&tls, HOSTILE, addr).await else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        stats.attempts += 1;
        let (mut rd, mut wr) = tokio::io::split(stream);
        let head = format!(
            "POST /validate HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: {SLOW_ANNOUNCED}\r\n\r\n"
        );
        if wr.write_all(head.as_bytes()).await.is_err() {
            continue;
        }
        let sent = Instant::now();
        let ended = tokio::select! {
            status = read_status(&mut rd) => Some(status),
            _ = trickle(&mut wr, SLOW_BURST) => None,
            _ = over(&mut stop, until) => None,
        };
        stats.longest = stats.longest.max(sent.elapsed());
        if let Some(status) = ended {
            *stats.endings.entry(status).or_default() += 1;
        }
    }
    stats
}

// ---- HTTP/2 stream floods ----

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const PING: u8 = 0x6;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
const ACK: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const REFUSED_STREAM: u32 = 0x7;

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// A HEADERS block (HPACK, literals without Huffman) for `POST /validate` announcing a body.
fn request_headers() -> Vec<u8> {
    let mut h = vec![0x83, 0x87]; // :method POST, :scheme https (static table)
    let mut literal = |name_index: u8, name: &str, value: &str| {
        if name_index > 0 {
            h.push(name_index); // literal without indexing, indexed name (index < 15)
        } else {
            h.push(0);
            h.push(name.len() as u8);
            h.extend_from_slice(name.as_bytes());
        }
        h.push(value.len() as u8);
        h.extend_from_slice(value.as_bytes());
    };
    literal(4, "", "/validate"); // :path
    literal(1, "", "localhost"); // :authority
    literal(0, "content-type", "application/json");
    literal(0, "content-length", &SLOW_ANNOUNCED.to_string());
    h
}

#[derive(Debug, Default)]
struct FloodStats {
    connections: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS sluice advertised (the largest seen; None: unlimited).
    max_streams: Option<u32>,
    opened: usize,
    refused: usize,
    /// Streams sluice ended (a response or a reset other than REFUSED_STREAM).
    ended: usize,
    /// The longest an accepted stream stayed open.
    longest: Duration,
    goaways: usize,
}

/// What the reader learned of a connection, shared with the writer.
#[derive(Debug, Default)]
struct H2State {
    settings_seen: bool,
    /// Flow-control windows: the connection's and each stream's (initial: the peer's setting).
    conn_window: i64,
    initial_window: i64,
    windows: BTreeMap<u32, i64>,
    /// Streams open, with the time their HEADERS went out.
    open: BTreeMap<u32, Instant>,
    closed: bool,
}

async fn read_frame<R: AsyncRead + Unpin>(rd: &mut R) -> io::Result<(u8, u8, u32, Vec<u8>)> {
    let mut head = [0u8; 9];
    rd.read_exact(&mut head).await?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    if len > 1 << 20 {
        return Err(io::ErrorKind::InvalidData.into());
    }
    let mut payload = vec![0u8; len];
    rd.read_exact(&mut payload).await?;
    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
    Ok((head[3], head[4], stream, payload))
}

async fn read_h2(
    mut rd: ReadHalf<TlsStream<TcpStream>>,
    wr: Arc<Mutex<WriteHalf<TlsStream<TcpStream>>>>,
    state: Arc<std::sync::Mutex<H2State>>,
    stats: Arc<std::sync::Mutex<FloodStats>>,
) {
    // Bounded: the connection ends (sluice closes it, or the caller drops this task).
    while let Ok((kind, flags, stream, payload)) = read_frame(&mut rd).await {
        let mut reply = None;
        {
            let mut st = state.lock().unwrap();
            let mut stats = stats.lock().unwrap();
            match kind {
                SETTINGS if flags & ACK == 0 => {
                    for s in payload.chunks_exact(6) {
                        let id = u16::from_be_bytes([s[0], s[1]]);
                        let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                        match id {
                            0x3 => stats.max_streams = Some(stats.max_streams.unwrap_or(0).max(v)),
                            0x4 => st.initial_window = v as i64,
                            _ => {}
                        }
                    }
                    st.settings_seen = true;
                    reply = Some(frame(SETTINGS, ACK, 0, &[]));
                }
                PING if flags & ACK == 0 => reply = Some(frame(PING, ACK, 0, &payload)),
                WINDOW_UPDATE if payload.len() == 4 => {
                    let n = (u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        & 0x7fff_ffff) as i64;
                    if stream == 0 {
                        st.conn_window += n;
                    } else if let Some(w) = st.windows.get_mut(&stream) {
                        *w += n;
                    }
                }
                RST_STREAM | HEADERS if stream != 0 => {
                    if let Some(opened) = st.open.remove(&stream) {
                        st.windows.remove(&stream);
                        let code = (payload.len() >= 4).then(|| {
                            u32::from_be_bytes([payload[0], payload[1], payload[2], payload[3]])
                        });
                        if kind == RST_STREAM && code == Some(REFUSED_STREAM) {
                            stats.refused += 1;
                        } else {
                            stats.ended += 1;
                            stats.longest = stats.longest.max(opened.elapsed());
                        }
                    }
                }
                GOAWAY => stats.goaways += 1,
                _ => {}
            }
        }
        if let Some(f) = reply {
            let _ = wr.lock().await.write_all(&f).await;
        }
    }
    state.lock().unwrap().closed = true;
}

/// One HTTP/2 connection: opens `FLOOD_STREAMS` streams at once, then sends 1 KiB of body on
/// every open stream every 100 ms as far as flow control allows, until sluice closes it.
async fn flood_once(
    tls: &TlsConnector,
    addr: SocketAddr,
    until: Instant,
    stop: &mut watch::Receiver<bool>,
    stats: &Arc<std::sync::Mutex<FloodStats>>,
) -> io::Result<()> {
    let stream = tls_from(tls, HOSTILE, addr).await?;
    let (rd, wr) = tokio::io::split(stream);
    let wr = Arc::new(Mutex::new(wr));
    let state = Arc::new(std::sync::Mutex::new(H2State {
        conn_window: 65_535,
        initial_window: 65_535,
        ..H2State::default()
    }));
    {
        let mut w = wr.lock().await;
        w.write_all(PREFACE).await?;
        w.write_all(&frame(SETTINGS, 0, 0, &[])).await?;
    }
    stats.lock().unwrap().connections += 1;
    let reader = tokio::spawn(read_h2(
        rd,
        Arc::clone(&wr),
        Arc::clone(&state),
        Arc::clone(stats),
    ));
    // Wait for sluice's SETTINGS (and let the reader acknowledge them) before the flood.
    let settled = Instant::now() + Duration::from_secs(3);
    while !state.lock().unwrap().settings_seen && Instant::now() < settled {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let headers = request_headers();
    {
        let mut w = wr.lock().await;
        let mut burst = Vec::new();
        {
            let mut st = state.lock().unwrap();
            for i in 0..FLOOD_STREAMS {
                let id = 1 + 2 * i;
                burst.extend(frame(HEADERS, END_HEADERS, id, &headers));
                st.open.insert(id, Instant::now());
                let initial = st.initial_window;
                st.windows.insert(id, initial);
            }
        }
        stats.lock().unwrap().opened += FLOOD_STREAMS as usize;
        w.write_all(&burst).await?;
    }
    let chunk = vec![b' '; 1024];
    let mut tick = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = over(stop, until) => break,
            _ = tick.tick() => {}
        }
        let mut out = Vec::new();
        {
            let mut st = state.lock().unwrap();
            if st.closed || st.open.is_empty() {
                break;
            }
            let ids: Vec<u32> = st.open.keys().copied().collect();
            for id in ids {
                let w = st.windows.get(&id).copied().unwrap_or(0);
                if w < chunk.len() as i64 || st.conn_window < chunk.len() as i64 {
                    continue;
                }
                st.conn_window -= chunk.len() as i64;
                st.windows.insert(id, w - chunk.len() as i64);
                out.extend(frame(DATA, 0, id, &chunk));
            }
        }
        if !out.is_empty() {
            let write = async { wr.lock().await.write_all(&out).await };
            // A write blocked by a full socket is given up after a while; a failed one ends it.
            if let Ok(Err(_)) = tokio::time::timeout(Duration::from_millis(500), write).await {
                break;
            }
        }
    }
    // Streams still open when the attack ended count with the age they reached.
    {
        let st = state.lock().unwrap();
        let mut stats = stats.lock().unwrap();
        for opened in st.open.values() {
            stats.longest = stats.longest.max(opened.elapsed());
        }
    }
    reader.abort();
    let _ = reader.await;
    Ok(())
}

async fn flood_client(
    tls: TlsConnector,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> FloodStats {
    let stats = Arc::new(std::sync::Mutex::new(FloodStats::default()));
    let mut attempts = 0;
    while Instant::now() < until && attempts < MAX_ATTEMPTS && !*stop.borrow() {
        attempts += 1;
        if flood_once(&tls, addr, until, &mut stop, &stats)
            .await
            .is_err()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    Arc::try_unwrap(stats).unwrap().into_inner().unwrap()
}

// ---- the API server ----

#[derive(Debug, Default)]
struct Reviews {
    latencies: Vec<Duration>,
    failures: Vec<String>,
}

/// An IngressRoute review of about `bytes` bytes (many routes), allowed.
fn large_review(bytes: usize) -> Vec<u8> {
    let mut review = fixture("ir_v1beta1_valid");
    let route = |i: usize| json!({"match": format!("/r/{i:07}"), "services": [{"name": "web", "port": 80, "weight": 1}]});
    let per_route = serde_json::to_vec(&route(0)).unwrap().len() + 1;
    review["request"]["object"]["spec"]["routes"] =
        Value::Array((0..bytes / per_route).map(route).collect());
    serde_json::to_vec(&review).unwrap()
}

async fn api_server(
    client: reqwest::Client,
    addr: SocketAddr,
    until: Instant,
    mut stop: watch::Receiver<bool>,
) -> Reviews {
    let cases: Vec<(String, Vec<u8>, bool)> = vec![
        (
            "ir_v1beta1_valid".into(),
            fixture_bytes("ir_v1beta1_valid"),
            true,
        ),
        (
            "gateway_conflicting_listeners".into(),
            fixture_bytes("gateway_conflicting_listeners"),
            false,
        ),
        (
            "ir_v1_bad_regex".into(),
            fixture_bytes("ir_v1_bad_regex"),
            false,
        ),
        ("ir_v1_valid".into(), fixture_bytes("ir_v1_valid"), true),
        ("1 MiB IngressRoute".into(), large_review(1024 * 1024), true),
    ];
    let url = format!("https://127.0.0.1:{}/validate", addr.port());
    let mut out = Reviews::default();
    for i in 0..10_000 {
        if Instant::now() >= until || *stop.borrow() {
            break;
        }
        let (name, body, allowed) = &cases[i % cases.len()];
        let sent = Instant::now();
        let resp = client
            .post(&url)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
            .await;
        let verdict = match resp {
            Ok(r) if r.status() == 200 => r
                .json::<Value>()
                .await
                .map(|v| v["response"]["allowed"].as_bool())
                .map_err(|e| e.to_string()),
            Ok(r) => Err(format!("HTTP {}", r.status())),
            Err(e) => Err(e.to_string()),
        };
        let took = sent.elapsed();
        match verdict {
            Ok(Some(a)) if a == *allowed && took <= REQUEST_TIMEOUT => out.latencies.push(took),
            other => out
                .failures
                .push(format!("{name}: {other:?} after {took:?}")),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(100)) => {}
            _ = over(&mut stop, until) => break,
        }
    }
    out
}

fn api_server_client(ca: &Ca, http1: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .use_rustls_tls()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .local_address(IpAddr::from(API_SERVER))
        .timeout(REQUEST_TIMEOUT);
    if http1 {
        b = b.http1_only();
    }
    b.build().unwrap()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

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
