//! Real Envoy fed by sluice standalone from Gateway API HTTPRoutes with filters: header
//! filters of a rule and of a backend, redirects and rewrites, and a CORS policy.

mod envoy_support;

use envoy_support::backend::Backend;
use envoy_support::gateway::{app_route, http_gateway};
use envoy_support::harness::{Harness, services};
use sluice::cli::bootstrap::XdsProtocol;

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
