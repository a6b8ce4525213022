//! The webhook through `router().oneshot(...)` with the JSON fixtures in tests/fixtures/admission:
//! every rule family, mutation, and every kind of bad input.

mod webhook_support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice::dag::Options;
use sluice::webhook::metrics::{RequestLabels, kind_label};
use sluice::webhook::{IndexHandle, MAX_BODY_BYTES, Metrics, State};
use webhook_support::*;

fn uid_of(name: &str) -> String {
    fixture(name)["request"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Denied with code 422, the uid echoed, and every FieldError `validate_object` produces for the
/// same object listed in the message.
async fn assert_denied_with_shared_errors(state: &State, name: &str) -> Reply {
    let reply = post_fixture(state, "/validate", name).await;
    reply.assert_well_formed();
    reply.assert_denied(422);
    assert_eq!(reply.uid(), uid_of(name));
    let expected = field_errors_of(&fixture(name));
    assert!(
        !expected.is_empty(),
        "{name}: validate_object finds nothing wrong"
    );
    for e in &expected {
        assert!(
            reply.message().contains(e.as_str()),
            "{name}: {e:?} missing from {reply}"
        );
    }
    reply
}

// ---- IngressRoute, Route ----

#[tokio::test]
async fn a_valid_ingressroute_is_allowed_and_the_uid_echoed() {
    let state = mk_state();
    for name in ["ir_v1beta1_valid", "ir_v1_valid"] {
        let reply = post_fixture(&state, "/validate", name).await;
        reply.assert_well_formed();
        reply.assert_allowed();
        assert_eq!(reply.uid(), uid_of(name));
        assert_eq!(reply.review["apiVersion"], "admission.k8s.io/v1");
        assert!(reply.response().get("patch").is_none(), "{reply}");
    }
}

#[tokio::test]
async fn a_bad_ingressroute_match_is_denied_with_the_field_error() {
    let state = mk_state();
    let reply = assert_denied_with_shared_errors(&state, "ir_v1beta1_bad_match").await;
    assert!(
        reply
            .message()
            .starts_with("IngressRoute shop/shop is invalid: "),
        "{reply}"
    );
    assert!(
        reply
            .message()
            .contains(r#"spec.routes[2].match: "finance" must start with "/""#),
        "{reply}"
    );
    let causes = reply.response()["status"]["details"]["causes"]
        .as_array()
        .unwrap();
    assert!(
        causes.iter().any(|c| c["field"] == "spec.routes[2].match"),
        "{reply}"
    );
    assert_eq!(reply.response()["status"]["reason"], "Invalid");
    assert_eq!(
        reply.response()["status"]["details"]["kind"],
        "IngressRoute"
    );
    assert_eq!(
        reply.response()["status"]["details"]["group"],
        "contour.heptio.com"
    );
}

#[tokio::test]
async fn a_v1_ingressroute_with_a_lookahead_regex_is_denied() {
    let state = mk_state();
    let reply = assert_denied_with_shared_errors(&state, "ir_v1_bad_regex").await;
    assert!(
        reply
            .message()
            .contains("is not a valid RE2 regular expression"),
        "{reply}"
    );
}

#[tokio::test]
async fn dry_run_gets_the_same_verdict() {
    let state = mk_state();
    let wet = post_fixture(&state, "/validate", "ir_v1beta1_bad_match").await;
    let dry = post_fixture(&state, "/validate", "ir_v1beta1_bad_match_dry_run").await;
    dry.assert_denied(422);
    assert_eq!(dry.message(), wet.message());
    assert_eq!(dry.uid(), uid_of("ir_v1beta1_bad_match_dry_run"));
}

#[tokio::test]
async fn an_object_that_does_not_fit_the_schema_is_denied_naming_the_field() {
    let state = mk_state();
    let reply = post_fixture(&state, "/validate", "ir_v1beta1_port_not_a_number").await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"spec.routes[0].services[0].port: invalid type: string "eighty", expected i32"#
        ),
        "{reply}"
    );
}

#[tokio::test]
async fn an_update_is_denied_only_for_problems_it_introduces() {
    let state = mk_state();
    let introduced =
        post_fixture(&state, "/validate", "ir_v1beta1_update_introduces_problem").await;
    introduced.assert_denied(422);
    assert!(
        introduced
            .message()
            .contains(r#"spec.routes[2].match: "finance" must start with "/""#)
    );

    let kept = post_fixture(&state, "/validate", "ir_v1beta1_update_keeps_old_problem").await;
    kept.assert_allowed();
    assert!(
        kept.warnings().contains(
            &r#"spec.routes[2].match: "finance" must start with "/" (already so before this update)"#.to_string()
        ),
        "{kept}"
    );
}

#[tokio::test]
async fn a_root_claiming_a_host_another_root_owns_is_denied_naming_the_owner() {
    let state = mk_state();
    let reply = post_fixture(&state, "/validate", "ir_v1beta1_fqdn_taken").await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"spec.virtualhost.fqdn: fqdn "www.shop.example.com" is already claimed by IngressRoute shop/shop (the oldest object claiming a host owns it)"#
        ),
        "{reply}"
    );
    let causes = &reply.response()["status"]["details"]["causes"];
    assert_eq!(causes[0]["reason"], "FQDNConflict", "{reply}");

    let route = post_fixture(&state, "/validate", "route_host_taken").await;
    route.assert_denied(422);
    assert!(
        route.message().contains(r#"spec.host: fqdn "blog.example.com" is already claimed by Route blog/blog (the oldest object claiming a host owns it)"#),
        "{route}"
    );
}

/// The status `dag::build` gives the object of a fixture when it joins the given snapshot.
fn status_messages_of(
    name: &str,
    mut snapshot: sluice::store::Snapshot,
    options: &Options,
) -> Vec<String> {
    let object =
        match sluice::manifest::decode_value(fixture(name)["request"]["object"].clone()).unwrap() {
            sluice::manifest::Document::Object(o) => o,
            d => panic!("{d:?}"),
        };
    let me = object.object_ref();
    snapshot.insert(object);
    let dag = sluice::dag::build(&snapshot, options);
    dag.statuses[&me]
        .messages
        .iter()
        .map(|m| m.message.clone())
        .collect()
}

#[tokio::test]
async fn denials_of_cross_object_rules_use_the_words_of_the_status() {
    let cases = [
        ("ir_v1beta1_fqdn_taken", Options::default()),
        ("route_host_taken", Options::default()),
        (
            "ir_v1_root_in_team_namespace",
            Options {
                root_namespaces: vec!["app".into(), "infra".into()],
                ..Options::default()
            },
        ),
    ];
    for (name, options) in cases {
        let state = mk_state_with("index.yaml", options.clone());
        let reply = post_fixture(&state, "/validate", name).await;
        reply.assert_denied(422);
        let status = status_messages_of(name, mk_snapshot("index.yaml"), &options);
        assert_eq!(status.len(), 1, "{name}: {status:?}");
        assert!(
            reply.message().contains(&status[0]),
            "{name}: status says {:?}, webhook {reply}",
            status[0]
        );
    }
}

#[tokio::test]
async fn the_owner_may_update_itself() {
    let state = mk_state();
    post_fixture(&state, "/validate", "ir_v1beta1_owner_updates_itself")
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_root_outside_the_root_namespaces_is_denied() {
    let options = Options {
        root_namespaces: vec!["app".into(), "infra".into()],
        ..Options::default()
    };
    let state = mk_state_with("index.yaml", options);
    let reply = post_fixture(&state, "/validate", "ir_v1_root_in_team_namespace").await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"metadata.namespace: root IngressRoute in namespace "team-a" is not allowed; root namespaces are: app, infra"#
        ),
        "{reply}"
    );
    assert_eq!(
        reply.response()["status"]["details"]["causes"][0]["reason"],
        "RootNamespaceNotAllowed"
    );
    post_fixture(&state, "/validate", "ir_v1_valid")
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_bad_route_prefix_is_denied_with_the_field_error() {
    assert_denied_with_shared_errors(&mk_state(), "route_bad_prefix").await;
}

#[tokio::test]
async fn delete_is_always_allowed_without_a_patch() {
    let state = mk_state();
    for path in ["/validate", "/mutate"] {
        for name in ["ir_v1beta1_delete", "ingress_mutate_delete"] {
            let reply = post_fixture(&state, path, name).await;
            reply.assert_well_formed();
            reply.assert_allowed();
            assert_eq!(reply.uid(), uid_of(name));
            assert!(reply.response().get("patch").is_none(), "{reply}");
            assert!(reply.response().get("patchType").is_none(), "{reply}");
        }
    }
}

#[tokio::test]
async fn connect_and_unknown_kinds_are_allowed() {
    let state = mk_state();
    for name in ["connect", "unknown_kind"] {
        for path in ["/validate", "/mutate"] {
            let reply = post_fixture(&state, path, name).await;
            reply.assert_allowed();
            assert_eq!(reply.uid(), uid_of(name));
            assert!(reply.response().get("patch").is_none(), "{reply}");
        }
    }
}

// ---- Ingress, IngressClass ----

#[tokio::test]
async fn a_bad_ingress_path_is_denied_with_the_field_error() {
    assert_denied_with_shared_errors(&mk_state(), "ingress_bad_path").await;
}

#[tokio::test]
async fn an_ingress_for_another_class_is_not_sluices_to_refuse() {
    post_fixture(&mk_state(), "/validate", "ingress_other_class")
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_new_ingress_may_not_set_both_class_annotation_and_field() {
    let state = mk_state();
    let reply = post_fixture(&state, "/validate", "ingress_class_annotation_and_field").await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"metadata.annotations["kubernetes.io/ingress.class"]: "sluice" is set together with spec.ingressClassName "sluice"; a new Ingress names its class in spec.ingressClassName alone: remove the annotation"#
        ),
        "{reply}"
    );
    // Seed 001: an error only when the Ingress is created. An Ingress stored with both is updated
    // with a warning, and the annotation decides its class.
    let mut review = fixture("ingress_class_annotation_and_field");
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["oldObject"] = review["request"]["object"].clone();
    review["request"]["object"]["spec"]["ingressClassName"] = json!("edge");
    let reply = post(&state, "/validate", serde_json::to_vec(&review).unwrap()).await;
    reply.assert_allowed();
    assert!(
        reply.warnings().iter().any(|w| w.starts_with(
            r#"metadata.annotations["kubernetes.io/ingress.class"] "sluice" and spec.ingressClassName "edge" disagree; the annotation takes priority"#
        )),
        "{reply}"
    );
}

