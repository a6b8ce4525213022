//! Real Envoy fed by sluice standalone: the load-balancing strategies of IngressRoutes and
//! Routes (RoundRobin, WeightedLeastRequest, Random).
//!
//! Every outcome is a backend's hit count or who answered; the statistical tests give the odds
//! of passing or failing by chance next to their bounds.

mod envoy_support;

use std::time::{Duration, Instant};

use envoy_support::harness::Harness;
use envoy_support::scripted::{Scripted, ingressroute_v1, sequence, service_of, tally};
use sluice::cli::bootstrap::XdsProtocol;

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
