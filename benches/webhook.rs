//! Webhook load benchmark (not a test): starts the real HTTPS webhook with an index of 10 and of
//! 10,000 objects, sends a realistic IngressRoute review at a fixed rate over loopback for a
//! bounded time, and prints p50/p99 latency for both and the 10k/10 ratio.
//!
//!     cargo bench --bench webhook -- [--rate 1000] [--seconds 10] [--warmup 2]
//!
//! Run any other way (`cargo test --all-targets` runs it in the test profile) it does a smoke run
//! (200 req/s for 1 s per size, one large review) and records nothing.
//!
//! Knobs for exploring where time goes (defaults in brackets): BENCH_SERVER_THREADS [2],
//! BENCH_CLIENT_THREADS [1], BENCH_HTTP1 (set: HTTP/1.1 with a connection pool instead of HTTP/2).
//!
//! A full run merges its numbers into target/bench/results.json (keys `webhook_*`), as the other
//! benchmarks do.
//!
//! Steal time: on a virtual machine the hypervisor may run other guests on the cores this one
//! thinks it has; a request in flight then waits for its thread to get a core back. The benchmark
//! reads the machine's steal time (/proc/stat) around every one-second block and prints the
//! blocks' p99 apart for seconds with less and with more than 1% of the CPU time stolen
//! (`webhook_steal_pct` records the average), so a tail that comes from the host shows as such.
//!
//! Open loop: one request is started every 1/rate seconds whatever the previous ones do (HTTP/2,
//! one connection, as the API server's webhook client does). Latency is measured per request from
//! just before it is sent to the last byte of the answer. Everything is bounded: the run stops
//! after warmup + seconds per index size, and each request times out after 5 s.

mod common;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, SanType};
use serde_json::{Value, json};
use sluice::dag::Options;
use sluice::manifest::{Document, decode_value};
use sluice::store::Snapshot;
use sluice::webhook::{AdmissionSettings, IndexHandle, Metrics, ReloadingCert, State, serve_on};

struct Args {
    rate: u64,
    seconds: u64,
    warmup: u64,
    smoke: bool,
}

fn parse_args() -> Args {
    if common::smoke() {
        return Args {
            rate: 200,
            seconds: 1,
            warmup: 0,
            smoke: true,
        };
    }
    let mut a = Args {
        rate: 1000,
        seconds: 10,
        warmup: 2,
        smoke: false,
    };
    // `cargo bench` passes --bench.
    let argv: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| a != "--bench")
        .collect();
    let mut i = 0;
    while i < argv.len() {
        let val = || -> u64 {
            argv.get(i + 1)
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("{} needs a number", argv[i]))
        };
        match argv[i].as_str() {
            "--rate" => a.rate = val().clamp(1, 20_000),
            "--seconds" => a.seconds = val().clamp(1, 120),
            "--warmup" => a.warmup = val().clamp(0, 30),
            other => {
                panic!("unknown argument {other}; use --rate N --seconds N --warmup N")
            }
        }
        i += 2;
    }
    a
}

/// A snapshot of `n` objects: IngressRoute roots (each its own host), Services and Ingresses.
fn mk_snapshot(n: usize) -> Snapshot {
    let mut s = Snapshot::default();
    for i in 0..n {
        let ns = format!("team-{}", i % 50);
        let v = match i % 3 {
            0 => json!({"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
                "metadata": {"name": format!("root-{i}"), "namespace": ns, "creationTimestamp": "2024-01-01T00:00:00Z"},
                "spec": {"virtualhost": {"fqdn": format!("host-{i}.example.com")},
                         "routes": [{"match": "/", "services": [{"name": format!("svc-{i}"), "port": 80}]}]}}),
            1 => json!({"apiVersion": "v1", "kind": "Service",
                "metadata": {"name": format!("svc-{i}"), "namespace": ns},
                "spec": {"ports": [{"port": 80, "targetPort": 8080}]}}),
            _ => json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
                "metadata": {"name": format!("ing-{i}"), "namespace": ns},
                "spec": {"ingressClassName": "sluice", "rules": [{"host": format!("ing-{i}.example.com"),
                    "http": {"paths": [{"path": "/", "pathType": "Prefix",
                        "backend": {"service": {"name": format!("svc-{i}"), "port": {"number": 80}}}}]}}]}}),
        };
        match decode_value(v) {
            Ok(Document::Object(o)) => s.insert(o),
            other => panic!("benchmark object did not decode: {other:?}"),
        }
    }
    s
}

