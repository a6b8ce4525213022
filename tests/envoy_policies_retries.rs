//! Real Envoy fed by sluice standalone: an IngressRoute v1 `failurePolicy` (retries and passive
//! health checking), `perTryTimeout` and `timeoutPolicy.request`, and an HTTPRoute rule's
//! `retry`.
//!
//! Every outcome is a status code, a backend's hit count or who answered; no assertion is about
//! speed, save a generous bound telling "timed out" from "waited for the backend".

mod envoy_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use envoy_support::backend::Backend;
use envoy_support::gateway::CLASS;
use envoy_support::harness::{Harness, docs, service, services, slice};
use envoy_support::scripted::{Scripted, WARM_ROUTE, ingressroute_v1, sequence, service_of, tally};
use sluice::cli::bootstrap::XdsProtocol;

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

// ---- HTTPRoute rules' retry ----

/// A Gateway `edge` of sluice's in `ns` with one HTTP listener, and an HTTPRoute on it for
/// `retry.example.com` with `rules` (the YAML of the list under `rules:`).
fn gateway_and_route(ns: &str, rules: &str) -> String {
    format!(
        "{CLASS}---
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