/// The `ingress_no_class` review with `spec.ingressClassName` set to `class`.
fn ingress_naming(class: &str) -> Vec<u8> {
    let mut review = fixture("ingress_no_class");
    review["request"]["object"]["spec"]["ingressClassName"] = json!(class);
    serde_json::to_vec(&review).unwrap()
}

/// A state of a sluice serving ingress class `class` over the fixture index (which defines only
/// IngressClass "sluice").
fn state_of_class(class: &str) -> State {
    let options = Options {
        ingress_class_name: class.to_string(),
        ..Options::default()
    };
    mk_state_with("index.yaml", options)
}

#[tokio::test]
async fn a_new_ingress_naming_an_ingress_class_that_does_not_exist_is_denied() {
    let edge = state_of_class("edge");
    let reply = post(&edge, "/validate", ingress_naming("edge")).await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"spec.ingressClassName: IngressClass "edge" does not exist; create it first, or name an existing IngressClass"#
        ),
        "{reply}"
    );
    // The class exists: allowed. Another controller's class is its own business. An update of an
    // Ingress whose class was deleted since is not refused (the rule is the creation's).
    post(&mk_state(), "/validate", ingress_naming("sluice"))
        .await
        .assert_allowed();
    post(&mk_state(), "/validate", ingress_naming("missing"))
        .await
        .assert_allowed();
    let mut update: Value = serde_json::from_slice(&ingress_naming("edge")).unwrap();
    update["request"]["operation"] = json!("UPDATE");
    update["request"]["oldObject"] = update["request"]["object"].clone();
    post(&edge, "/validate", serde_json::to_vec(&update).unwrap())
        .await
        .assert_allowed();
}

