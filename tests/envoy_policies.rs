//! Real Envoy fed by sluice standalone: an IngressRoute v1 `failurePolicy` (retries and passive
//! health checking), `perTryTimeout` and `timeoutPolicy.request`, the load-balancing strategies
//! (RoundRobin, WeightedLeastRequest, Random) and a TLS virtual host's `minimumProtocolVersion`.
//!
//! Every outcome is a status code, a backend's hit count or who answered; no assertion is about
//! speed, save a generous bound telling "timed out" from "waited for the backend". The
//! statistical tests give the odds of passing or failing by chance next to their bounds.

mod envoy_support;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, docs, service, services, slice};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use sluice::cli::bootstrap::XdsProtocol;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// A backend on 127.0.0.1 that answers each request with its name and the status its script
/// gives for the request's number (0 for the first), counted when its headers arrive. While it
/// is held ([`Scripted::hold`]) requests wait (at most 30 s) before being answered.
struct Scripted {
    name: String,
    port: u16,
    hits: Arc<AtomicU64>,
    held: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Scripted {
    async fn start(name: &str, script: impl Fn(u64) -> u16 + Send + Sync + 'static) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let port = listener.local_addr().expect("backend addr").port();
        let hits = Arc::new(AtomicU64::new(0));
        let (held, _) = watch::channel(false);
        let script = Arc::new(script);
        let (n, c, h) = (name.to_string(), hits.clone(), held.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (n, c, h, script) = (n.clone(), c.clone(), h.clone(), script.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_: Request<Incoming>| {
                        let (n, c, script) = (n.clone(), c.clone(), script.clone());
                        let mut release = h.subscribe();
                        async move {
                            let number = c.fetch_add(1, Ordering::SeqCst);
                            let wait = release.wait_for(|held| !*held);
                            let _ = tokio::time::timeout(Duration::from_secs(30), wait).await;
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(script(number))
                                    .header("x-backend", n.as_str())
                                    .body(Full::new(Bytes::from(n)))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Scripted {
            name: name.to_string(),
            port,
            hits,
            held,
            task,
        }
    }

    /// A backend that answers every request 200.
    async fn ok(name: &str) -> Scripted {
        Scripted::start(name, |_| 200).await
    }

    /// Holds requests (true) or answers them, the held ones first (false).
    fn hold(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// Requests received so far.
    fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.hold(false);
        self.task.abort();
    }
}

/// Service `ns/svc` on port 80 whose endpoints are `backends` (one EndpointSlice each, all on
/// 127.0.0.1, each on its backend's port).
fn service_of(ns: &str, svc: &str, backends: &[&Scripted]) -> String {
    let mut parts = vec![service(ns, svc, 80, "")];
    for (i, b) in backends.iter().enumerate() {
        parts.push(slice(ns, svc, "", b.port, &i.to_string()));
    }
    docs(&parts)
}

/// A root IngressRoute `projectcontour.io/v1` of `fqdn` with these `routes` (YAML lines).
fn ingressroute_v1(ns: &str, name: &str, fqdn: &str, routes: &str) -> String {
    format!(
        "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  virtualhost: {{fqdn: {fqdn}}}\n  routes:\n{routes}"
    )
}

/// A route of `/warm` to Service `warm` (always 200): the tests wait for it to answer before
/// sending the requests they count, so that no counted request meets a configuration Envoy
/// has not taken in yet (every route of a host comes in one route configuration).
const WARM_ROUTE: &str = "  - match: {path: /warm}\n    services: [{http: warm, port: 80}]\n";

/// Sends `n` requests one after the other; the answers in order.
async fn sequence(h: &Harness, host: &str, path: &str, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(h.get(host, path, &[]).await);
    }
    out
}

fn tally(answers: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for a in answers {
        *counts.entry(a.as_str()).or_default() += 1;
    }
    counts
}

// ---- failurePolicy: retries ----

/// A backend failing its first request with a 503 then answering 200: through a route with a
/// failurePolicy (count 1) the client gets the 200 of the retry and the backend saw both tries;
/// with `retryPolicyEnabled: false` the client gets the 503 and the backend saw one request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failure_policy_retries_a_5xx_unless_retries_are_disabled() {
    let warm = Scripted::ok("fp/warm").await;
    let flaky = Scripted::start("fp/flaky", |n| if n == 0 { 503 } else { 200 }).await;
    let once = Scripted::start("fp/once", |n| if n == 0 { 503 } else { 200 }).await;
    let routes = format!(
        "{WARM_ROUTE}  - match: {{path: /retried}}\n    failurePolicy: {{count: 1}}\n    services: [{{http: flaky, port: 80}}]\n  - match: {{path: /not-retried}}\n    failurePolicy: {{count: 1, retryPolicyEnabled: false}}\n    services: [{{http: once, port: 80}}]\n"
    );
    let svc = docs(&[
        service_of("fp", "warm", &[&warm]),
        service_of("fp", "flaky", &[&flaky]),
        service_of("fp", "once", &[&once]),
    ]);
    let route = ingressroute_v1("fp", "retry", "retry.example.com", &routes);
    let h = Harness::start(
        &[("svc.yaml", svc), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("retry.example.com", "/warm", &[], "fp/warm").await;

    let got = h.get("retry.example.com", "/retried", &[]).await;
    assert_eq!(got, "fp/flaky", "the retry's answer reaches the client");
    assert_eq!(
        flaky.hits(),
        2,
        "the backend saw the failed try and the retry"
    );

    let got = h.get("retry.example.com", "/not-retried", &[]).await;
    assert_eq!(
        got, "503",
        "retryPolicyEnabled: false hands the 5xx to the client"
    );
    assert_eq!(once.hits(), 1, "no retry");
    // The backend itself is fine from its second request on.
    assert_eq!(
        h.get("retry.example.com", "/not-retried", &[]).await,
        "fp/once"
    );
    assert_eq!(once.hits(), 2);
}

// ---- failurePolicy: passive health checking ----

/// Two endpoints of one Service, `bad` always answering 503 and `good` always 200, behind a
/// route with `failurePolicy` of `count`, retries off (each client request is one upstream
/// request, its answer the client's). Sends requests one at a time (round robin alternates
/// the two) until `bad` has answered `stop_after` requests, within `budget` requests; returns
/// the harness, both backends and the answers.
async fn passive_health_check(
    ns: &str,
    count: u32,
    stop_after: u64,
    budget: usize,
) -> (Harness, Scripted, Scripted, Vec<String>) {
    let warm = Scripted::ok(&format!("{ns}/warm")).await;
    let bad = Scripted::start(&format!("{ns}/bad"), |_| 503).await;
    let good = Scripted::ok(&format!("{ns}/good")).await;
    let routes = format!(
        "{WARM_ROUTE}  - match: {{path: /}}\n    failurePolicy: {{count: {count}, retryPolicyEnabled: false}}\n    services: [{{http: pair, port: 80}}]\n"
    );
    let svc = docs(&[
        service_of(ns, "warm", &[&warm]),
        service_of(ns, "pair", &[&bad, &good]),
    ]);
    let host = format!("{ns}.example.com");
    let route = ingressroute_v1(ns, "pair", &host, &routes);
    let h = Harness::start(
        &[("svc.yaml", svc), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    h.expect(&host, "/warm", &[], &format!("{ns}/warm")).await;
    let mut answers = Vec::new();
    while bad.hits() < stop_after {
        assert!(
            answers.len() < budget,
            "{} did not get {stop_after} requests of {budget}: {answers:?}",
            bad.name
        );
        answers.push(h.get(&host, "/", &[]).await);
    }
    // Ejection is decided on Envoy's main thread after the answer has gone back: give it a
    // moment before counting on it.
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(warm);
    (h, bad, good, answers)
}

/// failurePolicy count 3: the failing endpoint is ejected after its third consecutive 5xx,
/// then its healthy peer serves every request of a batch (the ejection lasts Envoy's base
/// ejection time, 30 s, far longer than the batch). One host of two is half the cluster, which
/// sluice lets outlier detection eject (under Envoy's default cap of 10% it ejected none).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn passive_health_check_ejects_a_host_after_count_consecutive_5xx() {
    let (h, bad, good, answers) = passive_health_check("phc", 3, 3, 20).await;
    let failed = answers.iter().filter(|a| *a == "503").count();
    assert_eq!(
        failed, 3,
        "each 503 of the bad host reached the client: {answers:?}"
    );
    let batch = sequence(&h, "phc.example.com", "/", 40).await;
    assert!(
        batch.iter().all(|a| a == "phc/good"),
        "after its ejection the bad host still answered: {:?}",
        tally(&batch)
    );
    assert_eq!(
        bad.hits(),
        3,
        "the ejected host got no request after its third 5xx"
    );
    assert!(good.hits() >= 40);
}

/// failurePolicy count 0 means no retries, not "eject after one 5xx": the failing endpoint
/// keeps getting traffic after its first 5xx and is ejected at Envoy's default threshold of 5
/// consecutive 5xx. (With the threshold taken as max(count, 1) it got exactly one request.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zero_failure_count_does_not_eject_a_host_after_one_5xx() {
    let (h, bad, _good, mut answers) = passive_health_check("zero", 0, 1, 10).await;
    // The bad host has failed once. Round robin alternates the two endpoints: of the next 40
    // requests about 20 would go to the bad host if it stayed in, none if one 5xx ejected it.
    answers.extend(sequence(&h, "zero.example.com", "/", 40).await);
    assert_eq!(
        bad.hits(),
        5,
        "the bad host is ejected after 5 consecutive 5xx, not 1: {:?}",
        tally(&answers)
    );
    let failed = answers.iter().filter(|a| *a == "503").count();
    assert_eq!(
        failed, 5,
        "count 0: no retries, each 5xx reaches the client"
    );
    // Ejected now: a further batch all goes to the good host.
    let batch = sequence(&h, "zero.example.com", "/", 20).await;
    assert!(
        batch.iter().all(|a| a == "zero/good"),
        "{:?}",
        tally(&batch)
    );
}

// ---- perTryTimeout and timeoutPolicy.request ----

/// A backend answering after 2 s (asked to by `x-delay-ms`): with perTryTimeout 200ms and one
/// retry the client gets a 504 once both tries have timed out, well before the backend would
/// have answered, and the backend saw both tries. A request faster than the per-try timeout
/// gets its answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_try_timeout_gives_up_on_each_try_then_answers_504() {
    let slow = Backend::start("ptt/slow").await;
    let routes = "  - match: {path: /}\n    failurePolicy: {count: 1, perTryTimeout: 200ms, passiveHealthCheckEnabled: false}\n    services: [{http: slow, port: 80}]\n";
    let h = Harness::start(
        &[
            ("svc.yaml", services("ptt", &[&slow])),
            (
                "route.yaml",
                ingressroute_v1("ptt", "slow", "ptt.example.com", routes),
            ),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    h.expect("ptt.example.com", "/", &[], "ptt/slow").await;
    let before = slow.hits();
    let started = Instant::now();
    let got = h
        .get("ptt.example.com", "/", &[("x-delay-ms", "2000")])
        .await;
    let took = started.elapsed();
    assert_eq!(got, "504", "both tries timed out");
    assert_eq!(slow.hits() - before, 2, "the first try and one retry");
    // Two tries of 200 ms and a retry back-off of at most 250 ms; the backend takes 2 s.
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    let got = h.get("ptt.example.com", "/", &[("x-delay-ms", "20")]).await;
    assert_eq!(got, "ptt/slow", "a try under the timeout succeeds");
}

/// timeoutPolicy.request 300ms: a backend answering after 2 s gets the client a 504 (logged
/// with Envoy's UT flag, upstream request timeout) well before the backend would have
/// answered; a request answered within the timeout succeeds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_timeout_answers_504_while_a_faster_request_succeeds() {
    let slow = Backend::start("rt/slow").await;
    let routes = "  - match: {path: /}\n    timeoutPolicy: {request: 300ms}\n    services: [{http: slow, port: 80}]\n";
    let h = Harness::start(
        &[
            ("svc.yaml", services("rt", &[&slow])),
            (
                "route.yaml",
                ingressroute_v1("rt", "slow", "rt.example.com", routes),
            ),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("rt.example.com", "/", &[], "rt/slow").await;
    let got = h
        .get("rt.example.com", "/fast", &[("x-delay-ms", "50")])
        .await;
    assert_eq!(got, "rt/slow", "answered within the timeout");
    let before = slow.hits();
    let started = Instant::now();
    let got = h
        .get("rt.example.com", "/slow", &[("x-delay-ms", "2000")])
        .await;
    let took = started.elapsed();
    assert_eq!(got, "504");
    assert_eq!(slow.hits() - before, 1, "no retry without a failurePolicy");
    assert!(took < Duration::from_millis(1500), "took {took:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    let line = loop {
        let lines = h.access_log();
        if let Some(l) = lines.iter().find(|l| l["path"] == "/slow") {
            break l.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no access log line for /slow: {lines:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(line["response_code"], 504, "{line}");
    assert_eq!(
        line["response_flags"], "UT",
        "upstream request timeout: {line}"
    );
}

// ---- load-balancing strategies ----
//
// Three endpoints `a`, `b`, `c` of one Service; Envoy runs one worker (`--concurrency 1`), so
// one load balancer picks every host. Two measures tell the strategies apart:
//
// - In order: requests one at a time. Round robin cycles the three hosts: every window of
//   three picks holds each host once. Random picks each host independently with chance 1/3;
//   so does least request here, all hosts being idle (its two random choices tie and it takes
//   the first). For independent uniform picks, "pick i+1 repeats pick i" are independent
//   events of chance 1/3 each, so over 599 pairs the repeats are Binomial(599, 1/3): mean 200,
//   sd 11.5. Round robin has none.
// - Busy: `a` holds every request it gets until the end, `b` and `c` answer at once; requests
//   are sent every 4 ms without waiting for answers. Round robin gives `a` exactly a third;
//   random gives it Binomial(600, 1/3) (mean 200, sd 11.5). Least request (two random
//   choices, the one with fewer requests in flight) only picks `a`, which has requests in
//   flight after its first, when both choices fall on it: chance 1/9, so Binomial(600, 1/9)
//   plus its first (mean 68, sd 7.7).
//
// BUSY_SPLIT = 130 of 600 requests to `a` lies 6.1 sd under random's mean and 8 sd over least
// request's: either side fails by chance with probability < 1e-9.

const SEQUENTIAL: usize = 600;
const BUSY: usize = 600;
const BUSY_SPLIT: u64 = 130;

/// The three backends of the strategy tests and their Service `ns/app` (`a` first).
async fn three(ns: &str) -> ([Scripted; 3], String) {
    let pool = [
        Scripted::ok(&format!("{ns}/a")).await,
        Scripted::ok(&format!("{ns}/b")).await,
        Scripted::ok(&format!("{ns}/c")).await,
    ];
    let svc = service_of(ns, "app", &[&pool[0], &pool[1], &pool[2]]);
    (pool, svc)
}

/// Waits (bounded) until every backend of `pool` has answered through `host`.
async fn all_serving(h: &Harness, host: &str, pool: &[Scripted]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = std::collections::BTreeSet::new();
    while seen.len() < pool.len() {
        assert!(
            Instant::now() < deadline,
            "not every endpoint answered through {host}: saw {seen:?}"
        );
        let got = h.get(host, "/", &[]).await;
        if pool.iter().any(|b| b.name == got) {
            seen.insert(got);
        } else {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// `n` requests one at a time: the answers in order (each a backend's name).
async fn in_order(h: &Harness, host: &str, n: usize) -> Vec<String> {
    let answers = sequence(h, host, "/", n).await;
    let odd: Vec<&String> = answers
        .iter()
        .filter(|a| a.contains(' ') || a.len() < 3)
        .collect();
    assert!(odd.is_empty(), "requests failed: {odd:?}");
    answers
}

/// Consecutive picks of the same host.
fn repeats(answers: &[String]) -> usize {
    answers.windows(2).filter(|w| w[0] == w[1]).count()
}

/// With `pool[0]` holding every request it gets, sends [`BUSY`] requests 4 ms apart without
/// waiting for answers; returns how many `pool[0]` received. Every request then gets its answer.
async fn busy_share(h: &Harness, host: &str, pool: &[Scripted]) -> u64 {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(30))
        .build()
        .expect("client");
    let before: Vec<u64> = pool.iter().map(Scripted::hits).collect();
    pool[0].hold(true);
    let mut tasks = Vec::with_capacity(BUSY);
    let url = format!("http://127.0.0.1:{}/", h.http_port);
    let mut tick = tokio::time::interval(Duration::from_millis(4));
    for _ in 0..BUSY {
        tick.tick().await;
        let req = client.get(&url).header(reqwest::header::HOST, host);
        tasks.push(tokio::spawn(async move {
            match req.send().await {
                Ok(r) => (r.status().as_u16(), r.text().await.unwrap_or_default()),
                Err(e) => (0, e.to_string()),
            }
        }));
    }
    // Every request has reached a backend (the held ones wait there).
    let deadline = Instant::now() + Duration::from_secs(20);
    let received = || -> u64 {
        (pool.iter().zip(&before))
            .map(|(b, n)| b.hits() - n)
            .sum::<u64>()
    };
    while received() < BUSY as u64 {
        assert!(
            Instant::now() < deadline,
            "only {} of {BUSY} requests reached a backend",
            received()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let to_a = pool[0].hits() - before[0];
    eprintln!("{host}: the busy host got {to_a} of {BUSY}");
    pool[0].hold(false);
    let mut failed = Vec::new();
    for t in tasks {
        let (status, body) = t.await.expect("request task");
        if status != 200 {
            failed.push((status, body));
        }
    }
    assert!(failed.is_empty(), "requests failed: {failed:?}");
    assert_eq!(received(), BUSY as u64, "one upstream request per request");
    to_a
}

/// RoundRobin (an IngressRoute v1beta1's spec-wide strategy): one at a time, the three hosts
/// in a fixed cycle (each exactly a third); with `a` busy, `a` still gets exactly a third.
/// Random or least request would break the cycle at once (chance of keeping it over 600 picks:
/// 3^-597), and least request would give the busy host about 68 of 600.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_robin_cycles_the_endpoints_busy_or_not() {
    let (pool, svc) = three("rr").await;
    let route = "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {name: app, namespace: rr}\nspec:\n  virtualhost: {fqdn: rr.example.com}\n  strategy: RoundRobin\n  routes:\n  - match: /\n    services: [{name: app, port: 80}]\n".to_string();
    let h = Harness::start(
        &[("svc.yaml", svc), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    all_serving(&h, "rr.example.com", &pool).await;
    let answers = in_order(&h, "rr.example.com", SEQUENTIAL).await;
    let cycle = &answers[..3];
    let mut hosts = cycle.to_vec();
    hosts.sort();
    hosts.dedup();
    assert_eq!(
        hosts.len(),
        3,
        "the first three picks are three hosts: {cycle:?}"
    );
    for (i, a) in answers.iter().enumerate() {
        assert_eq!(a, &cycle[i % 3], "pick {i} breaks the cycle {cycle:?}");
    }
    let to_a = busy_share(&h, "rr.example.com", &pool).await;
    assert_eq!(
        to_a,
        (BUSY / 3) as u64,
        "round robin ignores the busy host's load"
    );
}

/// Random (a Route v1alpha1's spec-wide strategy): one at a time, each host near a third and
/// consecutive repeats as independent picks make them (round robin makes none); with `a`
/// busy, `a` still gets near a third (least request would give it about 68 of 600).
///
/// Bounds: each host's count of 600 is Binomial(600, 1/3), sd 11.5: [131, 269] is 6 sd either
/// side (chance of leaving it < 1e-8 for the three hosts together); repeats >= 130 is 6 sd
/// under their mean of 200 (< 1e-9).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_picks_independently_of_order_and_load() {
    let (pool, svc) = three("rnd").await;
    let route = "apiVersion: contour.heptio.com/v1alpha1\nkind: Route\nmetadata: {name: app, namespace: rnd}\nspec:\n  host: rnd.example.com\n  strategy: Random\n  routes:\n  - pathPrefix: /\n    upstreams: [{serviceName: app, servicePort: 80}]\n".to_string();
    let h = Harness::start(
        &[("svc.yaml", svc), ("route.yaml", route)],
        XdsProtocol::Sotw,
    )
    .await;
    all_serving(&h, "rnd.example.com", &pool).await;
    let answers = in_order(&h, "rnd.example.com", SEQUENTIAL).await;
    let counts = tally(&answers);
    for b in &pool {
        let n = counts.get(b.name.as_str()).copied().unwrap_or(0);
        assert!(
            (131..=269).contains(&n),
            "{}: {n} of 600: {counts:?}",
            b.name
        );
    }
    let r = repeats(&answers);
    eprintln!("rnd.example.com: {counts:?}, {r} repeats");
    assert!(r >= 130, "{r} repeats in 599 pairs: not independent picks");
    let to_a = busy_share(&h, "rnd.example.com", &pool).await;
    assert!(
        to_a >= BUSY_SPLIT,
        "random gave the busy host only {to_a} of {BUSY}: it avoids busy hosts"
    );
}

/// WeightedLeastRequest (an IngressRoute v1 backend's strategy): with `a` busy, `a` gets far
/// less than a third (about 68 of 600, under 130: round robin gives it exactly 200, random
/// about 200); one at a time with all hosts idle, it picks at random (repeats occur, unlike
/// round robin's cycle).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn weighted_least_request_avoids_the_busy_endpoint() {
    let (pool, svc) = three("wlr").await;
    let routes = "  - match: {path: /}\n    services: [{http: app, port: 80, strategy: WeightedLeastRequest}]\n";
    let route = ingressroute_v1("wlr", "app", "wlr.example.com", routes);
    let h = Harness::start(
        &[("svc.yaml", svc), ("route.yaml", route)],
        XdsProtocol::Delta,
    )
    .await;
    all_serving(&h, "wlr.example.com", &pool).await;
    let to_a = busy_share(&h, "wlr.example.com", &pool).await;
    assert!(
        to_a < BUSY_SPLIT,
        "the busy host got {to_a} of {BUSY}: requests in flight do not steer the picks"
    );
    let answers = in_order(&h, "wlr.example.com", SEQUENTIAL).await;
    let r = repeats(&answers);
    eprintln!("wlr.example.com: {:?}, {r} repeats", tally(&answers));
    assert!(
        r >= 130,
        "{r} repeats in 599 pairs: a fixed cycle, not least request"
    );
}

// ---- minimumProtocolVersion ----

/// How a TLS 1.1 handshake went.
#[derive(Debug, PartialEq)]
enum Tls11 {
    /// Negotiated TLS 1.1.
    Done,
    /// Envoy refused it with this TLS alert: 70 protocol_version (the version is below the
    /// host's minimum), 40 handshake_failure (no cipher suite in common), ...
    Alert(u32),
    /// Failed otherwise; openssl's output.
    Failed(String),
}

/// A TLS handshake by `openssl s_client` offering only TLS 1.1 (at security level 0, without
/// which OpenSSL 3 does not offer it), to 127.0.0.1:`port` with SNI `host`.
fn tls11_handshake(port: u16, host: &str) -> Tls11 {
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
        .args([
            "-connect",
            &format!("127.0.0.1:{port}"),
            "-servername",
            host,
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    let negotiated = stdout.contains("Protocol  : TLSv1.1") && !stdout.contains("Cipher is (NONE)");
    if out.status.success() && negotiated {
        return Tls11::Done;
    }
    match stderr.split("SSL alert number ").nth(1) {
        Some(n) => Tls11::Alert(n.trim().parse().unwrap_or(0)),
        None => Tls11::Failed(format!("{stdout}\n{stderr}")),
    }
}

/// An HTTPS request with SNI and Host `host`, the client offering only TLS `version`; the
/// backend's name, or the error.
async fn get_tls_version(h: &Harness, host: &str, version: reqwest::tls::Version) -> String {
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(5))
        .danger_accept_invalid_certs(true)
        .min_tls_version(version)
        .max_tls_version(version)
        .resolve(
            host,
            format!("127.0.0.1:{}", h.https_port).parse().expect("addr"),
        )
        .build()
        .expect("tls client");
    let url = format!("https://{host}:{}/", h.https_port);
    match client.get(&url).send().await {
        Ok(r) if r.status() == 200 => r.text().await.unwrap_or_default(),
        Ok(r) => r.status().to_string(),
        Err(e) => format!("error: {e:?}"),
    }
}

/// IngressRoute v1beta1 TLS virtual hosts demanding TLS 1.3, TLS 1.2 and (by default) TLS
/// 1.1: a TLS 1.3 client is served by all three; a client limited to TLS 1.2 (rustls) is
/// refused by the first and served by the others; a TLS 1.1 client (`openssl s_client`) is
/// refused by the first two for its version, and not for its version by the third.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn minimum_protocol_version_refuses_older_clients() {
    let app = Backend::start("mpv/app").await;
    let ck = rcgen::generate_simple_self_signed(vec![
        "v13.example.com".to_string(),
        "v12.example.com".to_string(),
        "v11.example.com".to_string(),
        "default.example.com".to_string(),
    ])
    .unwrap();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: mpv}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    let root = |name: &str, tls: &str| {
        format!(
            "apiVersion: contour.heptio.com/v1beta1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: mpv}}\nspec:\n  virtualhost:\n    fqdn: {name}.example.com\n    tls: {tls}\n  routes:\n  - match: /\n    services: [{{name: app, port: 80}}]\n"
        )
    };
    let routes = docs(&[
        root("v13", "{secretName: cert, minimumProtocolVersion: \"1.3\"}"),
        root("v12", "{secretName: cert, minimumProtocolVersion: \"1.2\"}"),
        root("v11", "{secretName: cert, minimumProtocolVersion: \"1.1\"}"),
        root("default", "{secretName: cert}"),
    ]);
    let h = Harness::start(
        &[
            ("svc.yaml", services("mpv", &[&app])),
            ("secret.yaml", secret),
            ("route.yaml", routes),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    use reqwest::tls::Version;
    let all = [
        "v13.example.com",
        "v12.example.com",
        "v11.example.com",
        "default.example.com",
    ];
    for host in all {
        h.expect_tls(host, "/", "mpv/app").await;
        assert_eq!(
            get_tls_version(&h, host, Version::TLS_1_3).await,
            "mpv/app",
            "{host}: TLS 1.3"
        );
    }
    let got = get_tls_version(&h, "v13.example.com", Version::TLS_1_2).await;
    assert!(
        got.contains("AlertReceived(ProtocolVersion)"),
        "TLS 1.2 client served by a 1.3 vhost: {got}"
    );
    for host in ["v12.example.com", "v11.example.com", "default.example.com"] {
        let got = get_tls_version(&h, host, Version::TLS_1_2).await;
        assert_eq!(got, "mpv/app", "{host}: TLS 1.2");
    }
    // TLS 1.1: the 1.2 and 1.3 hosts, and a host naming no minimum (sluice's default is 1.2),
    // refuse the version itself (alert 70, protocol_version); the host asking for 1.1 completes
    // the handshake (it offers the CBC suites a TLS 1.1 client has).
    for host in ["v13.example.com", "v12.example.com", "default.example.com"] {
        let got = tls11_handshake(h.https_port, host);
        assert_eq!(got, Tls11::Alert(70), "{host}: TLS 1.1");
    }
    let got = tls11_handshake(h.https_port, "v11.example.com");
    assert_eq!(got, Tls11::Done, "v11.example.com: TLS 1.1");
}

// ---- HTTPRoute rules' retry ----

/// A Gateway `edge` of sluice's in `ns` with one HTTP listener, and an HTTPRoute on it for
/// `retry.example.com` with `rules` (the YAML of the list under `rules:`).
fn gateway_and_route(ns: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {{name: sluice}}
spec: {{controllerName: sluice.dev/gateway-controller}}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {ns}}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: retries, namespace: {ns}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [retry.example.com]
  rules:
{rules}"
    )
}

/// An HTTPRoute rule's `retry`: a status code it lists is retried up to `attempts` times (the
/// client gets the first good answer, or the last bad one once the attempts are spent), a code
/// it does not list is not retried, an endpoint refusing connections is retried on another
/// one, and a try running out of its `backendRequest` time is retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_httproute_rule_retries_its_codes_connection_errors_and_timeouts() {
    let warm = Scripted::ok("rt/warm").await;
    // Fails its first two requests with 500, then answers.
    let twice = Scripted::start("rt/twice", |n| if n < 2 { 500 } else { 200 }).await;
    let always = Scripted::start("rt/always", |_| 500).await;
    let unlisted = Scripted::start("rt/unlisted", |n| if n == 0 { 503 } else { 200 }).await;
    let good = Scripted::ok("rt/good").await;
    let slow = Backend::start("rt/slow").await;
    // A port nothing listens on: the second endpoint of Service `half`.
    let dead_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let rules = "  - matches: [{path: {type: PathPrefix, value: /warm}}]
    backendRefs: [{name: warm, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /twice}}]
    retry: {codes: [500], attempts: 3}
    backendRefs: [{name: twice, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /always}}]
    retry: {codes: [500, 502], attempts: 2, backoff: 10ms}
    backendRefs: [{name: always, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /unlisted}}]
    retry: {codes: [500], attempts: 3}
    backendRefs: [{name: unlisted, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /half}}]
    retry: {attempts: 2}
    backendRefs: [{name: half, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /slow-retried}}]
    timeouts: {request: 10s, backendRequest: 200ms}
    retry: {codes: [504], attempts: 1}
    backendRefs: [{name: slow, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /slow-once}}]
    timeouts: {request: 10s, backendRequest: 200ms}
    backendRefs: [{name: slow, port: 80}]
";
    let svc = docs(&[
        service_of("rt", "warm", &[&warm]),
        service_of("rt", "twice", &[&twice]),
        service_of("rt", "always", &[&always]),
        service_of("rt", "unlisted", &[&unlisted]),
        service("rt", "half", 80, ""),
        slice("rt", "half", "", good.port, "0"),
        slice("rt", "half", "", dead_port, "1"),
        services("rt", &[&slow]),
    ]);
    let h = Harness::start(
        &[
            ("svc.yaml", svc),
            ("gateway.yaml", gateway_and_route("rt", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("retry.example.com", "/warm", &[], "rt/warm").await;

    let got = h.get("retry.example.com", "/twice", &[]).await;
    assert_eq!(got, "rt/twice", "the third try's answer reaches the client");
    assert_eq!(twice.hits(), 3, "two failed tries and the good one");

    let got = h.get("retry.example.com", "/always", &[]).await;
    assert_eq!(
        got, "500",
        "the attempts spent, the last answer is the client's"
    );
    assert_eq!(always.hits(), 3, "the first try and two retries");

    let got = h.get("retry.example.com", "/unlisted", &[]).await;
    assert_eq!(got, "503", "a code the rule does not list is not retried");
    assert_eq!(unlisted.hits(), 1);

    // Round robin sends every other request to the dead endpoint; each is retried.
    let answers = sequence(&h, "retry.example.com", "/half", 10).await;
    assert_eq!(
        tally(&answers),
        BTreeMap::from([("rt/good", 10)]),
        "{answers:?}"
    );

    let before = slow.hits();
    let got = h
        .get(
            "retry.example.com",
            "/slow-retried",
            &[("x-delay-ms", "2000")],
        )
        .await;
    assert_eq!(got, "504", "both tries ran out of time");
    assert_eq!(slow.hits() - before, 2, "the try that ran out was retried");
    let before = slow.hits();
    let got = h
        .get("retry.example.com", "/slow-once", &[("x-delay-ms", "2000")])
        .await;
    assert_eq!(got, "504");
    assert_eq!(slow.hits() - before, 1, "no retry without a rule's retry");
}
