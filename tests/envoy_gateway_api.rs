//! Real Envoy fed by sluice standalone from Gateway API objects: a GatewayClass of sluice's
//! controller, a Gateway with HTTP and HTTPS listeners, and HTTPRoutes with path, header and
//! method matches, weights and a TLS host, header filters, redirects and rewrites, a backend
//! request timeout, a CORS policy, header filters of a backend, a WebSocket; a route sluice
//! refuses and a Gateway of another controller serve nothing.

mod envoy_support;

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::harness::{Harness, docs, services, slice};
use sluice::cli::bootstrap::XdsProtocol;

const CLASSES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: sluice}
spec: {controllerName: sluice.dev/gateway-controller}
---
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: other}
spec: {controllerName: example.com/other-controller}
";

const GATEWAYS: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: edge, namespace: gw}
spec:
  gatewayClassName: sluice
  listeners:
  - {name: http, protocol: HTTP, port: 80}
  - name: https
    protocol: HTTPS
    port: 443
    hostname: secure.example.com
    tls: {certificateRefs: [{name: cert}]}
---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {name: elsewhere, namespace: gw}
spec:
  gatewayClassName: other
  listeners: [{name: http, protocol: HTTP, port: 80}]
";

/// The GatewayClasses, then a Gateway `edge` of sluice's in `namespace` with one HTTP listener.
fn http_gateway(namespace: &str) -> String {
    format!(
        "{CLASSES}---
apiVersion: gateway.networking.k8s.io/v1
kind: Gateway
metadata: {{name: edge, namespace: {namespace}}}
spec:
  gatewayClassName: sluice
  listeners: [{{name: http, protocol: HTTP, port: 80}}]
"
    )
}

/// An HTTPRoute `app` in `namespace` on Gateway `edge`, for `app.example.com`, with `rules`
/// (the YAML of the list under `rules:`).
fn app_route(namespace: &str, rules: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: app, namespace: {namespace}}}
spec:
  parentRefs: [{{name: edge}}]
  hostnames: [app.example.com]
  rules:
{rules}"
    )
}

