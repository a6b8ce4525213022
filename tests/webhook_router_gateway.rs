//! The webhook through `router().oneshot(...)` with the JSON fixtures in tests/fixtures/admission:
//! Gateway API objects, judged by the Gateway they attach to.

mod webhook_support;

use serde_json::json;
use sluice::dag::Options;
use sluice::webhook::{IndexHandle, Metrics, State};
use webhook_support::*;

// ---- Gateway API ----

#[tokio::test]
async fn gateway_api_objects_are_denied_with_the_field_errors() {
    // Without a configured controller name (a GatewayClass naming another controller is otherwise
    // not sluice's to refuse).
    let state = State::new(
        sluice::webhook::AdmissionSettings::default(),
        IndexHandle::from_snapshot(&mk_snapshot("index.yaml"), Options::default()),
        Metrics::new(),
    );
    let cases = [
        (
            "gateway_conflicting_listeners",
            r#"spec.listeners[1].protocol: HTTP on port 443 conflicts with spec.listeners[0] ("https", protocol HTTPS)"#,
        ),
        (
            "gateway_conflicting_listeners",
            "spec.listeners[2].tls.certificateRefs: is required; a listener in tls mode Terminate (the default) needs at least one certificate Secret",
        ),
        (
            "gatewayclass_bad_controller",
            r#"spec.controllerName: "no-domain" must be a domain-prefixed path like "example.com/gateway-controller""#,
        ),
        (
            "httproute_bad_matches",
            r#"spec.rules[0].matches[0].path.value: "/item/(\\d+" is not a valid RE2 regular expression (error: unclosed group)"#,
        ),
        (
            "httproute_bad_matches",
            r#"spec.rules[0].matches[1].path.value: "cart" must start with "/""#,
        ),
        (
            "httproute_bad_matches",
            r#"spec.rules[0].matches[2].headers[0].value: "(a)\\1" is not a valid RE2 regular expression"#,
        ),
        (
            "grpcroute_bad_method",
            r#"spec.rules[0].matches[0].method.service: "shop v1" must be a fully qualified gRPC service name like "package.Service""#,
        ),
        (
            "grpcroute_bad_method",
            "spec.rules[0].backendRefs[0].port: is required; a Service backend names the Service port to send to",
        ),
        (
            "tlsroute_bad_hostname",
            r#"spec.hostnames[0]: "db_example.com" must be a DNS name"#,
        ),
        (
            "tcproute_backend_without_port",
            "spec.rules[0].backendRefs[0].port: is required",
        ),
        (
            "referencegrant_bad_namespace",
            r#"spec.from[0].namespace: "Shop Team" must be a valid namespace name"#,
        ),
        (
            "listenerset_bad",
            r#"spec.parentRef.kind: "Service" is not a kind a ListenerSet attaches to; set it to "Gateway" (or leave it out)"#,
        ),
        (
            "listenerset_bad",
            r#"spec.listeners[1].name: "web" is already the name of spec.listeners[0]; listener names must be unique within a ListenerSet"#,
        ),
        (
            "listenerset_bad",
            "spec.listeners[2].tls.certificateRefs: is required; a listener in tls mode Terminate (the default) needs at least one certificate Secret",
        ),
    ];
    for (name, literal) in cases {
        let reply = assert_denied_with_shared_errors(&state, name).await;
        assert!(
            reply.message().contains(literal),
            "{name}: {literal:?} missing from {reply}"
        );
    }
}

#[tokio::test]
async fn a_backend_tls_policy_is_denied_naming_each_field_its_value_and_the_fix() {
    let state = mk_state();
    let reply = assert_denied_with_shared_errors(&state, "backendtlspolicy_bad").await;
    for literal in [
        r#"spec.targetRefs[0]: kind "Gateway" of group "gateway.networking.k8s.io" is not a target sluice applies a BackendTLSPolicy to; target a Service (group "", kind Service)"#,
        r#"spec.validation: sets both caCertificateRefs and wellKnownCACertificates ("System"); keep one"#,
        r#"spec.validation.hostname: "" must be a DNS name"#,
    ] {
        assert!(
            reply.message().contains(literal),
            "{literal:?} missing from {reply}"
        );
    }
    // Fixed, it is allowed; trusting a well-known CA set alone is a warning (sluice has none,
    // another implementation may).
    let mut object = fixture("backendtlspolicy_bad")["request"]["object"].clone();
    object["spec"]["targetRefs"] = json!([{"group": "", "kind": "Service", "name": "api"}]);
    object["spec"]["validation"]["hostname"] = "api.shop.example.com".into();
    let mut with_cas = object.clone();
    with_cas["spec"]["validation"]
        .as_object_mut()
        .unwrap()
        .remove("wellKnownCACertificates");
    let reply = post(
        &state,
        "/validate",
        mk_review_of("backendtlspolicy_bad", with_cas),
    )
    .await;
    reply.assert_allowed();
    assert!(reply.warnings().is_empty(), "{reply}");
    object["spec"]["validation"]
        .as_object_mut()
        .unwrap()
        .remove("caCertificateRefs");
    let reply = post(
        &state,
        "/validate",
        mk_review_of("backendtlspolicy_bad", object),
    )
    .await;
    reply.assert_allowed();
    assert!(
        reply.warnings()[0].contains("wellKnownCACertificates: \"System\" is not supported"),
        "{reply}"
    );
}

