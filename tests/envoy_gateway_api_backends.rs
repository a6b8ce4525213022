//! Real Envoy fed by sluice standalone from Gateway API HTTPRoutes and how they reach their
//! backends: a Service port's app protocol (h2c, WebSocket), a backend request timeout, and
//! request mirrors and their share of the requests.

mod envoy_support;

use envoy_support::backend::Backend;
use envoy_support::gateway::{app_route, http_gateway};
use envoy_support::harness::{Harness, docs, services, slice};
use sluice::cli::bootstrap::XdsProtocol;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_port_of_app_protocol_h2c_is_spoken_to_in_cleartext_http2() {
    let h2c = Backend::start("proto/h2c").await;
    let plain = Backend::start("proto/plain").await;
    // The same kind of backend behind two Service ports, one of appProtocol kubernetes.io/h2c.
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: app, namespace: proto}\nspec: {ports: [{name: h2c, port: 80, appProtocol: kubernetes.io/h2c}, {name: plain, port: 81}]}\n";
    let slices = docs(&[
        slice("proto", "app", "h2c", h2c.port, "0"),
        slice("proto", "app", "plain", plain.port, "1"),
    ]);
    let rules = "  - matches: [{path: {type: PathPrefix, value: /plain}}]
    backendRefs: [{name: app, port: 81}]
  - backendRefs: [{name: app, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", format!("{svc}---\n{slices}")),
            ("gateway.yaml", http_gateway("proto")),
            ("route.yaml", app_route("proto", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/", &[], "proto/h2c").await;
    assert_eq!(h2c.last_header(":version"), ["HTTP/2.0"]);
    h.expect("app.example.com", "/plain", &[], "proto/plain")
        .await;
    assert_eq!(plain.last_header(":version"), ["HTTP/1.1"]);
}

/// HTTPRouteBackendProtocolWebSocket: a WebSocket through a rule to a Service port of
/// `appProtocol: kubernetes.io/ws`, also after the rule's request timeout (1 s) has passed, which
/// bounds a request, not an upgraded connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_reaches_a_service_port_of_app_protocol_ws() {
    use envoy_support::websocket;
    let port = websocket::backend("ws/chat").await;
    let svc = "apiVersion: v1\nkind: Service\nmetadata: {name: chat, namespace: ws}\nspec: {ports: [{port: 80, appProtocol: kubernetes.io/ws}]}\n";
    let rules = "  - matches: [{path: {type: PathPrefix, value: /chat}}]
    timeouts: {request: 1s}
    backendRefs: [{name: chat, port: 80}]
";
    let h = Harness::start(
        &[
            (
                "svc.yaml",
                format!("{svc}---\n{}", slice("ws", "chat", "", port, "0")),
            ),
            ("gateway.yaml", http_gateway("ws")),
            ("route.yaml", app_route("ws", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    let mut ws = websocket::connect(&h, "app.example.com", "/chat/room-1").await;
    websocket::exchange(&mut ws, "hello", "ws/chat: hello").await;
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    websocket::exchange(&mut ws, "still there", "ws/chat: still there").await;
    ws.close(None).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backend_request_timeout_bounds_each_request_to_the_backend() {
    let web = Backend::start("slow/web").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /bounded}}]
    timeouts: {request: 10s, backendRequest: 300ms}
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /off}}]
    timeouts: {request: 10s, backendRequest: 0s}
    backendRefs: [{name: web, port: 80}]
  - timeouts: {request: 10s}
    backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("slow", &[&web])),
            ("gateway.yaml", http_gateway("slow")),
            ("route.yaml", app_route("slow", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/", &[], "slow/web").await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let status = |path: &'static str, delay_ms: u64| {
        let req = client
            .get(format!("http://127.0.0.1:{}{path}", h.http_port))
            .header(reqwest::header::HOST, "app.example.com")
            .header("x-delay-ms", delay_ms.to_string());
        async move { req.send().await.unwrap().status().as_u16() }
    };
    // A backend slower than backendRequest: Envoy gives up on it and answers 504.
    assert_eq!(status("/bounded", 1_500).await, 504);
    assert_eq!(status("/bounded", 0).await, 200);
    // backendRequest 0s, or none: only the request timeout (10 s) bounds the request.
    assert_eq!(status("/off", 1_500).await, 200);
    assert_eq!(status("/other", 1_500).await, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_mirror_copies_the_requests_to_its_backend() {
    let web = Backend::start("mirror/web").await;
    let shadow = Backend::start("mirror/shadow").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /copied}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: shadow, port: 80}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /never}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: shadow, port: 80}, percent: 0}}]
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("mirror", &[&web, &shadow])),
            ("gateway.yaml", http_gateway("mirror")),
            ("route.yaml", app_route("mirror", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/copied/a?x=1", &[], "mirror/web")
        .await;
    // The client gets the route's backend's answer; the copy reaches the mirror, its Host
    // marked `-shadow` (Envoy's way), path and query as sent. Envoy sends it on the side,
    // so it is waited for.
    let mirror = &shadow;
    let copies = |n: u64| async move {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while mirror.hits() < n && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        mirror.hits()
    };
    let before = copies(1).await;
    assert!(before >= 1, "the mirror got no copy");
    assert_eq!(shadow.last_header("host"), ["app.example.com-shadow"]);
    assert_eq!(shadow.last_header(":path"), ["/copied/a?x=1"]);
    for _ in 0..3 {
        assert_eq!(
            h.get("app.example.com", "/copied/b", &[],).await,
            "mirror/web"
        );
    }
    assert_eq!(copies(before + 3).await, before + 3);
    // percent 0 copies nothing, and neither does a rule without a mirror.
    let copied = shadow.hits();
    for path in ["/never", "/other"] {
        for _ in 0..3 {
            assert_eq!(h.get("app.example.com", path, &[]).await, "mirror/web");
        }
    }
    // Envoy starts a copy beside its request: one that was due would be here by now (the
    // copies above came within milliseconds).
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(shadow.hits(), copied);
}

/// A mirror's `percent` or `fraction` copies that share of the requests: 400 requests through a
/// rule mirroring 25 % and one mirroring 3/4 (Envoy decides each copy at random), counted at
/// each mirror's backend, within six standard deviations of the share (a binomial count: 100 ±
/// 52 and 300 ± 52), so a share taken as 0 %, 100 % or the other rule's fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirrors_share_of_the_requests_is_the_one_it_asks_for() {
    const N: u64 = 400;
    let web = Backend::start("share/web").await;
    let quarter = Backend::start("share/quarter").await;
    let most = Backend::start("share/most").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /quarter}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: quarter, port: 80}, percent: 25}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /most}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: most, port: 80}, fraction: {numerator: 3, denominator: 4}}}]
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("share", &[&web, &quarter, &most])),
            ("gateway.yaml", http_gateway("share")),
            ("route.yaml", app_route("share", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/other", &[], "share/web")
        .await;
    for (path, mirror, share) in [("/quarter", &quarter, 0.25), ("/most", &most, 0.75)] {
        for _ in 0..N {
            assert_eq!(h.get("app.example.com", path, &[]).await, "share/web");
        }
        // Copies go out beside the requests; let the last ones land.
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mean = N as f64 * share;
        let sigma = (N as f64 * share * (1.0 - share)).sqrt();
        let got = mirror.hits() as f64;
        assert!(
            (got - mean).abs() <= 6.0 * sigma,
            "{path}: {got} copies of {N} requests, expected {mean} ± {:.0}",
            6.0 * sigma
        );
    }
}