fn store_route(api_backend: &str) -> String {
    format!(
        "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {{name: store, namespace: gw}}
spec:
  parentRefs: [{{name: edge, sectionName: http}}]
  hostnames: [shop.example.com]
  rules:
  - matches: [{{path: {{type: PathPrefix, value: /api}}}}]
    backendRefs: [{{name: {api_backend}, port: 80}}]
  - matches: [{{headers: [{{name: x-canary, value: \"yes\"}}]}}]
    backendRefs: [{{name: canary, port: 80}}]
  - matches: [{{path: {{type: Exact, value: /submit}}, method: POST}}]
    backendRefs: [{{name: api, port: 80}}]
  - backendRefs: [{{name: web, port: 80}}]
"
    )
}

const OTHER_ROUTES: &str = "apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: secure, namespace: gw}
spec:
  parentRefs: [{name: edge, sectionName: https}]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: filtered, namespace: gw}
spec:
  parentRefs: [{name: edge}]
  hostnames: [filtered.example.com]
  rules:
  - filters: [{type: ExtensionRef, extensionRef: {group: example.com, kind: Limit, name: slow}}]
    backendRefs: [{name: web, port: 80}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: theirs, namespace: gw}
spec:
  parentRefs: [{name: elsewhere}]
  hostnames: [theirs.example.com]
  rules: [{backendRefs: [{name: web, port: 80}]}]
---
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: broken, namespace: gw}
spec:
  parentRefs: [{name: edge}]
  hostnames: [broken.example.com]
  rules:
  - matches: [{path: {type: PathPrefix, value: /gone}}]
    backendRefs: [{name: nothere, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /none}}]
  - matches: [{path: {type: PathPrefix, value: /half}}]
    backendRefs: [{name: web, port: 80}, {name: nothere, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn httproutes_on_sluices_gateway_reach_their_backends() {
    let web = Backend::start("gw/web").await;
    let api = Backend::start("gw/api").await;
    let canary = Backend::start("gw/canary").await;
    let ck = rcgen::generate_simple_self_signed(vec!["secure.example.com".to_string()]).unwrap();
    let b64 = |s: String| base64::engine::general_purpose::STANDARD.encode(s);
    let secret = format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: cert, namespace: gw}}\ntype: kubernetes.io/tls\ndata:\n  tls.crt: {}\n  tls.key: {}\n",
        b64(ck.cert.pem()),
        b64(ck.signing_key.serialize_pem())
    );
    let h = Harness::start(
        &[
            ("svc.yaml", services("gw", &[&web, &api, &canary])),
            ("secret.yaml", secret),
            ("gateway.yaml", format!("{CLASSES}---\n{GATEWAYS}")),
            ("store.yaml", store_route("api")),
            ("routes.yaml", OTHER_ROUTES.to_string()),
        ],
        XdsProtocol::Delta,
    )
    .await;

    h.expect("shop.example.com", "/", &[], "gw/web").await;
    assert_eq!(
        h.get("shop.example.com", "/api/orders", &[]).await,
        "gw/api"
    );
    assert_eq!(
        h.get("shop.example.com", "/apix", &[]).await,
        "gw/web",
        "PathPrefix is segment-wise"
    );
    assert_eq!(
        h.get("shop.example.com", "/", &[("x-canary", "yes")]).await,
        "gw/canary"
    );
    assert_eq!(h.get("SHOP.example.com:8080", "/", &[]).await, "gw/web");
    // GET /submit is not the POST rule's.
    assert_eq!(h.get("shop.example.com", "/submit", &[]).await, "gw/web");

    // The HTTPS listener's host: TLS with the listener's certificate; plain HTTP is redirected.
    h.expect_tls("secure.example.com", "/x", "gw/web").await;
    assert_eq!(
        h.get("secure.example.com", "/x", &[]).await,
        "301 https://secure.example.com/x"
    );

    // A rule with no valid backend answers 500, as the Gateway API asks; the route's other
    // rules are served.
    assert_eq!(h.get("broken.example.com", "/gone", &[]).await, "500");
    assert_eq!(h.get("broken.example.com", "/none", &[]).await, "500");
    assert_eq!(h.get("broken.example.com", "/", &[]).await, "gw/web");
    // Half of a rule's weight on a valid backend, half on one that is not: the invalid half's
    // requests answer 500, the rest reach the backend (40 requests: all on one side once in
    // 2^39 runs).
    let mut answers = std::collections::BTreeMap::new();
    for _ in 0..40 {
        let got = h.get("broken.example.com", "/half", &[]).await;
        *answers.entry(got).or_insert(0) += 1;
    }
    assert_eq!(
        answers.keys().collect::<Vec<_>>(),
        ["500", "gw/web"],
        "{answers:?}"
    );

    // A refused route and another controller's Gateway serve nothing.
    assert_eq!(h.get("filtered.example.com", "/", &[]).await, "404");
    assert_eq!(h.get("theirs.example.com", "/", &[]).await, "404");

    // An edit of the route reaches Envoy.
    h.write("store.yaml", &store_route("canary"));
    h.expect("shop.example.com", "/api/orders", &[], "gw/canary")
        .await;
    assert!(web.hits() > 0 && api.hits() > 0 && canary.hits() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_post_only_rule_takes_posts() {
    let web = Backend::start("post/web").await;
    let api = Backend::start("post/api").await;
    let route = store_route("api").replace("namespace: gw", "namespace: post");
    let gateways = GATEWAYS.replace("namespace: gw", "namespace: post");
    let gateways = gateways.split("---").next().unwrap().replace(
        "  - name: https\n    protocol: HTTPS\n    port: 443\n    hostname: secure.example.com\n    tls: {certificateRefs: [{name: cert}]}\n",
        "",
    );
    let canary_free = route.replace(
        "  - matches: [{headers: [{name: x-canary, value: \"yes\"}]}]\n    backendRefs: [{name: canary, port: 80}]\n",
        "",
    );
    let h = Harness::start(
        &[
            ("svc.yaml", services("post", &[&web, &api])),
            ("gateway.yaml", format!("{CLASSES}---\n{gateways}")),
            ("route.yaml", canary_free),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    h.expect("shop.example.com", "/submit", &[], "post/web")
        .await;
    let res = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap()
        .post(format!("http://127.0.0.1:{}/submit", h.http_port))
        .header(reqwest::header::HOST, "shop.example.com")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(res.text().await.unwrap(), "post/api");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_filters_change_requests_and_responses_and_redirects_and_rewrites_apply() {
    let web = Backend::start("filters/web").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /old}}]
    filters:
    - type: RequestRedirect
      requestRedirect: {scheme: https, hostname: new.example.com, statusCode: 301, path: {type: ReplaceFullPath, replaceFullPath: /moved}}
  - matches: [{path: {type: PathPrefix, value: /temp}}]
    filters: [{type: RequestRedirect, requestRedirect: {hostname: other.example.com}}]
  - matches: [{path: {type: PathPrefix, value: /shelf/}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 308, path: {type: ReplacePrefixMatch, replacePrefixMatch: /store}}}]
  - matches: [{path: {type: PathPrefix, value: /drop}}]
    filters: [{type: RequestRedirect, requestRedirect: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
  - matches: [{path: {type: Exact, value: /see-other}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 303, path: {type: ReplaceFullPath, replaceFullPath: /seen}}}]
  - matches: [{path: {type: Exact, value: /again}}]
    filters: [{type: RequestRedirect, requestRedirect: {statusCode: 307, port: 8443, path: {type: ReplaceFullPath, replaceFullPath: /again-later}}}]
  - matches: [{path: {type: PathPrefix, value: /legacy}}]
    filters: [{type: URLRewrite, urlRewrite: {hostname: internal.example.com, path: {type: ReplaceFullPath, replaceFullPath: /v2/home}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /api/}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /v3}}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: PathPrefix, value: /strip}}]
    filters: [{type: URLRewrite, urlRewrite: {path: {type: ReplacePrefixMatch, replacePrefixMatch: /}}}]
    backendRefs: [{name: web, port: 80}]
  - filters:
    - type: RequestHeaderModifier
      requestHeaderModifier:
        set: [{name: X-Team, value: shop}, {name: X-Share, value: \"100%\"}]
        add: [{name: X-Via, value: sluice}]
        remove: [x-secret]
    - type: ResponseHeaderModifier
      responseHeaderModifier:
        set: [{name: X-Frame-Options, value: DENY}]
        remove: [x-backend]
    backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("filters", &[&web])),
            ("gateway.yaml", http_gateway("filters")),
            ("route.yaml", app_route("filters", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/", &[], "filters/web").await;
    let client = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let get = |path: &str| {
        client
            .get(format!("http://127.0.0.1:{}{path}", h.http_port))
            .header(reqwest::header::HOST, "app.example.com")
    };
    let res = get("/page")
        .header("x-team", "someone-else")
        .header("x-via", "client")
        .header("x-secret", "s3cret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    // Response headers: set, and the backend's x-backend removed.
    assert_eq!(res.headers()["x-frame-options"], "DENY");
    assert!(
        res.headers().get("x-backend").is_none(),
        "{:?}",
        res.headers()
    );
    assert_eq!(res.text().await.unwrap(), "filters/web");
    // Request headers: set replaces, add keeps the client's, remove removes; `%` is literal.
    assert_eq!(web.last_header("x-team"), ["shop"]);
    assert_eq!(web.last_header("x-share"), ["100%"]);
    let via = web.last_header("x-via").join(",");
    assert!(via.contains("client") && via.contains("sluice"), "{via}");
    assert!(web.last_header("x-secret").is_empty());

    // URLRewrite: the backend sees the rewritten host and path, the query kept.
    let res = get("/legacy/page?q=1").send().await.unwrap();
    assert_eq!(res.text().await.unwrap(), "filters/web");
    assert_eq!(web.last_header("host"), ["internal.example.com"]);
    assert_eq!(web.last_header(":path"), ["/v2/home?q=1"]);
    // ReplacePrefixMatch: the prefix the route matched (segment-wise) is replaced.
    for (sent, seen) in [
        ("/api/items?x=1", "/v3/items?x=1"),
        ("/api", "/v3"),
        ("/strip/a/b?q=2", "/a/b?q=2"),
        ("/strip", "/"),
        ("/stripped", "/stripped"),
    ] {
        let res = get(sent).send().await.unwrap();
        assert_eq!(res.text().await.unwrap(), "filters/web");
        assert_eq!(web.last_header(":path"), [seen], "{sent}");
    }

    let res = get("/old/thing?q=1").send().await.unwrap();
    assert_eq!(res.status().as_u16(), 301);
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("https://new.example.com"),
        "{location}"
    );
    assert!(location.contains("/moved"), "{location}");
    let res = get("/temp/x").send().await.unwrap();
    assert_eq!(
        res.status().as_u16(),
        302,
        "the Gateway API's default status"
    );
    let location = res.headers()["location"].to_str().unwrap().to_string();
    assert!(
        location.starts_with("http://other.example.com"),
        "{location}"
    );
    assert!(location.ends_with("/temp/x"), "{location}");
    // A redirect's ReplacePrefixMatch: the prefix the route matched (segment-wise) replaced in
    // the Location, the query kept.
    // The statuses the Gateway API allows besides 301 and 302, and a port.
    for (sent, status, path) in [
        ("/shelf/a/b?q=1", 308, "/store/a/b?q=1"),
        ("/shelf", 308, "/store"),
        ("/drop/x?y=2", 302, "/x?y=2"),
        ("/drop", 302, "/"),
        ("/see-other", 303, "/seen"),
        ("/again", 307, ":8443/again-later"),
    ] {
        let res = get(sent).send().await.unwrap();
        assert_eq!(res.status().as_u16(), status, "{sent}");
        let location = res.headers()["location"].to_str().unwrap().to_string();
        assert_eq!(location, format!("http://app.example.com{path}"), "{sent}");
    }
}

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
async fn query_parameter_and_regular_expression_path_matches() {
    let web = Backend::start("query/web").await;
    let api = Backend::start("query/api").await;
    let rules = "  - matches: [{queryParams: [{name: v, value: \"2\"}]}]
    backendRefs: [{name: api, port: 80}]
  - matches: [{path: {type: RegularExpression, value: \"/items/[0-9]+\"}}]
    backendRefs: [{name: api, port: 80}]
  - matches: [{path: {type: Exact, value: /items/7}}]
    backendRefs: [{name: web, port: 80}]
  - matches: [{path: {type: Exact, value: /x}, queryParams: [{name: v, type: RegularExpression, value: \"[34]\"}, {name: lang, value: en}]}]
    backendRefs: [{name: api, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("query", &[&web, &api])),
            ("gateway.yaml", http_gateway("query")),
            ("route.yaml", app_route("query", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/?v=2", &[], "query/api").await;
    for (path, want) in [
        ("/a/b?x=1&v=2", "query/api"),
        ("/?v=2&v=3", "query/api"),
        // The first value of a name is the one compared, as it is written.
        ("/?v=3&v=2", "query/web"),
        ("/?v=%32", "query/web"),
        ("/?v=20", "query/web"),
        ("/?V=2", "query/web"),
        ("/", "query/web"),
        ("/x?lang=en&v=4", "query/api"),
        ("/x?v=3&lang=en", "query/api"),
        // A regular expression matches the whole value.
        ("/x?lang=en&v=34", "query/web"),
        ("/x?v=4", "query/web"),
        // A regular expression path: the whole path, without the query, slashes merged; an
        // exact path comes first.
        ("/items/12", "query/api"),
        ("/items/12?a=b", "query/api"),
        ("/items//12", "query/api"),
        ("/items/7", "query/web"),
        ("/items/12/x", "query/web"),
        ("/items/x", "query/web"),
    ] {
        assert_eq!(h.get("app.example.com", path, &[]).await, want, "{path}");
    }
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_backends_header_filters_change_only_the_requests_and_answers_of_that_backend() {
    let blue = Backend::start("pick/blue").await;
    let green = Backend::start("pick/green").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /split}}]
    backendRefs:
    - name: blue
      port: 80
      filters:
      - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Pick, value: blue}], remove: [x-secret]}}
      - {type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: X-Served-By, value: blue}]}}
    - name: green
      port: 80
      filters:
      - {type: RequestHeaderModifier, requestHeaderModifier: {set: [{name: X-Pick, value: green}]}}
      - {type: ResponseHeaderModifier, responseHeaderModifier: {set: [{name: X-Served-By, value: green}]}}
  - backendRefs:
    - {name: green, port: 80, filters: [{type: RequestHeaderModifier, requestHeaderModifier: {add: [{name: X-Only, value: green}]}}]}
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("pick", &[&blue, &green])),
            ("gateway.yaml", http_gateway("pick")),
            ("route.yaml", app_route("pick", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/", &[], "pick/green").await;
    assert_eq!(green.last_header("x-only"), ["green"]);
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    // Half the weight each: 40 requests reach both (all on one side once in 2^39 runs). Each
    // answer carries its own backend's response header, and each backend saw its own request
    // header only.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..40 {
        let res = (client.get(format!("http://127.0.0.1:{}/split", h.http_port)))
            .header(reqwest::header::HOST, "app.example.com")
            .header("x-secret", "s3cret")
            .send()
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
        let served_by = res.headers()["x-served-by"].to_str().unwrap().to_string();
        let body = res.text().await.unwrap();
        assert_eq!(body, format!("pick/{served_by}"));
        let (backend, secret) = match served_by.as_str() {
            "blue" => (&blue, Vec::<String>::new()),
            _ => (&green, vec!["s3cret".to_string()]),
        };
        assert_eq!(backend.last_header("x-pick"), [served_by.as_str()]);
        assert_eq!(backend.last_header("x-secret"), secret);
        seen.insert(served_by);
    }
    assert_eq!(seen.into_iter().collect::<Vec<_>>(), ["blue", "green"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cors_policy_answers_preflights_and_marks_the_answers_of_allowed_origins() {
    let web = Backend::start("cors/web").await;
    let rules = "  - matches: [{path: {type: PathPrefix, value: /api}}]
    filters:
    - type: CORS
      cors:
        allowOrigins: [\"https://app.example.com\", \"https://*.example.org\"]
        allowMethods: [GET, PUT]
        allowHeaders: [x-token]
        exposeHeaders: [x-trace]
        allowCredentials: true
        maxAge: 600
    backendRefs: [{name: web, port: 80}]
  - backendRefs: [{name: web, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("cors", &[&web])),
            ("gateway.yaml", http_gateway("cors")),
            ("route.yaml", app_route("cors", rules)),
        ],
        XdsProtocol::Delta,
    )
    .await;
    h.expect("app.example.com", "/api/items", &[], "cors/web")
        .await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let send = |method: reqwest::Method, path: &str, origin: &str| {
        client
            .request(method, format!("http://127.0.0.1:{}{path}", h.http_port))
            .header(reqwest::header::HOST, "app.example.com")
            .header(reqwest::header::ORIGIN, origin)
    };
    let preflight = |path: &str, origin: &str| {
        send(reqwest::Method::OPTIONS, path, origin)
            .header("access-control-request-method", "PUT")
            .header("access-control-request-headers", "x-token")
            .send()
    };
    let header = |res: &reqwest::Response, name: &str| -> Option<String> {
        (res.headers().get(name)).map(|v| v.to_str().unwrap().to_string())
    };

    // A preflight from an allowed origin (exact, in another letter case, or under the
    // wildcard, any number of labels deep) is answered by Envoy with the policy.
    let hits = web.hits();
    for origin in [
        "https://app.example.com",
        "HTTPS://App.Example.com",
        "https://shop.eu.example.org",
    ] {
        let res = preflight("/api/items", origin).await.unwrap();
        assert_eq!(res.status().as_u16(), 200, "{origin}");
        assert_eq!(
            header(&res, "access-control-allow-origin").as_deref(),
            Some(origin)
        );
        assert_eq!(
            header(&res, "access-control-allow-methods").as_deref(),
            Some("GET,PUT")
        );
        assert_eq!(
            header(&res, "access-control-allow-headers").as_deref(),
            Some("x-token")
        );
        assert_eq!(
            header(&res, "access-control-max-age").as_deref(),
            Some("600")
        );
        assert_eq!(
            header(&res, "access-control-allow-credentials").as_deref(),
            Some("true")
        );
    }
    // One from another origin gets no CORS headers, and is not forwarded either.
    for origin in [
        "https://evil.example.com",
        "http://app.example.com",
        "https://example.org",
    ] {
        let res = preflight("/api/items", origin).await.unwrap();
        assert_eq!(res.status().as_u16(), 200, "{origin}");
        assert_eq!(
            header(&res, "access-control-allow-origin"),
            None,
            "{origin}"
        );
    }
    assert_eq!(web.hits(), hits, "a preflight reached the backend");

    // The backend's answer to an allowed origin's request carries the policy's headers.
    let res = send(
        reqwest::Method::GET,
        "/api/items",
        "https://app.example.com",
    )
    .send()
    .await
    .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    assert_eq!(
        header(&res, "access-control-allow-origin").as_deref(),
        Some("https://app.example.com")
    );
    assert_eq!(
        header(&res, "access-control-expose-headers").as_deref(),
        Some("x-trace")
    );
    assert_eq!(
        header(&res, "access-control-allow-credentials").as_deref(),
        Some("true")
    );
    assert_eq!(res.text().await.unwrap(), "cors/web");
    // Not to another origin's, nor on a rule without a policy.
    for (path, origin) in [
        ("/api/items", "https://evil.example.com"),
        ("/other", "https://app.example.com"),
    ] {
        let res = send(reqwest::Method::GET, path, origin)
            .send()
            .await
            .unwrap();
        assert_eq!(
            header(&res, "access-control-allow-origin"),
            None,
            "{path} {origin}"
        );
        assert_eq!(res.text().await.unwrap(), "cors/web");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grpc_calls_reach_the_backend_of_their_method_over_cleartext_http2() {
    let cart = Backend::start("grpc/cart").await;
    let catalog = Backend::start("grpc/catalog").await;
    let route = "apiVersion: gateway.networking.k8s.io/v1
kind: GRPCRoute
metadata: {name: shop, namespace: grpc}
spec:
  parentRefs: [{name: edge}]
  hostnames: [grpc.example.com]
  rules:
  - matches: [{method: {service: shop.Cart, method: Add}}]
    backendRefs: [{name: cart, port: 80}]
  - matches: [{method: {service: shop.Catalog}}]
    filters: [{type: RequestMirror, requestMirror: {backendRef: {name: cart, port: 80}}}]
    backendRefs: [{name: catalog, port: 80}]
  - matches: [{method: {service: shop.Gone}}]
    backendRefs: [{name: nothere, port: 80}]
  - matches: [{method: {type: RegularExpression, service: \"shop\\\\.(Bag|Box)\", method: \"Get.*\"}}]
    backendRefs: [{name: catalog, port: 80}]
  - matches: [{method: {method: Ping}}]
    backendRefs: [{name: cart, port: 80}]
";
    let h = Harness::start(
        &[
            ("svc.yaml", services("grpc", &[&cart, &catalog])),
            ("gateway.yaml", http_gateway("grpc")),
            ("route.yaml", route.to_string()),
        ],
        XdsProtocol::Sotw,
    )
    .await;
    // Over HTTP/2 the host is the URL's (`:authority`), so the name resolves to Envoy.
    let client = reqwest::Client::builder()
        .no_proxy()
        .http2_prior_knowledge()
        .resolve(
            "grpc.example.com",
            format!("127.0.0.1:{}", h.http_port).parse().unwrap(),
        )
        .build()
        .unwrap();
    // Envoy answers a gRPC call it cannot route as gRPC does: HTTP 200 with a `grpc-status`.
    let call = |path: &str| {
        let req = client
            .post(format!("http://grpc.example.com:{}{path}", h.http_port))
            .header(reqwest::header::CONTENT_TYPE, "application/grpc")
            .header("te", "trailers")
            .body(vec![0u8, 0, 0, 0, 0]);
        async move {
            let res = req.send().await.map_err(|e| e.to_string())?;
            let version = res.version();
            let grpc_status = (res.headers().get("grpc-status"))
                .map(|v| v.to_str().unwrap_or_default().to_string());
            let body = res.text().await.map_err(|e| e.to_string())?;
            Ok::<_, String>((version, grpc_status, body))
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let got = call("/shop.Cart/Add").await;
        if let Ok((version, None, body)) = &got
            && body == "grpc/cart"
        {
            assert_eq!(*version, reqwest::Version::HTTP_2);
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the GRPCRoute is not served (last: {got:?}); Envoy log:\n{}",
            h.envoy_log_tail()
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // A regular expression of the service and the method.
    let (_, _, body) = call("/shop.Box/GetAll").await.unwrap();
    assert_eq!(body, "grpc/catalog");
    let (_, grpc_status, _) = call("/shop.Box/Put").await.unwrap();
    assert_eq!(grpc_status.as_deref(), Some("12"));
    let carts = cart.hits();
    let (_, _, body) = call("/shop.Catalog/List").await.unwrap();
    assert_eq!(body, "grpc/catalog");
    // The Catalog rule's mirror copies the call to the cart backend, over HTTP/2 as well.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while cart.hits() == carts && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(cart.hits(), carts + 1);
    // Over HTTP/2 the backend sees the whole URI: the call's path, the host marked `-shadow`.
    assert_eq!(
        cart.last_header(":path"),
        ["http://grpc.example.com-shadow/shop.Catalog/List"]
    );
    // A method without its service: that method of any service, nothing else.
    let (_, _, body) = call("/health.Check/Ping").await.unwrap();
    assert_eq!(body, "grpc/cart");
    for other in ["/health.Check/PingAll", "/a/b/Ping"] {
        let (_, grpc_status, _) = call(other).await.unwrap();
        assert_eq!(grpc_status.as_deref(), Some("12"), "{other}");
    }
    // Another method of the Cart service matches no rule: UNIMPLEMENTED (12).
    let (_, grpc_status, _) = call("/shop.Cart/Remove").await.unwrap();
    assert_eq!(grpc_status.as_deref(), Some("12"));
    // A rule with no valid backend: UNAVAILABLE (14), as the Gateway API asks of a GRPCRoute.
    let (_, grpc_status, _) = call("/shop.Gone/Find").await.unwrap();
    assert_eq!(grpc_status.as_deref(), Some("14"));
    assert!(cart.hits() > 0 && catalog.hits() > 0);
}