#[tokio::test]
async fn an_ingress_class_created_just_before_its_first_ingress_is_waited_for() {
    // `kubectl apply` of a file with an IngressClass and an Ingress naming it: the webhook's
    // index may not have seen the class yet when the Ingress arrives. The denial waits for the
    // index to move on and answers from the new one.
    let state = state_of_class("late");
    let late = state.index.clone();
    let arrives = tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        let mut snapshot = mk_snapshot("index.yaml");
        let class = sluice::manifest::decode_value(json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": "late"}, "spec": {"controller": "sluice.example/ingress"}}))
        .unwrap();
        let sluice::manifest::Document::Object(class) = class else {
            panic!("an IngressClass decodes");
        };
        snapshot.insert(class);
        late.replace(&snapshot);
    });
    post(&state, "/validate", ingress_naming("late"))
        .await
        .assert_allowed();
    arrives.await.unwrap();
    // A class that never comes: denied once the wait is over.
    post(
        &state_of_class("never"),
        "/validate",
        ingress_naming("never"),
    )
    .await
    .assert_denied(422);
}

#[tokio::test]
async fn a_new_ingress_without_class_is_denied_when_two_classes_are_default() {
    let two = mk_state_with("index-two-defaults.yaml", Options::default());
    let reply = post_fixture(&two, "/validate", "ingress_no_class").await;
    reply.assert_denied(422);
    assert!(
        reply.message().contains(
            r#"spec.ingressClassName: is required; more than one IngressClass is marked default ("alpha", "beta"), so a new Ingress must name its class; set spec.ingressClassName or leave ingressclass.kubernetes.io/is-default-class on one IngressClass only"#
        ),
        "{reply}"
    );
    // With a single default the same Ingress is fine (the mutating webhook names the class).
    post_fixture(&mk_state(), "/validate", "ingress_no_class")
        .await
        .assert_allowed();
}

