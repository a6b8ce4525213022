//! Envoy hardening through a real Envoy fed by sluice (docs/xds.md, "Envoy hardening"):
//! - request paths that try to leave the route they name, sent as raw bytes over TCP (no client
//!   normalises them first), reach only the backend of the route their normalised path names,
//!   and that backend receives that normalised path; escaped slashes are redirected; nothing
//!   reaches Envoy's admin interface through the routing listener or the statistics listener;
//! - the overload manager's global connection limit closes connections past it.

mod envoy_support;

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, ingressroute, services};
use envoy_support::{envoy_bin, free_port};
use sluice::cli::bootstrap::{BootstrapArgs, OverloadArgs, XdsProtocol, write_bootstrap};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

const HOST: &str = "h.example.com";

/// `/public` goes to the backend `p/public`, `/secret` to `p/secret`, nothing else anywhere.
fn manifests(public: &Backend, secret: &Backend) -> [(&'static str, String); 2] {
    let routes = "  - match: /public\n    services: [{name: public, port: 80}]\n  - match: /secret\n    services: [{name: secret, port: 80}]\n";
    [
        ("svc.yaml", services("p", &[public, secret])),
        ("route.yaml", ingressroute("p", "root", HOST, routes)),
    ]
}

/// What Envoy on `port` answered `METHOD target` sent as written: the status, then the backend
/// (`x-backend`) or the `Location` of a redirect, or for an answer of neither its body.
async fn raw(port: u16, method: &str, target: &str) -> String {
    let mut conn = TcpStream::connect(("127.0.0.1", port))
        .await
        .expect("connect to Envoy");
    let request =
        format!("{method} {target} HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n");
    conn.write_all(request.as_bytes()).await.unwrap();
    let answer = tokio::time::timeout(Duration::from_secs(10), read_response(&mut conn)).await;
    let answer = answer.unwrap_or_else(|_| panic!("no answer to {method} {target}"));
    let text = String::from_utf8_lossy(&answer);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split(' ').nth(1).unwrap_or("nothing").to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let body = match header("transfer-encoding") {
        Some(te) if te.eq_ignore_ascii_case("chunked") => dechunk(body),
        _ => body.to_string(),
    };
    match (header("x-backend"), header("location")) {
        (Some(b), _) => format!("{status} {b}"),
        (None, Some(l)) => format!("{status} -> {l}"),
        (None, None) if status == "200" => format!("{status} {}", body.trim()),
        (None, None) => status,
    }
}

/// One HTTP/1.1 response from `conn`, as far as its length says (Envoy closes the connection
/// of a `Connection: close` request it answered itself only a second later).
async fn read_response(conn: &mut TcpStream) -> Vec<u8> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let text = String::from_utf8_lossy(&buf);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let head = head.to_ascii_lowercase();
            let length = (head.lines())
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|n| n.trim().parse::<usize>().ok());
            let done = match length {
                Some(n) => body.len() >= n,
                None if head.contains("transfer-encoding: chunked") => body.ends_with("0\r\n\r\n"),
                None => false,
            };
            if done {
                return buf;
            }
        }
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return buf,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// The data of a chunked body.
fn dechunk(mut rest: &str) -> String {
    let mut data = String::new();
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        data.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    data
}

/// Each raw request target, what Envoy answers, and the path the backend that answered
/// received. Dot segments (also written `%2e`, or with backslashes, or after `;`) are resolved
/// before routing, so a request that names `/secret` that way is a request for `/secret` and
/// its backend is told `/secret`; none reaches `/secret`'s backend while `/public`'s backend
/// would read it otherwise. Escaped slashes and backslashes get a redirect to the path
/// unescaped and normalised.
const PATHS: &[(&str, &str, Option<&str>)] = &[
    ("/public/x", "200 p/public", Some("/public/x")),
    ("/public/./x", "200 p/public", Some("/public/x")),
    ("/PUBLIC/x", "404", None),
    ("/public/../secret", "200 p/secret", Some("/secret")),
    ("/public/../admin", "404", None),
    ("/public/..", "404", None),
    ("/public/%2e%2e/secret", "200 p/secret", Some("/secret")),
    ("/public/%2E%2E/secret", "200 p/secret", Some("/secret")),
    ("/public/.%2e/secret", "200 p/secret", Some("/secret")),
    ("/%2e%2e/%2e%2e/secret", "200 p/secret", Some("/secret")),
    // Double encoded: a literal `%2e` to every party, under /public.
    (
        "/public/%252e%252e/secret",
        "200 p/public",
        Some("/public/%252e%252e/secret"),
    ),
    ("/public/x/..;/../secret", "200 p/secret", Some("/secret")),
    ("/public;/../secret", "200 p/secret", Some("/secret")),
    ("/public\\..\\secret", "200 p/secret", Some("/secret")),
    ("/public/..\\secret", "200 p/secret", Some("/secret")),
    ("/a%2Fb", "307 -> /a/b", None),
    ("/public%2Fx", "307 -> /public/x", None),
    ("/public/..%2Fsecret", "307 -> /secret", None),
    ("/public/..%2fsecret", "307 -> /secret", None),
    ("/public%2F..%2Fsecret", "307 -> /secret", None),
    ("/public/%2e%2e%2fsecret", "307 -> /secret", None),
    ("/public/..%5Csecret", "307 -> /secret", None),
    ("/public/%5c..%5csecret", "307 -> /public/secret", None),
    ("//admin", "404", None),
    ("//secret", "200 p/secret", Some("/secret")),
    ("/public//../secret", "200 p/public", Some("/public/secret")),
    (
        "/public/x?y=/../secret",
        "200 p/public",
        Some("/public/x?y=/../secret"),
    ),
    ("/public/x#/../../secret", "400", None),
    ("/public/%00/x", "400", None),
    (
        "http://h.example.com/public/../secret",
        "200 p/secret",
        Some("/secret"),
    ),
    ("*", "400", None),
    ("public/x", "400", None),
    // Envoy's admin pages are no route of the routing listener.
    ("/stats", "404", None),
    ("/config_dump", "404", None),
    ("/quitquitquit", "404", None),
    ("/ready", "404", None),
];

