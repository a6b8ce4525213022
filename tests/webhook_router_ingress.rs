//! The webhook through `router().oneshot(...)` with the JSON fixtures in tests/fixtures/admission:
//! Ingress and IngressClass rules, and the Ingress defaults `/mutate` patches in.

mod webhook_support;

use serde_json::{Value, json};
use sluice::dag::Options;
use sluice::webhook::State;
use webhook_support::*;

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

// ---- mutation ----

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