/// A realistic review: creating a root IngressRoute with TLS, weighted services and a delegation.
fn mk_review() -> Vec<u8> {
    let object = json!({"apiVersion": "contour.heptio.com/v1beta1", "kind": "IngressRoute",
        "metadata": {"name": "shop", "namespace": "shop", "labels": {"app": "shop", "team": "checkout"},
            "annotations": {"kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"contour.heptio.com/v1beta1\",\"kind\":\"IngressRoute\"}"}},
        "spec": {"virtualhost": {"fqdn": "www.shop.example.com", "tls": {"secretName": "shop-tls", "minimumProtocolVersion": "1.2"}},
            "strategy": "WeightedLeastRequest",
            "healthCheck": {"path": "/healthz", "intervalSeconds": 5, "timeoutSeconds": 2},
            "routes": [
                {"match": "/", "services": [{"name": "web", "port": 80}]},
                {"match": "/api", "services": [{"name": "api", "port": 8080, "weight": 90}, {"name": "api-canary", "port": 8080, "weight": 10}]},
                {"match": "/static", "services": [{"name": "static", "port": 80, "strategy": "Random"}]},
                {"match": "/finance", "delegate": {"name": "finance", "namespace": "finance"}}]}});
    let gvk = json!({"group": "contour.heptio.com", "version": "v1beta1", "kind": "IngressRoute"});
    let gvr =
        json!({"group": "contour.heptio.com", "version": "v1beta1", "resource": "ingressroutes"});
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "bench-0000", "kind": gvk, "resource": gvr, "requestKind": gvk, "requestResource": gvr,
        "name": "shop", "namespace": "shop", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:argocd:argocd-application-controller", "groups": ["system:serviceaccounts"]},
        "object": object, "oldObject": null, "dryRun": false,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions", "fieldManager": "argocd-controller"}}});
    serde_json::to_vec(&review).unwrap()
}

fn mk_pki(dir: &std::path::Path) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "sluice bench CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut params = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
    params
        .subject_alt_names
        .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let (cert_path, key_path) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    (ca.pem(), cert_path, key_path)
}

struct Result {
    objects: usize,
    sent: usize,
    errors: usize,
    p50: Duration,
    p99: Duration,
    p999: Duration,
    max: Duration,
    /// From the webhook's own latency histogram (body read → answer encoded): bucket upper bounds.
    server_p50: f64,
    server_p99: f64,
}