/// Requests to the statistics listener (`--stats-address`): its GET pages, and nothing else of
/// the admin interface behind it.
const STATS_PATHS: &[(&str, &str, &str)] = &[
    ("GET", "/ready", "200 LIVE"),
    ("GET", "/ready?/../config_dump", "200 LIVE"),
    ("GET", "/config_dump", "404"),
    ("GET", "/stats/../config_dump", "404"),
    ("GET", "/stats%2F..%2Fconfig_dump", "404"),
    ("GET", "/stats/prometheus/../../config_dump", "404"),
    ("GET", "//stats", "404"),
    ("GET", "/stats/", "404"),
    ("GET", "/stats#x", "400"),
    ("POST", "/quitquitquit", "404"),
    ("POST", "/stats/../quitquitquit", "404"),
    ("POST", "/stats", "404"),
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_paths_reach_only_the_route_their_normalised_path_names() {
    let public = Backend::start("p/public").await;
    let secret = Backend::start("p/secret").await;
    let h = Harness::start(&manifests(&public, &secret), XdsProtocol::Delta).await;
    h.expect(HOST, "/public", &[], "p/public").await;
    h.expect(HOST, "/secret", &[], "p/secret").await;
    let mut wrong = Vec::new();
    for &(target, want, backend_path) in PATHS {
        let hits = (public.hits(), secret.hits());
        let got = raw(h.http_port, "GET", target).await;
        let after = (public.hits(), secret.hits());
        // The backend that answered got exactly this request, and the other none.
        let seen = match (after.0 - hits.0, after.1 - hits.1) {
            (0, 0) => None,
            (1, 0) => public.last_header(":path").pop(),
            (0, 1) => secret.last_header(":path").pop(),
            more => Some(format!("requests {more:?}")),
        };
        if got != want || seen.as_deref() != backend_path {
            wrong.push(format!(
                "{target}: {got}, backend saw {seen:?}; want {want}, {backend_path:?}"
            ));
        }
    }
    for &(method, target, want) in STATS_PATHS {
        let got = raw(h.stats_port, method, target).await;
        if got != want {
            wrong.push(format!(
                "stats listener {method} {target}: {got}, want {want}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Envoy is still up and serving (no request stopped it).
    assert_eq!(raw(h.http_port, "GET", "/public").await, "200 p/public");
}

/// sluice standalone serving `manifests` and an Envoy bootstrapped with `overload`, its admin on
/// a unix socket: Envoy's HTTP port, and what stops both when dropped.
struct Limited {
    http_port: u16,
    /// The statistics listener (`--stats-address`).
    stats_port: u16,
    envoy: Child,
    sluice: tokio::task::JoinHandle<anyhow::Result<()>>,
    _stop: tokio::sync::oneshot::Sender<()>,
    dir: tempfile::TempDir,
}

impl Drop for Limited {
    fn drop(&mut self) {
        let _ = self.envoy.kill();
        let _ = self.envoy.wait();
    }
}

async fn start_limited(files: &[(&str, String)], overload: OverloadArgs) -> Limited {
    let dir = tempfile::tempdir().unwrap();
    let manifests = dir.path().join("manifests");
    std::fs::create_dir(&manifests).unwrap();
    for (name, text) in files {
        std::fs::write(manifests.join(name), text).unwrap();
    }
    let (http_port, xds_port, stats_port) = (free_port(), free_port(), free_port());
    let cfg = sluice::app::standalone::StandaloneConfig {
        manifests,
        xds_address: format!("127.0.0.1:{xds_port}").parse().unwrap(),
        xds_tls: None,
        dag_options: Default::default(),
        translate_options: sluice::translate::Options {
            listen_address: "127.0.0.1".parse().unwrap(),
            http_port,
            https_port: free_port(),
            ..Default::default()
        },
        debounce: Duration::from_millis(50),
        webhook: None,
        metrics_address: None,
    };
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let sluice = tokio::spawn(sluice::app::standalone::run(cfg, async move {
        let _ = stopped.await;
    }));
    let bootstrap = dir.path().join("bootstrap.json");
    write_bootstrap(&BootstrapArgs {
        xds_address: format!("127.0.0.1:{xds_port}"),
        out: bootstrap.clone(),
        xds_ca: None,
        xds_cert: None,
        xds_key: None,
        admin_port: None,
        admin_socket: Some(dir.path().join("admin.sock")),
        node_id: "limited".into(),
        node_cluster: "sluice-test".into(),
        xds_protocol: XdsProtocol::Delta,
        stats_address: Some(([127, 0, 0, 1], stats_port).into()),
        overload,
    })
    .unwrap();
    let envoy = Command::new(envoy_bin())
        .arg("-c")
        .arg(&bootstrap)
        .args(["--concurrency", "1", "--disable-hot-restart"])
        .args(["--ignore-unknown-dynamic-fields", "--drain-time-s", "1"])
        .args(["--base-id", &http_port.to_string()])
        .arg("--log-path")
        .arg(dir.path().join("envoy.log"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start envoy");
    Limited {
        http_port,
        stats_port,
        envoy,
        sluice,
        _stop: stop,
        dir,
    }
}

/// Waits until Envoy on `port` routes `/public` (every probe on a connection of its own, closed
/// after its answer).
async fn wait_routed(l: &mut Limited) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let up = TcpStream::connect(("127.0.0.1", l.http_port)).await.is_ok();
        if up && raw(l.http_port, "GET", "/public").await == "200 p/public" {
            return;
        }
        if l.sluice.is_finished() {
            let ended = (&mut l.sluice).await;
            panic!("sluice stopped: {ended:?}");
        }
        let exited = l.envoy.try_wait().ok().flatten();
        let log = std::fs::read_to_string(l.dir.path().join("envoy.log")).unwrap_or_default();
        assert!(
            Instant::now() < deadline && exited.is_none(),
            "Envoy did not route /public (exited: {exited:?}):\n{log}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `n` connections to Envoy opened one after the other, none of them sending anything yet.
async fn open_idle(port: u16, n: usize) -> Vec<BufReader<TcpStream>> {
    let mut conns = Vec::new();
    for _ in 0..n {
        let conn = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        conns.push(BufReader::new(conn));
        // Accepted in this order.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    conns
}

/// The status line Envoy answers a keep-alive request for `/public` on `conn` with, or
/// "closed" when the connection ends without one.
async fn ask(conn: &mut BufReader<TcpStream>) -> String {
    let request = format!("GET /public HTTP/1.1\r\nHost: {HOST}\r\n\r\n");
    if conn.get_mut().write_all(request.as_bytes()).await.is_err() {
        return "closed".into();
    }
    let mut line = String::new();
    let read = tokio::time::timeout(Duration::from_secs(5), conn.read_line(&mut line)).await;
    match read {
        Ok(Ok(n)) if n > 0 => line.trim().to_string(),
        Ok(_) => "closed".into(),
        Err(_) => "no answer within 5 s".into(),
    }
}

/// `sluice bootstrap --overload-max-connections 20` (with a heap limit too, far above what
/// Envoy uses): of 30 idle connections, Envoy keeps the first 20 and serves requests on them, and
/// closes the other 10 unanswered; once connections close, new ones are served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_past_the_global_limit_are_closed() {
    let public = Backend::start("p/public").await;
    let secret = Backend::start("p/secret").await;
    let limit = 20;
    let overload = OverloadArgs {
        overload_max_heap_bytes: 1 << 30,
        overload_max_connections: limit,
    };
    let mut l = start_limited(&manifests(&public, &secret), overload).await;
    wait_routed(&mut l).await;
    // The probes' connections are gone from Envoy's count.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let mut conns = open_idle(l.http_port, 30).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut answers = Vec::new();
    for conn in &mut conns {
        answers.push(ask(conn).await);
    }
    let served = "HTTP/1.1 200 OK".to_string();
    let mut want = vec![served.clone(); limit as usize];
    want.extend(vec!["closed".to_string(); 10]);
    assert_eq!(answers, want);
    // At the limit, the statistics listener still answers (readiness probes, scrapes).
    assert_eq!(raw(l.stats_port, "GET", "/ready").await, "200 LIVE");
    // The limit counts open connections: with the 20 closed, new ones are served.
    drop(conns);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut again = open_idle(l.http_port, 5).await;
    for conn in &mut again {
        assert_eq!(ask(conn).await, served);
    }
}
