//! The webhook through `router().oneshot(...)` with the JSON fixtures in tests/fixtures/admission:
//! IngressRoute and Route: the single-object rules, updates, cross-object rules and operations.

mod webhook_support;

use serde_json::json;
use sluice::dag::Options;
use webhook_support::*;

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
        .map(ToString::to_string)
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