/// The upper bound (seconds) of the histogram bucket holding quantile `q`, read from the
/// Prometheus text of `sluice_webhook_admission_duration_seconds`.
fn histogram_quantile(text: &str, q: f64) -> f64 {
    let buckets: Vec<(f64, f64)> = text
        .lines()
        .filter(|l| l.starts_with("sluice_webhook_admission_duration_seconds_bucket"))
        .filter_map(|l| {
            let le = l.split("le=\"").nth(1)?.split('"').next()?;
            let le = if le == "+Inf" {
                f64::INFINITY
            } else {
                le.parse().ok()?
            };
            let count: f64 = l.rsplit(' ').next()?.parse().ok()?;
            Some((le, count))
        })
        .collect();
    let total = buckets.last().map(|b| b.1).unwrap_or(0.0);
    buckets
        .iter()
        .find(|(_, c)| *c >= q * total)
        .map(|(le, _)| *le)
        .unwrap_or(f64::NAN)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

async fn load(
    client: &reqwest::Client,
    url: &str,
    body: Arc<Vec<u8>>,
    rate: u64,
    seconds: u64,
) -> (Vec<Duration>, usize) {
    let period = Duration::from_nanos(1_000_000_000 / rate);
    let total = (rate * seconds) as usize;
    let mut ticker = tokio::time::interval(period);
    ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..total {
        ticker.tick().await;
        let (client, url, body) = (client.clone(), url.to_string(), Arc::clone(&body));
        tasks.spawn(async move {
            let t0 = Instant::now();
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .body(body.as_ref().clone())
                .send()
                .await
                .ok()?;
            if resp.status() != 200 {
                return None;
            }
            let answer: Value = resp.json().await.ok()?;
            let elapsed = t0.elapsed();
            (answer["response"]["allowed"] == true).then_some(elapsed)
        });
    }
    let mut latencies = Vec::with_capacity(total);
    let mut errors = 0;
    while let Some(r) = tasks.join_next().await {
        match r {
            Ok(Some(d)) => latencies.push(d),
            _ => errors += 1,
        }
    }
    (latencies, errors)
}

/// One webhook server (its own index) on the server runtime.
struct Target {
    objects: usize,
    url: String,
    registry: prometheus_client::registry::Registry,
    stop: tokio::sync::oneshot::Sender<()>,
    task: tokio::task::JoinHandle<std::result::Result<(), sluice::webhook::WebhookError>>,
}

fn start(
    rt: &tokio::runtime::Runtime,
    objects: usize,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> Target {
    let snapshot = mk_snapshot(objects);
    assert_eq!(snapshot.len(), objects);
    let index = IndexHandle::from_snapshot(&snapshot, Options::default());
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::registered(&mut registry);
    let state = State::new(AdmissionSettings::default(), index, metrics);
    let (listener, addr): (tokio::net::TcpListener, SocketAddr) = rt.block_on(async {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let a = l.local_addr().unwrap();
        (l, a)
    });
    let reloading = ReloadingCert::load(cert, key).unwrap();
    let (stop, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let task = rt.spawn(serve_on(
        listener,
        reloading,
        Duration::from_secs(1),
        state,
        async move {
            let _ = stop_rx.await;
        },
    ));
    Target {
        objects,
        url: format!("https://127.0.0.1:{}/validate", addr.port()),
        registry,
        stop,
        task,
    }
}

/// Both index sizes are served at once and loaded in alternating one-second blocks, so that
/// whatever else the machine does at a moment hits both alike; each gets `seconds` seconds at
/// `rate` requests per second in total.
fn run_both(
    args: &Args,
    ca_pem: &str,
    cert: &std::path::Path,
    key: &std::path::Path,
) -> (Vec<Result>, Vec<Block>) {
    // The servers on their own runtime (as in `sluice serve`), the client on another.
    let server_threads: usize = std::env::var("BENCH_SERVER_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let server_rt = common::runtime(server_threads);
    let client_threads: usize = std::env::var("BENCH_CLIENT_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    let client_rt = common::runtime(client_threads);
    let targets: Vec<Target> = [10, 10_000]
        .into_iter()
        .map(|n| start(&server_rt, n, cert, key))
        .collect();
    let body = Arc::new(mk_review());
    let mut latencies: Vec<Vec<Duration>> = vec![Vec::new(), Vec::new()];
    let mut errors = [0usize; 2];
    let mut blocks = Vec::new();
    client_rt.block_on(async {
        let client = reqwest::Client::builder()
            .use_rustls_tls()
            .add_root_certificate(reqwest::Certificate::from_pem(ca_pem.as_bytes()).unwrap())
            .timeout(Duration::from_secs(5));
        let client = if std::env::var("BENCH_HTTP1").is_ok() {
            client.http1_only()
        } else {
            client
        };
        let client = client.build().unwrap();
        for t in &targets {
            if args.warmup > 0 {
                load(&client, &t.url, Arc::clone(&body), args.rate, args.warmup).await;
            }
        }
        for block in 0..2 * args.seconds as usize {
            let i = block % 2;
            let before = cpu_ticks();
            let (mut l, e) = load(&client, &targets[i].url, Arc::clone(&body), args.rate, 1).await;
            let stolen = match (before, cpu_ticks()) {
                (Some(a), Some(b)) => Some(b.since(&a)),
                _ => None,
            };
            l.sort();
            blocks.push(Block {
                p99: percentile(&l, 99.0),
                stolen,
            });
            latencies[i].extend(l);
            errors[i] += e;
        }
    });
    let mut out = Vec::new();
    for (i, t) in targets.into_iter().enumerate() {
        let _ = t.stop.send(());
        let _ = server_rt.block_on(t.task);
        let sorted = &mut latencies[i];
        sorted.sort();
        let text = sluice::webhook::metrics::encode_text(&t.registry);
        out.push(Result {
            server_p50: histogram_quantile(&text, 0.5),
            server_p99: histogram_quantile(&text, 0.99),
            objects: t.objects,
            sent: sorted.len() + errors[i],
            errors: errors[i],
            p50: percentile(sorted, 50.0),
            p99: percentile(sorted, 99.0),
            p999: percentile(sorted, 99.9),
            max: sorted.last().copied().unwrap_or_default(),
        });
    }
    (out, blocks)
}

/// One second of load against one index size: its p99, and the share of the machine's CPU time
/// the hypervisor gave to other guests meanwhile (steal; None where /proc/stat is not readable).
struct Block {
    p99: Duration,
    stolen: Option<f64>,
}

/// The machine's CPU time so far from /proc/stat, in clock ticks: (steal, all).
struct Ticks {
    steal: u64,
    all: u64,
}

impl Ticks {
    /// The share of the CPU time between `earlier` and `self` that was stolen.
    fn since(&self, earlier: &Ticks) -> f64 {
        let all = self.all.saturating_sub(earlier.all).max(1);
        self.steal.saturating_sub(earlier.steal) as f64 / all as f64
    }
}

fn cpu_ticks() -> Option<Ticks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    // "cpu  user nice system idle iowait irq softirq steal guest guest_nice"
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    Some(Ticks {
        steal: *fields.get(7)?,
        all: fields.iter().sum(),
    })
}

/// How the tail follows the VM's steal time: the blocks' p99 (median over blocks) for the
/// seconds with less than 1% of the CPU time stolen and for the others.
fn print_steal(blocks: &[Block]) -> Option<f64> {
    let measured: Vec<(f64, Duration)> = blocks
        .iter()
        .filter_map(|b| Some((b.stolen?, b.p99)))
        .collect();
    if measured.is_empty() {
        println!("steal time: not readable here (/proc/stat)");
        return None;
    }
    let mean = measured.iter().map(|m| m.0).sum::<f64>() / measured.len() as f64;
    println!(
        "steal time (CPU time the hypervisor gave to other guests) during the load: {:.1}% on average",
        mean * 100.0
    );
    for (label, quiet) in [("< 1% stolen", true), (">= 1% stolen", false)] {
        let mut p99s: Vec<Duration> = measured
            .iter()
            .filter(|m| (m.0 < 0.01) == quiet)
            .map(|m| m.1)
            .collect();
        p99s.sort();
        if p99s.is_empty() {
            println!("  seconds with {label}: none");
        } else {
            println!(
                "  seconds with {label}: {:>2}, their p99 median {:.3} ms, range {:.3}-{:.3} ms",
                p99s.len(),
                p99s[p99s.len() / 2].as_secs_f64() * 1e3,
                p99s[0].as_secs_f64() * 1e3,
                p99s[p99s.len() - 1].as_secs_f64() * 1e3,
            );
        }
    }
    Some(mean)
}

fn main() {
    let args = parse_args();
    let dir = tempfile::tempdir().unwrap();
    let (ca_pem, cert, key) = mk_pki(dir.path());
    println!(
        "webhook benchmark: {} req/s for {} s (after {} s warm-up) per index size, in alternating 1 s blocks, HTTPS over loopback",
        args.rate, args.seconds, args.warmup
    );
    let (results, blocks) = run_both(&args, &ca_pem, &cert, &key);
    for r in &results {
        println!(
            "index {:>6} objects: {} requests, {} errors, p50 {:>8.3} ms, p99 {:>8.3} ms, p99.9 {:>8.3} ms, max {:>8.3} ms",
            r.objects,
            r.sent,
            r.errors,
            r.p50.as_secs_f64() * 1e3,
            r.p99.as_secs_f64() * 1e3,
            r.p999.as_secs_f64() * 1e3,
            r.max.as_secs_f64() * 1e3,
        );
        println!(
            "              inside the webhook (body read -> answer encoded, incl. warm-up; histogram bucket bounds): p50 <= {:.3} ms, p99 <= {:.3} ms",
            r.server_p50 * 1e3,
            r.server_p99 * 1e3
        );
    }
    let ratio = results[1].p99.as_secs_f64() / results[0].p99.as_secs_f64().max(1e-9);
    let ratio50 = results[1].p50.as_secs_f64() / results[0].p50.as_secs_f64().max(1e-9);
    println!(
        "ratio 10k/10: p50 {ratio50:.2}, p99 {ratio:.2} (target: p99 <= 2 ms, p99 ratio <= 1.2)"
    );
    let steal = print_steal(&blocks);
    let runs = if args.smoke { 1 } else { 5 };
    let large = large_review_ms(&mk_review(), runs);
    println!("one review of a ~3 MB IngressRoute (no network): {large:.1} ms (median of {runs})");
    let failed: usize = results.iter().map(|r| r.errors).sum();
    assert_eq!(failed, 0, "requests failed");
    if !args.smoke {
        let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        let mut new = serde_json::Map::new();
        new.insert("webhook_rate_per_s".into(), json!(args.rate));
        new.insert("webhook_p50_ms_10".into(), json!(ms(results[0].p50)));
        new.insert("webhook_p99_ms_10".into(), json!(ms(results[0].p99)));
        new.insert("webhook_p50_ms_10k".into(), json!(ms(results[1].p50)));
        new.insert("webhook_p99_ms_10k".into(), json!(ms(results[1].p99)));
        new.insert(
            "webhook_p99_ratio_10k_10".into(),
            json!((ratio * 100.0).round() / 100.0),
        );
        if let Some(steal) = steal {
            new.insert(
                "webhook_steal_pct".into(),
                json!((steal * 1000.0).round() / 10.0),
            );
        }
        common::write_results(new);
    }
}

/// The answer time of one review whose object is ~3 MB (42k routes), without TLS or network.
fn large_review_ms(template: &[u8], runs: usize) -> f64 {
    let mut review: Value = serde_json::from_slice(template).unwrap();
    let routes: Vec<Value> = (0..42_000)
        .map(|i| json!({"match": format!("/r/{i:07}"), "services": [{"name": "web", "port": 80, "weight": 1}]}))
        .collect();
    review["request"]["object"]["spec"]["routes"] = Value::Array(routes);
    let body = serde_json::to_vec(&review).unwrap();
    assert!(body.len() > 3_000_000, "{} bytes", body.len());
    let state = State::new(
        AdmissionSettings::default(),
        IndexHandle::from_snapshot(&Snapshot::default(), Options::default()),
        Metrics::new(),
    );
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let answer =
                sluice::webhook::review::answer(sluice::webhook::Endpoint::Validate, &body, &state);
            assert_eq!(answer.status, 200);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}