#[tokio::test]
async fn a_second_default_ingress_class_gets_a_warning() {
    let reply = post_fixture(&mk_state(), "/validate", "ingressclass_second_default").await;
    reply.assert_allowed();
    assert_eq!(
        reply.warnings(),
        [
            r#"IngressClass "second" is marked default like "sluice": new Ingresses without a class will be refused until only one IngressClass is marked default"#
        ]
    );
}

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

// ---- injection-shaped values ----

#[tokio::test]
async fn injection_shaped_values_are_denied_or_carried_as_literal_data() {
    let state = mk_state();
    let reply = post_fixture(&state, "/validate", "httproute_injection_shaped").await;
    reply.assert_denied(422);
    let msg = reply.message();
    assert!(msg.contains("spec.rules[0].matches[1].headers[0].value: regular expression of 100000 bytes is longer than the 1024 bytes allowed"), "{reply}");
    assert!(msg.contains(r#"spec.rules[0].filters[0].requestHeaderModifier.set[2].value: "ok\r\nInjected: yes" must not contain control characters such as newlines"#), "{reply}");
    // `;`, `{}`, quotes, `$(...)`, backticks and `%ENVIRONMENT(...)%` are data: no rule objects to them.
    assert!(
        !msg.contains("set[0]") && !msg.contains("set[1]") && !msg.contains("matches[0]"),
        "{reply}"
    );
    // The answer never carries raw user input: no raw newline, no 100k-character value.
    assert!(!msg.contains('\n') && !msg.contains('\r'), "{reply}");
    assert!(
        reply.body.len() < 16 * 1024,
        "answer of {} bytes",
        reply.body.len()
    );
}

#[tokio::test]
async fn injection_shaped_ingressroute_values_are_denied_with_bounded_answers() {
    let state = mk_state();
    let ir = post_fixture(&state, "/validate", "ir_v1_injection_shaped").await;
    ir.assert_denied(422);
    assert!(!ir.message().contains('\n'), "{ir}");
    assert!(
        ir.body.len() < 16 * 1024,
        "answer of {} bytes",
        ir.body.len()
    );
    for e in field_errors_of(&fixture("ir_v1_injection_shaped")) {
        assert!(ir.message().contains(&e), "{e:?} missing from {ir}");
    }
}

// ---- mutation ----

/// A new AdmissionReview for an object (uid and everything else from a fixture).
fn mk_review_of(template: &str, object: Value) -> Vec<u8> {
    let mut review = fixture(template);
    review["request"]["object"] = object;
    serde_json::to_vec(&review).unwrap()
}

#[tokio::test]
async fn ingress_defaults_are_a_json_patch_that_is_idempotent() {
    let state = mk_state();
    let reply = post_fixture(&state, "/mutate", "ingress_mutate_defaults").await;
    reply.assert_allowed();
    let patch = reply.patch().expect("a patch");
    assert_eq!(
        serde_json::to_value(&patch).unwrap(),
        json!([
            {"op": "add", "path": "/spec/rules/0/http/paths/0/pathType", "value": "ImplementationSpecific"},
            {"op": "add", "path": "/spec/ingressClassName", "value": "sluice"},
        ])
    );
    let mut object = fixture("ingress_mutate_defaults")["request"]["object"].clone();
    json_patch::patch(&mut object, &patch).unwrap();
    assert_eq!(
        object["spec"]["rules"][0]["http"]["paths"][1]["pathType"],
        "Prefix"
    );
    // Re-running on the patched object yields no patch at all (not an empty one).
    let again = post(
        &state,
        "/mutate",
        mk_review_of("ingress_mutate_defaults", object),
    )
    .await;
    again.assert_allowed();
    assert!(again.response().get("patch").is_none(), "{again}");
    assert!(again.response().get("patchType").is_none(), "{again}");
    // The validating webhook then accepts the defaulted object.
    let nothing = post_fixture(&state, "/mutate", "ingress_mutate_nothing_to_do").await;
    nothing.assert_allowed();
    assert!(nothing.response().get("patch").is_none(), "{nothing}");
}

#[tokio::test]
async fn with_two_default_classes_only_path_types_are_defaulted() {
    let two = mk_state_with("index-two-defaults.yaml", Options::default());
    let reply = post_fixture(&two, "/mutate", "ingress_mutate_defaults").await;
    assert_eq!(
        serde_json::to_value(reply.patch().unwrap()).unwrap(),
        json!([{"op": "add", "path": "/spec/rules/0/http/paths/0/pathType", "value": "ImplementationSpecific"}])
    );
    // No IngressClass at all: the --default-ingress-class flag is used.
    let none = mk_state_with("index-two-defaults.yaml", Options::default());
    none.index.replace(&sluice::store::Snapshot::default());
    let reply = post_fixture(&none, "/mutate", "ingress_mutate_defaults").await;
    assert_eq!(
        serde_json::to_value(reply.patch().unwrap()).unwrap()[1],
        json!({"op": "add", "path": "/spec/ingressClassName", "value": "flag-class"})
    );
}

#[tokio::test]
async fn mutate_leaves_other_kinds_alone() {
    let reply = post_fixture(&mk_state(), "/mutate", "ir_v1beta1_bad_match").await;
    reply.assert_allowed();
    assert!(reply.response().get("patch").is_none(), "{reply}");
}

// ---- bad input ----

async fn assert_bad_request(state: &State, body: Vec<u8>, uid: &str, what: &str) -> Reply {
    let reply = post(state, "/validate", body).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{what}: {reply}");
    reply.assert_well_formed();
    assert!(!reply.allowed(), "{what}: {reply}");
    assert_eq!(reply.uid(), uid, "{what}: {reply}");
    assert_eq!(reply.code(), 400, "{what}: {reply}");
    reply
}

#[tokio::test]
async fn malformed_json_gets_a_400_admission_review() {
    let state = mk_state();
    let reply = assert_bad_request(
        &state,
        b"{\"apiVersion\": admission".to_vec(),
        "",
        "malformed",
    )
    .await;
    assert!(
        reply
            .message()
            .starts_with("request body is not a JSON AdmissionReview: "),
        "{reply}"
    );
    for body in [
        &b""[..],
        b"[]",
        b"\"AdmissionReview\"",
        b"null",
        b"{}",
        b"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"v1\"}",
    ] {
        assert_bad_request(&state, body.to_vec(), "", &String::from_utf8_lossy(body)).await;
    }
    let wrong = br#"{"kind":"AdmissionReview","apiVersion":"v1","request":{"uid":"u-7"}}"#;
    let reply = assert_bad_request(&state, wrong.to_vec(), "u-7", "wrong apiVersion").await;
    assert_eq!(
        reply.message(),
        r#"expected kind AdmissionReview with apiVersion admission.k8s.io/v1, got kind "AdmissionReview" apiVersion "v1""#
    );
}

#[tokio::test]
async fn truncated_bodies_get_a_400_at_every_cut() {
    let state = mk_state();
    let full = fixture_bytes("ir_v1beta1_valid");
    let trimmed = String::from_utf8(full.clone()).unwrap().trim_end().len();
    for cut in (0..trimmed).step_by(37) {
        assert_bad_request(&state, full[..cut].to_vec(), "", &format!("cut at {cut}")).await;
    }
}

#[tokio::test]
async fn non_utf8_bodies_get_a_400() {
    let state = mk_state();
    let mut body = fixture_bytes("ir_v1beta1_valid");
    let at = body.windows(4).position(|w| w == b"shop").unwrap();
    body[at] = 0xff;
    body[at + 1] = 0xfe;
    let reply = assert_bad_request(&state, body, "", "non-UTF-8").await;
    assert!(
        reply.message().contains("invalid unicode") || reply.message().contains("UTF-8"),
        "{reply}"
    );
}

#[tokio::test]
async fn reviews_without_request_or_uid_get_a_400() {
    let state = mk_state();
    let r = assert_bad_request(
        &state,
        fixture_bytes("review_without_request"),
        "",
        "no request",
    )
    .await;
    assert_eq!(r.message(), "AdmissionReview has no request");
    let r = assert_bad_request(&state, fixture_bytes("review_without_uid"), "", "no uid").await;
    assert_eq!(r.message(), "AdmissionReview request has no uid");
    let uid = uid_of("review_unknown_operation");
    let r = assert_bad_request(
        &state,
        fixture_bytes("review_unknown_operation"),
        &uid,
        "PATCH",
    )
    .await;
    assert!(
        r.message()
            .starts_with("AdmissionReview request is malformed: unknown variant `PATCH`"),
        "{r}"
    );
}

#[tokio::test]
async fn create_without_an_object_is_denied_with_the_uid() {
    let reply = post_fixture(&mk_state(), "/validate", "create_without_object").await;
    reply.assert_denied(400);
    assert_eq!(reply.uid(), uid_of("create_without_object"));
    assert!(
        reply
            .message()
            .ends_with("request.object: is required; CREATE and UPDATE requests carry the object"),
        "{reply}"
    );
}

#[tokio::test]
async fn v1beta1_reviews_are_refused_in_their_own_version() {
    let reply = post_fixture(&mk_state(), "/validate", "review_v1beta1").await;
    reply.assert_well_formed();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(reply.uid(), uid_of("review_v1beta1"));
    assert!(!reply.allowed());
    assert_eq!(
        reply.message(),
        r#"sluice serves admission.k8s.io/v1 AdmissionReviews only; register its webhooks with admissionReviewVersions: ["v1"]"#
    );
}

/// An IngressRoute of about `bytes` bytes: many routes.
fn mk_large_review(bytes: usize) -> Vec<u8> {
    let mut review = fixture("ir_v1beta1_valid");
    let route =
        json!({"match": "/r/0000000", "services": [{"name": "web", "port": 80, "weight": 1}]});
    let per_route = serde_json::to_vec(&route).unwrap().len() + 1;
    let routes: Vec<Value> = (0..bytes / per_route)
        .map(|i| json!({"match": format!("/r/{i:07}"), "services": [{"name": "web", "port": 80, "weight": 1}]}))
        .collect();
    review["request"]["object"]["spec"]["routes"] = Value::Array(routes);
    serde_json::to_vec(&review).unwrap()
}

#[tokio::test]
async fn objects_of_three_megabytes_are_reviewed() {
    let state = mk_state();
    let body = mk_large_review(3 * 1024 * 1024);
    assert!(body.len() > 3 * 1000 * 1000 && body.len() < MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    reply.assert_well_formed();
    reply.assert_allowed();
    assert_eq!(reply.uid(), uid_of("ir_v1beta1_valid"));
}

#[tokio::test]
async fn updates_of_three_megabyte_objects_are_reviewed() {
    let state = mk_state();
    let mut review: Value = serde_json::from_slice(&mk_large_review(3 * 1024 * 1024)).unwrap();
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["oldObject"] = review["request"]["object"].clone();
    let body = serde_json::to_vec(&review).unwrap();
    assert!(body.len() > 6 * 1000 * 1000 && body.len() < MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    reply.assert_allowed();
    assert_eq!(reply.uid(), uid_of("ir_v1beta1_valid"));
}

#[tokio::test]
async fn bodies_over_the_limit_get_a_413() {
    let state = mk_state();
    let body = mk_large_review(MAX_BODY_BYTES + 1024);
    assert!(body.len() > MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{reply}");
    reply.assert_well_formed();
    assert!(!reply.allowed());
    assert_eq!(reply.code(), 413);
}

#[tokio::test]
async fn deep_nesting_gets_a_400_not_a_stack_overflow() {
    let state = mk_state();
    let review = String::from_utf8(fixture_bytes("ir_v1beta1_valid")).unwrap();
    let deep = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
    let body = review.replacen(
        "\"strategy\": \"WeightedLeastRequest\"",
        &format!("\"strategy\": {deep}"),
        1,
    );
    assert!(body.len() > 400_000);
    let reply = assert_bad_request(&state, body.into_bytes(), "", "deep nesting").await;
    assert!(
        reply.message().contains("recursion limit exceeded"),
        "{reply}"
    );
    // Nesting the parser accepts but the schema does not: a denial naming the field.
    let shallow = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let body = review.replacen(
        "\"strategy\": \"WeightedLeastRequest\"",
        &format!("\"strategy\": {shallow}"),
        1,
    );
    let reply = post(&state, "/validate", body.into_bytes()).await;
    reply.assert_denied(422);
    assert!(
        reply
            .message()
            .contains("spec.strategy: invalid type: sequence"),
        "{reply}"
    );
}

// ---- health, readiness, metrics ----

async fn get(state: &State, path: &str) -> (StatusCode, String) {
    use tower::ServiceExt as _;
    let req = axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = sluice::webhook::router(state.clone())
        .oneshot(req)
        .await
        .unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn healthz_always_and_readyz_once_the_index_is_loaded() {
    let state = State::new(
        mk_settings(),
        IndexHandle::new(Options::default()),
        Metrics::new(),
    );
    assert_eq!(get(&state, "/healthz").await.0, StatusCode::OK);
    assert_eq!(
        get(&state, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    state.index.replace(&mk_snapshot("index.yaml"));
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn requests_are_counted_by_kind_operation_and_verdict() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::registered(&mut registry);
    let state = State::new(
        mk_settings(),
        IndexHandle::from_snapshot(&mk_snapshot("index.yaml"), Options::default()),
        metrics.clone(),
    );
    post_fixture(&state, "/validate", "gateway_conflicting_listeners").await;
    post_fixture(&state, "/validate", "gateway_conflicting_listeners").await;
    post_fixture(&state, "/mutate", "ingress_mutate_defaults").await;
    post(&state, "/validate", b"{".to_vec()).await;
    let denied = RequestLabels {
        endpoint: "validate",
        kind: kind_label(Some(sluice::api::Kind::Gateway)),
        operation: "CREATE",
        verdict: "denied",
    };
    assert_eq!(metrics.count(&denied), 2);
    let patched = RequestLabels {
        endpoint: "mutate",
        kind: kind_label(Some(sluice::api::Kind::Ingress)),
        operation: "CREATE",
        verdict: "patched",
    };
    assert_eq!(metrics.count(&patched), 1);
    let text = sluice::webhook::metrics::encode_text(&registry);
    assert!(text.contains(r#"sluice_webhook_admission_requests_total{endpoint="validate",kind="unknown",operation="unknown",verdict="bad_request"} 1"#), "{text}");
    assert!(
        text.contains(r#"sluice_webhook_admission_duration_seconds_count{endpoint="validate"} 3"#),
        "{text}"
    );
}

#[tokio::test]
async fn an_ingressroute_delegating_to_itself_is_denied_at_admission() {
    // A problem visible in the object alone is refused at `kubectl apply`, not left for the status.
    let state = mk_state();
    for (version, delegate) in [
        ("v1beta1", json!({"name": "shop"})),
        ("v1beta1", json!({"name": "shop", "namespace": "shop"})),
    ] {
        let mut review = fixture("ir_v1beta1_valid");
        review["request"]["object"]["spec"]["routes"][2]["delegate"] = delegate.clone();
        let reply = post(&state, "/validate", serde_json::to_vec(&review).unwrap()).await;
        reply.assert_denied(422);
        assert!(
            reply.message().contains(
                r#"spec.routes[2].delegate.name: "shop" delegates to this IngressRoute itself, a delegation cycle; delegate to another IngressRoute, or route to services"#
            ),
            "{version} {delegate}: {reply}"
        );
    }
    // The same name in another namespace is another object.
    let mut review = fixture("ir_v1beta1_valid");
    review["request"]["object"]["spec"]["routes"][2]["delegate"] =
        json!({"name": "shop", "namespace": "finance"});
    post(&state, "/validate", serde_json::to_vec(&review).unwrap())
        .await
        .assert_allowed();
}
