//! Real Envoy fed by sluice standalone from Gateway API objects: a GatewayClass of sluice's
//! controller, a Gateway with HTTP and HTTPS listeners, and HTTPRoutes with path, header,
//! method, query parameter and regular expression matches, weights and a TLS host, gRPC
//! methods; a route sluice refuses and a Gateway of another controller serve nothing.

mod envoy_support;

use base64::Engine;
use envoy_support::backend::Backend;
use envoy_support::gateway::{
    CLASSES, GATEWAYS, OTHER_ROUTES, app_route, http_gateway, store_route,
};
use envoy_support::harness::{Harness, services};
use sluice::cli::bootstrap::XdsProtocol;

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