#[tokio::test]
async fn a_route_whose_gateways_belong_to_another_controller_is_not_refused() {
    let state = mk_state();
    post_fixture(&state, "/validate", "httproute_for_another_controller")
        .await
        .assert_allowed();
    let class = post_fixture(&state, "/validate", "gatewayclass_bad_controller").await;
    class.assert_allowed();
    // Without a configured controller name every Gateway API object is checked.
    let unscoped = State::new(
        sluice::webhook::AdmissionSettings::default(),
        IndexHandle::from_snapshot(&mk_snapshot("index.yaml"), Options::default()),
        Metrics::new(),
    );
    post_fixture(&unscoped, "/validate", "httproute_for_another_controller")
        .await
        .assert_denied(422);
}

#[tokio::test]
async fn what_sluice_does_not_route_yet_is_denied_in_a_route_on_its_gateway() {
    let state = mk_state();
    let mut review = fixture("httproute_for_another_controller");
    let route = &mut review["request"]["object"];
    route["spec"] = serde_json::json!({
        "parentRefs": [{"name": "edge", "namespace": "infra"}],
        "hostnames": ["store.example.com"],
        "rules": [
            {"filters": [{"type": "ExtensionRef", "extensionRef": {"group": "example.com", "kind": "Limit", "name": "slow"}}],
             "backendRefs": [{"name": "store", "port": 8080}]},
            {"backendRefs": [{"name": "store", "port": 8080, "filters": [{"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "store", "port": 8080}}}]}]},
            // Header filters on a backendRef are routed.
            {"matches": [{"path": {"type": "PathPrefix", "value": "/pick"}}],
             "backendRefs": [{"name": "store", "port": 8080, "filters": [{"type": "RequestHeaderModifier", "requestHeaderModifier": {"set": [{"name": "a", "value": "b"}]}}]}]},
            // Query parameter and regular expression matches are routed.
            {"matches": [{"path": {"type": "RegularExpression", "value": "/q/[0-9]+"},
                          "queryParams": [{"name": "a", "value": "b"}, {"name": "c", "type": "RegularExpression", "value": "[0-9]+"}]}],
             "backendRefs": [{"name": "store", "port": 8080}]},
            // A redirect's ReplacePrefixMatch is routed beside PathPrefix matches only.
            {"matches": [{"path": {"type": "PathPrefix", "value": "/old"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}]},
            {"matches": [{"path": {"type": "Exact", "value": "/gone"}}],
             "filters": [{"type": "RequestRedirect", "requestRedirect": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/new"}}}]},
            // CORS is routed.
            {"filters": [{"type": "CORS", "cors": {"allowOrigins": ["https://*.example.com"], "allowMethods": ["GET"]}}],
             "backendRefs": [{"name": "store", "port": 8080}]},
        ],
    });
    let object = route.clone();
    let reply = post(&state, "/validate", serde_json::to_vec(&review).unwrap()).await;
    reply.assert_denied(422);
    let msg = reply.message();
    assert!(
        msg.contains(
            "spec.rules[0].filters[0].type: sluice applies RequestHeaderModifier, ResponseHeaderModifier, RequestMirror, RequestRedirect, URLRewrite and CORS filters; remove this one"
        ),
        "{reply}"
    );
    assert!(msg.contains("spec.rules[1].backendRefs[0].filters[0].type: sluice applies RequestHeaderModifier and ResponseHeaderModifier filters on a backendRef; move this one to the rule's filters"), "{reply}");
    assert!(msg.contains("spec.rules[5].filters[0].requestRedirect.path.type: ReplacePrefixMatch replaces the prefix a PathPrefix match took; every match of the rule needs a PathPrefix path (or use ReplaceFullPath)"), "{reply}");
    for routed in [2, 3, 4, 6] {
        assert!(!msg.contains(&format!("spec.rules[{routed}]")), "{reply}");
    }
    // The same route under another controller's Gateway is that controller's to judge.
    let mut theirs = object;
    theirs["spec"]["parentRefs"][0]["name"] = "nginx-edge".into();
    post(
        &state,
        "/validate",
        mk_review_of("httproute_for_another_controller", theirs),
    )
    .await
    .assert_allowed();
}

#[tokio::test]
async fn a_tcproute_of_several_rules_is_denied_on_sluices_gateway_only() {
    let state = mk_state();
    let with_rules = |gateway: &str, rules: serde_json::Value| {
        let mut object = fixture("tcproute_backend_without_port")["request"]["object"].clone();
        object["spec"]["parentRefs"][0]["name"] = gateway.into();
        object["spec"]["rules"] = rules;
        mk_review_of("tcproute_backend_without_port", object)
    };
    let one = json!([{"backendRefs": [{"name": "redis", "port": 6379, "weight": 3}, {"name": "redis-b", "port": 6379}]}]);
    post(&state, "/validate", with_rules("edge", one))
        .await
        .assert_allowed();
    let two = json!([
        {"backendRefs": [{"name": "redis", "port": 6379}]},
        {"backendRefs": [{"name": "redis-b", "port": 6379}]},
    ]);
    let reply = post(&state, "/validate", with_rules("edge", two.clone())).await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains("spec.rules: sluice sends a TCPRoute's connections to the backends of one rule, and this route has 2; put every backendRef in one rule"),
        "{reply}"
    );
    // Another controller's Gateway judges its own routes.
    post(&state, "/validate", with_rules("nginx-edge", two))
        .await
        .assert_allowed();
}

#[tokio::test]
async fn listeners_sluice_does_not_serve_are_denied_in_a_gateway_of_its_class_only() {
    let state = mk_state();
    let with_listeners = |class: &str, listeners: serde_json::Value| {
        let mut object = fixture("gateway_conflicting_listeners")["request"]["object"].clone();
        object["spec"]["gatewayClassName"] = class.into();
        object["spec"]["listeners"] = listeners;
        mk_review_of("gateway_conflicting_listeners", object)
    };
    let served = json!([
        {"name": "http", "port": 80, "protocol": "HTTP"},
        {"name": "pass", "port": 443, "protocol": "TLS", "hostname": "db.example.com", "tls": {"mode": "Passthrough"}},
        {"name": "pg", "port": 5432, "protocol": "TCP"},
        {"name": "tls", "port": 8443, "protocol": "TLS", "hostname": "vault.example.com", "tls": {"mode": "Terminate", "certificateRefs": [{"name": "vault"}]}},
    ]);
    post(&state, "/validate", with_listeners("sluice", served))
        .await
        .assert_allowed();
    let not_served = json!([
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "pass", "port": 443, "protocol": "HTTPS", "tls": {"mode": "Passthrough"}},
        {"name": "pg", "port": 5432, "protocol": "TCP", "allowedRoutes": {"kinds": [{"kind": "HTTPRoute"}]}},
    ]);
    let reply = post(
        &state,
        "/validate",
        with_listeners("sluice", not_served.clone()),
    )
    .await;
    reply.assert_denied(422);
    let msg = reply.message();
    for want in [
        r#"spec.listeners[0].protocol: sluice serves HTTP, HTTPS, TLS and TCP listeners, not "UDP""#,
        "spec.listeners[1].tls.mode: an HTTPS listener terminates TLS (mode Terminate); to pass connections through, use a listener of protocol TLS with TLSRoutes",
        "spec.listeners[2].allowedRoutes.kinds: sluice attaches TCPRoute to TCP listeners, not HTTPRoute",
    ] {
        assert!(msg.contains(want), "{want}\n{reply}");
    }
    // Another controller's class: its controller judges what it serves.
    post(&state, "/validate", with_listeners("nginx", not_served))
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_listener_set_is_judged_as_its_gateways_listeners_are() {
    let state = mk_state();
    let with = |parent: &str, listeners: serde_json::Value| {
        let mut object = fixture("listenerset_bad")["request"]["object"].clone();
        object["spec"]["parentRef"] = json!({"name": parent});
        object["spec"]["listeners"] = listeners;
        mk_review_of("listenerset_bad", object)
    };
    // Listeners of one set sharing a port with conflicting protocols are not refused: which one
    // wins is decided with the Gateway's and the other sets' listeners, and said in status.
    let served = json!([
        {"name": "web", "port": 80, "protocol": "HTTP", "hostname": "web.example.com"},
        {"name": "raw", "port": 80, "protocol": "TCP"},
        {"name": "pass", "port": 443, "protocol": "TLS", "hostname": "db.example.com", "tls": {"mode": "Passthrough"}},
    ]);
    post(&state, "/validate", with("edge", served))
        .await
        .assert_allowed();
    let not_served = json!([
        {"name": "dns", "port": 53, "protocol": "UDP"},
    ]);
    let reply = post(&state, "/validate", with("edge", not_served.clone())).await;
    reply.assert_denied(422);
    let want = r#"spec.listeners[0].protocol: sluice serves HTTP, HTTPS, TLS and TCP listeners, not "UDP""#;
    assert!(reply.message().contains(want), "{want}\n{reply}");
    // On another controller's Gateway: its controller judges what it serves.
    post(&state, "/validate", with("nginx-edge", not_served))
        .await
        .assert_allowed();
}

#[tokio::test]
async fn frontend_client_validation_mistakes_are_denied_in_a_gateway_of_its_class_only() {
    let state = mk_state();
    let with_frontend = |class: &str, frontend: serde_json::Value| {
        let mut object = fixture("gateway_conflicting_listeners")["request"]["object"].clone();
        object["spec"]["gatewayClassName"] = class.into();
        object["spec"]["listeners"] = json!([
            {"name": "https", "port": 443, "protocol": "HTTPS", "tls": {"certificateRefs": [{"name": "cert"}]}},
            {"name": "http", "port": 80, "protocol": "HTTP"},
        ]);
        object["spec"]["tls"] = json!({"frontend": frontend});
        mk_review_of("gateway_conflicting_listeners", object)
    };
    let cm = json!({"group": "", "kind": "ConfigMap", "name": "ca"});
    let valid = json!({
        "default": {"validation": {"caCertificateRefs": [cm]}},
        "perPort": [{"port": 443, "tls": {"validation": {"mode": "AllowInsecureFallback", "caCertificateRefs": [cm]}}}],
    });
    post(&state, "/validate", with_frontend("sluice", valid))
        .await
        .assert_allowed();
    let mistakes = json!({
        "default": {"validation": {"caCertificateRefs": [{"group": "", "kind": "Secret", "name": "ca"}]}},
        "perPort": [
            {"port": 443, "tls": {"validation": {"caCertificateRefs": [cm]}}},
            {"port": 443, "tls": {"validation": {"caCertificateRefs": [cm]}}},
            {"port": 8443, "tls": {"validation": {"caCertificateRefs": [cm]}}},
        ],
    });
    let reply = post(
        &state,
        "/validate",
        with_frontend("sluice", mistakes.clone()),
    )
    .await;
    reply.assert_denied(422);
    let msg = reply.message();
    for want in [
        r#"spec.tls.frontend.default.validation.caCertificateRefs[0]: "/Secret" is not a ConfigMap"#,
        r#"spec.tls.frontend.perPort[1].port: "443" is already configured by spec.tls.frontend.perPort[0]: merge the two entries into one"#,
        r#"spec.tls.frontend.perPort[2].port: "8443" is the port of no listener of the Gateway (their ports: 443, 80): fix the port or remove the entry"#,
    ] {
        assert!(msg.contains(want), "{want}\n{reply}");
    }
    // Another controller's class: its controller judges its Gateways.
    post(&state, "/validate", with_frontend("nginx", mistakes))
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_tlsroute_of_several_rules_is_denied_on_sluices_gateway() {
    let state = mk_state();
    let with_rules = |rules: serde_json::Value| {
        let mut object = fixture("tlsroute_bad_hostname")["request"]["object"].clone();
        object["spec"]["hostnames"] = json!(["db.example.com", "*.db.example.com"]);
        object["spec"]["rules"] = rules;
        mk_review_of("tlsroute_bad_hostname", object)
    };
    let one = json!([{"backendRefs": [{"name": "db", "port": 5432}, {"name": "db-b", "port": 5432, "weight": 2}]}]);
    post(&state, "/validate", with_rules(one))
        .await
        .assert_allowed();
    let two = json!([
        {"backendRefs": [{"name": "db", "port": 5432}]},
        {"backendRefs": [{"name": "db-b", "port": 5432}]},
    ]);
    let reply = post(&state, "/validate", with_rules(two)).await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains("spec.rules: sluice sends a TLSRoute's connections to the backends of one rule, and this route has 2"),
        "{reply}"
    );
}

#[tokio::test]
async fn a_grpc_method_match_needs_a_service_or_a_method_in_a_route_on_sluices_gateway() {
    let state = mk_state();
    let with_match = |method: serde_json::Value| {
        let mut object = fixture("grpcroute_bad_method")["request"]["object"].clone();
        object["spec"]["rules"] = json!([{
            "matches": [{"method": method}],
            "backendRefs": [{"name": "rpc", "port": 9000}],
        }]);
        mk_review_of("grpcroute_bad_method", object)
    };
    // A method alone: that method of every service.
    post(&state, "/validate", with_match(json!({"method": "Get"})))
        .await
        .assert_allowed();
    let reply = post(&state, "/validate", with_match(json!({"type": "Exact"}))).await;
    reply.assert_denied(422);
    assert!(
        reply
            .message()
            .contains("spec.rules[0].matches[0].method: must name a service, a method, or both"),
        "{reply}"
    );
}
