//! Tests of the status plans: the JSON written per kind, transition times kept, no write when
//! nothing changed.

use super::*;
use sluice_core::validate::FieldError;

const T0: &str = "2025-01-01T00:00:00Z";
const T1: &str = "2025-01-01T00:05:00Z";

fn mk_status(state: State, generation: i64) -> ObjectStatus {
    let (description, messages) = match state {
        State::Invalid => (
            "spec.routes[0].services[0]: Service \"web\" not found".to_string(),
            vec![FieldError::new(
                "spec.routes[0].services[0]",
                reason::SERVICE_NOT_FOUND,
                "Service \"web\" not found",
            )],
        ),
        State::Orphaned => ("not part of a delegation chain from a root".into(), vec![]),
        State::Ignored => ("ingress class \"nginx\" is not sluice".into(), vec![]),
        State::Valid => ("valid".into(), vec![]),
    };
    ObjectStatus {
        state,
        description: description.into(),
        messages,
        warnings: vec![],
        generation: Some(generation),
        gateway: None,
        condition: None,
    }
}

fn observed(status: Option<Value>) -> Observed {
    Observed {
        generation: Some(1),
        status: status.as_ref().map(ObservedStatus::new),
        sluice_owns_status: false,
    }
}

fn applied(p: Plan) -> Value {
    match p {
        Plan::Apply(v) => v,
        Plan::Keep => panic!("expected a write"),
    }
}

#[test]
fn valid_ingressroute_gets_seed_fields_and_both_conditions() {
    let st = mk_status(State::Valid, 4);
    let v = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(
        v,
        json!({
            "currentStatus": "valid",
            "description": "valid",
            "observedGeneration": 4,
            "conditions": [
                {"type": "Valid", "status": "True", "reason": "Valid", "message": "valid",
                 "observedGeneration": 4, "lastTransitionTime": T0},
                {"type": "Ready", "status": "True", "reason": "Programmed",
                 "message": "routes are programmed into Envoy",
                 "observedGeneration": 4, "lastTransitionTime": T0},
            ]
        })
    );
}

#[test]
fn unchanged_verdict_is_no_write_even_later() {
    let st = mk_status(State::Invalid, 2);
    let first = applied(plan(
        Kind::IngressRouteV1beta1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(first["conditions"][0]["reason"], json!("ServiceNotFound"));
    assert_eq!(first["conditions"][1]["status"], json!("False"));
    let again = plan(
        Kind::IngressRouteV1beta1,
        Verdict::Dag(&st),
        &observed(Some(first)),
        None,
        T1,
    );
    assert_eq!(again, Plan::Keep);
}

#[test]
fn only_the_fields_sluice_writes_are_compared() {
    let st = mk_status(State::Valid, 3);
    let written = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    // Another controller's field, other timestamps: still what sluice wants.
    let mut stored = written.clone();
    stored["loadBalancer"] = json!({"ingress": [{"ip": "192.0.2.1"}]});
    stored["conditions"][1]["lastTransitionTime"] = json!(T1);
    let again = |stored: Value| {
        plan(
            Kind::IngressRouteV1,
            Verdict::Dag(&st),
            &observed(Some(stored)),
            None,
            T1,
        )
    };
    assert_eq!(again(stored.clone()), Plan::Keep);
    // A field sluice writes that differs: written again, keeping the stored transition times.
    stored["description"] = json!("edited by hand");
    let rewritten = applied(again(stored));
    assert_eq!(rewritten["description"], json!("valid"));
    assert_eq!(rewritten["conditions"][0]["lastTransitionTime"], json!(T0));
    assert_eq!(rewritten["conditions"][1]["lastTransitionTime"], json!(T1));
}

#[test]
fn generation_bump_writes_but_keeps_transition_time() {
    let st = mk_status(State::Valid, 1);
    let first = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    let st2 = mk_status(State::Valid, 2);
    let second = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&st2),
        &observed(Some(first)),
        None,
        T1,
    ));
    assert_eq!(second["observedGeneration"], json!(2));
    assert_eq!(second["conditions"][0]["observedGeneration"], json!(2));
    assert_eq!(second["conditions"][0]["lastTransitionTime"], json!(T0));
}

#[test]
fn invalid_to_valid_moves_transition_time() {
    let bad = mk_status(State::Invalid, 1);
    let first = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&bad),
        &observed(None),
        None,
        T0,
    ));
    let good = mk_status(State::Valid, 2);
    let second = applied(plan(
        Kind::IngressRouteV1,
        Verdict::Dag(&good),
        &observed(Some(first)),
        None,
        T1,
    ));
    assert_eq!(second["currentStatus"], json!("valid"));
    assert_eq!(second["conditions"][0]["status"], json!("True"));
    assert_eq!(second["conditions"][0]["lastTransitionTime"], json!(T1));
}

#[test]
fn orphaned_is_not_valid_nor_ready() {
    let st = mk_status(State::Orphaned, 1);
    let v = applied(plan(
        Kind::IngressRouteV1beta1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(v["currentStatus"], json!("orphaned"));
    assert_eq!(v["conditions"][0]["reason"], json!("Orphaned"));
    assert_eq!(v["conditions"][1]["status"], json!("False"));
}

#[test]
fn route_gets_errors_and_a_process_time_that_only_moves_with_the_status() {
    let st = mk_status(State::Invalid, 1);
    let first = applied(plan(
        Kind::RouteV1alpha1,
        Verdict::Dag(&st),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(
        first["errors"],
        json!(["spec.routes[0].services[0]: Service \"web\" not found"])
    );
    assert_eq!(first["lastProcessTime"], json!(T0));
    assert_eq!(first["currentStatus"], json!("Invalid"));
    assert_eq!(
        plan(
            Kind::RouteV1alpha1,
            Verdict::Dag(&st),
            &observed(Some(first.clone())),
            None,
            T1
        ),
        Plan::Keep
    );
    let fixed = mk_status(State::Valid, 2);
    let second = applied(plan(
        Kind::RouteV1alpha1,
        Verdict::Dag(&fixed),
        &observed(Some(first)),
        None,
        T1,
    ));
    assert_eq!(second["lastProcessTime"], json!(T1));
    // Seed 004's spelling: `Valid`, and `errors: []` when nothing is wrong.
    assert_eq!(second["currentStatus"], json!("Valid"));
    assert_eq!(second["errors"], json!([]));
}

#[test]
fn rejected_object_is_invalid_with_the_decode_error() {
    let r = Rejected {
        error: FieldError::spec(
            "spec.routes[0].pathPrefix",
            "invalid type: integer `42`, expected a string",
        ),
        generation: Some(7),
    };
    let v = applied(plan(
        Kind::RouteV1alpha1,
        Verdict::Rejected(&r),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(v["currentStatus"], json!("Invalid"));
    assert_eq!(v["observedGeneration"], json!(7));
    assert_eq!(v["conditions"][0]["reason"], json!("InvalidSpec"));
    assert_eq!(v["description"], json!(r.error.to_string()));
}

#[test]
fn ingress_gets_only_the_load_balancer_and_only_when_configured() {
    let st = mk_status(State::Valid, 1);
    assert_eq!(
        plan(Kind::Ingress, Verdict::Dag(&st), &observed(None), None, T0),
        Plan::Keep
    );
    let lb = LoadBalancer::from_address("192.0.2.10");
    let v = applied(plan(
        Kind::Ingress,
        Verdict::Dag(&st),
        &observed(None),
        Some(&lb),
        T0,
    ));
    assert_eq!(
        v,
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}})
    );
    assert_eq!(
        plan(
            Kind::Ingress,
            Verdict::Dag(&st),
            &observed(Some(v)),
            Some(&lb),
            T1
        ),
        Plan::Keep
    );
    let host = LoadBalancer::from_address("lb.example.com");
    assert_eq!(host.hostnames, vec!["lb.example.com"]);
}

#[test]
fn ignored_objects_are_left_alone_unless_sluice_wrote_there_before() {
    let st = mk_status(State::Ignored, 1);
    let lb = LoadBalancer::from_address("192.0.2.10");
    assert_eq!(
        plan(
            Kind::Ingress,
            Verdict::Dag(&st),
            &observed(None),
            Some(&lb),
            T0
        ),
        Plan::Keep
    );
    let mut o = observed(Some(
        json!({"loadBalancer": {"ingress": [{"ip": "192.0.2.10"}]}}),
    ));
    o.sluice_owns_status = true;
    assert_eq!(
        plan(Kind::Ingress, Verdict::Dag(&st), &o, Some(&lb), T0),
        Plan::Apply(json!({}))
    );
}

#[test]
fn gateway_api_objects_without_a_gateway_api_verdict_get_nothing() {
    // A TLSRoute (not routed yet) and routes whose verdict carries no Gateway API status
    // (no parent of sluice's).
    let st = mk_status(State::Valid, 1);
    for kind in [Kind::TlsRoute, Kind::GrpcRoute, Kind::HttpRoute] {
        assert_eq!(
            plan(kind, Verdict::Dag(&st), &observed(None), None, T0),
            Plan::Keep
        );
    }
}

#[test]
fn apply_body_carries_type_and_identity() {
    let b = apply_body(
        "projectcontour.io/v1",
        "IngressRoute",
        "a",
        "ns",
        &json!({"x": 1}),
    );
    assert_eq!(
        b,
        json!({"apiVersion": "projectcontour.io/v1", "kind": "IngressRoute",
               "metadata": {"name": "a", "namespace": "ns"}, "status": {"x": 1}})
    );
}

fn gateway_verdict(kind_status: sluice_core::dag::GatewayApiStatus, state: State) -> ObjectStatus {
    ObjectStatus {
        state,
        description: "accepted HTTPRoute".into(),
        messages: Vec::new(),
        warnings: Vec::new(),
        generation: Some(4),
        gateway: Some(Box::new(kind_status)),
        condition: None,
    }
}

fn gcond(type_: &'static str, ok: bool, reason: &'static str) -> GatewayCondition {
    GatewayCondition {
        type_,
        status: ok,
        reason,
        message: format!("{type_} is {ok}"),
    }
}

#[test]
fn an_httproute_gets_one_parent_entry_per_gateway_of_sluices_and_keeps_its_times() {
    let mut g = sluice_core::dag::GatewayApiStatus {
        parents: vec![sluice_core::dag::ParentStatus {
            kind: None,
            namespace: "shop".into(),
            name: "edge".into(),
            section_name: Some("http".into()),
            port: None,
            controller_name: "sluice.dev/gateway-controller".into(),
            conditions: vec![
                gcond("Accepted", true, "Accepted"),
                gcond("ResolvedRefs", true, "ResolvedRefs"),
            ],
        }],
        ..Default::default()
    };
    let s = gateway_verdict(g.clone(), State::Valid);
    let first = applied(plan(
        Kind::HttpRoute,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(
        first,
        json!({"parents": [{
            "parentRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "shop", "name": "edge", "sectionName": "http"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Accepted is true", "observedGeneration": 4, "lastTransitionTime": T0},
                {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "ResolvedRefs is true", "observedGeneration": 4, "lastTransitionTime": T0},
            ],
        }]})
    );
    // The same verdict later: no write.
    let stored = observed(Some(first.clone()));
    assert_eq!(
        plan(Kind::HttpRoute, Verdict::Dag(&s), &stored, None, T1),
        Plan::Keep
    );
    // A backend goes missing: ResolvedRefs moves, Accepted keeps its time.
    g.parents[0].conditions[1] = gcond("ResolvedRefs", false, "BackendNotFound");
    let s = gateway_verdict(g, State::Invalid);
    let next = applied(plan(Kind::HttpRoute, Verdict::Dag(&s), &stored, None, T1));
    let cs = &next["parents"][0]["conditions"];
    assert_eq!(cs[0]["lastTransitionTime"], T0);
    assert_eq!(cs[1]["lastTransitionTime"], T1);
    assert_eq!(cs[1]["status"], "False");
}

#[test]
fn a_route_parent_that_is_a_listener_set_says_its_kind_and_keeps_its_own_times() {
    let parent = |kind: Option<&'static str>, ok: bool| sluice_core::dag::ParentStatus {
        kind,
        namespace: "shop".into(),
        name: "edge".into(),
        section_name: None,
        port: None,
        controller_name: "sluice.dev/gateway-controller".into(),
        conditions: vec![gcond("Accepted", ok, "Accepted")],
    };
    let g = |set_ok: bool| sluice_core::dag::GatewayApiStatus {
        parents: vec![parent(None, true), parent(Some("ListenerSet"), set_ok)],
        ..Default::default()
    };
    let s = gateway_verdict(g(true), State::Valid);
    let first = applied(plan(
        Kind::HttpRoute,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    let kinds: Vec<&Value> = (first["parents"].as_array().unwrap().iter())
        .map(|p| &p["parentRef"]["kind"])
        .collect();
    assert_eq!(kinds, [&json!("Gateway"), &json!("ListenerSet")]);
    // The ListenerSet's condition changes; the Gateway's (same name) keeps its time.
    let s = gateway_verdict(g(false), State::Invalid);
    let next = applied(plan(
        Kind::HttpRoute,
        Verdict::Dag(&s),
        &observed(Some(first)),
        None,
        T1,
    ));
    assert_eq!(
        next["parents"][0]["conditions"][0]["lastTransitionTime"],
        T0
    );
    assert_eq!(
        next["parents"][1]["conditions"][0]["lastTransitionTime"],
        T1
    );
}

#[test]
fn a_listener_set_gets_conditions_and_listeners_and_its_gateway_the_count() {
    let set = sluice_core::dag::GatewayApiStatus {
        conditions: vec![
            gcond("Accepted", true, "Accepted"),
            gcond("Programmed", true, "Programmed"),
        ],
        listeners: vec![sluice_core::dag::ListenerStatus {
            name: "extra".into(),
            supported_kinds: vec!["HTTPRoute"],
            attached_routes: 1,
            conditions: vec![gcond("Accepted", true, "Accepted")],
        }],
        ..Default::default()
    };
    let s = gateway_verdict(set, State::Valid);
    let status = applied(plan(
        Kind::ListenerSet,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(status["conditions"][0]["observedGeneration"], 4);
    assert_eq!(status["listeners"][0]["name"], "extra");
    assert_eq!(status["listeners"][0]["attachedRoutes"], 1);
    assert_eq!(status.get("addresses"), None);
    let stored = observed(Some(status));
    assert_eq!(
        plan(Kind::ListenerSet, Verdict::Dag(&s), &stored, None, T1),
        Plan::Keep
    );

    let gw = |n: Option<u32>| sluice_core::dag::GatewayApiStatus {
        conditions: vec![gcond("Accepted", true, "Accepted")],
        attached_listener_sets: n,
        ..Default::default()
    };
    let s = gateway_verdict(gw(Some(2)), State::Valid);
    let status = applied(plan(
        Kind::Gateway,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(status["attachedListenerSets"], 2);
    // The count changing is a write.
    let stored = observed(Some(status));
    let s = gateway_verdict(gw(Some(1)), State::Valid);
    let next = applied(plan(Kind::Gateway, Verdict::Dag(&s), &stored, None, T1));
    assert_eq!(next["attachedListenerSets"], 1);
    let s = gateway_verdict(gw(None), State::Valid);
    let none = applied(plan(
        Kind::Gateway,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    assert_eq!(none.get("attachedListenerSets"), None);
}

#[test]
fn a_gateway_class_lists_its_supported_features_and_is_not_written_again() {
    let g = sluice_core::dag::GatewayApiStatus {
        conditions: vec![gcond("Accepted", true, "Accepted")],
        supported_features: sluice_core::dag::gateway::SUPPORTED_FEATURES.to_vec(),
        ..Default::default()
    };
    let s = gateway_verdict(g, State::Valid);
    let first = applied(plan(
        Kind::GatewayClass,
        Verdict::Dag(&s),
        &observed(None),
        None,
        T0,
    ));
    let names: Vec<&str> = (first["supportedFeatures"].as_array().unwrap().iter())
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, sluice_core::dag::gateway::SUPPORTED_FEATURES);
    // In the order the Gateway API asks for, each once.
    assert!(names.windows(2).all(|w| w[0] < w[1]), "{names:?}");
    assert!(names.contains(&"TLSRoute") && names.contains(&"HTTPRoute"));
    let stored = observed(Some(first));
    assert_eq!(
        plan(Kind::GatewayClass, Verdict::Dag(&s), &stored, None, T1),
        Plan::Keep
    );
}

#[test]
fn a_gateway_gets_its_conditions_listeners_and_addresses() {
    let g = sluice_core::dag::GatewayApiStatus {
        conditions: vec![
            gcond("Accepted", true, "Accepted"),
            gcond("Programmed", true, "Programmed"),
        ],
        listeners: vec![sluice_core::dag::ListenerStatus {
            name: "http".into(),
            supported_kinds: vec!["HTTPRoute"],
            attached_routes: 2,
            conditions: vec![gcond("Accepted", true, "Accepted")],
        }],
        ..Default::default()
    };
    let s = gateway_verdict(g, State::Valid);
    let lb = LoadBalancer::from_address("203.0.113.7");
    let status = applied(plan(
        Kind::Gateway,
        Verdict::Dag(&s),
        &observed(None),
        Some(&lb),
        T0,
    ));
    assert_eq!(
        status["addresses"],
        json!([{"type": "IPAddress", "value": "203.0.113.7"}])
    );
    assert_eq!(status["conditions"][1]["type"], "Programmed");
    assert_eq!(status["listeners"][0]["attachedRoutes"], 2);
    assert_eq!(
        status["listeners"][0]["supportedKinds"],
        json!([{"group": "gateway.networking.k8s.io", "kind": "HTTPRoute"}])
    );
    let stored = observed(Some(status));
    assert_eq!(
        plan(Kind::Gateway, Verdict::Dag(&s), &stored, Some(&lb), T1),
        Plan::Keep
    );
    // Another controller's Gateway gets nothing; one sluice wrote on before is released.
    let ignored = ObjectStatus {
        gateway: None,
        ..mk_status(State::Ignored, 1)
    };
    assert_eq!(
        plan(
            Kind::Gateway,
            Verdict::Dag(&ignored),
            &observed(None),
            None,
            T1
        ),
        Plan::Keep
    );
    let owned = Observed {
        sluice_owns_status: true,
        ..observed(None)
    };
    assert_eq!(
        plan(Kind::Gateway, Verdict::Dag(&ignored), &owned, None, T1),
        Plan::Apply(json!({}))
    );
}

#[test]
fn a_route_whose_gateway_is_gone_gets_an_empty_list_of_parents_once() {
    // The CRD requires status.parents: releasing a route's status writes an empty list.
    let ignored = ObjectStatus {
        gateway: None,
        ..mk_status(State::Ignored, 1)
    };
    let stored = json!({"parents": [{"controllerName": "sluice.dev/gateway-controller",
        "parentRef": {"name": "gone"}, "conditions": []}]});
    let owned = Observed {
        sluice_owns_status: true,
        ..observed(Some(stored))
    };
    assert_eq!(
        plan(Kind::HttpRoute, Verdict::Dag(&ignored), &owned, None, T1),
        Plan::Apply(json!({"parents": []}))
    );
    let released = Observed {
        sluice_owns_status: true,
        ..observed(Some(json!({"parents": []})))
    };
    assert_eq!(
        plan(Kind::HttpRoute, Verdict::Dag(&ignored), &released, None, T1),
        Plan::Keep,
        "written once"
    );
}

#[test]
fn a_backend_tls_policy_gets_one_ancestor_entry_per_gateway_and_keeps_its_times() {
    let ancestor = |reason| sluice_core::dag::ParentStatus {
        kind: None,
        namespace: "shop".into(),
        name: "edge".into(),
        section_name: None,
        port: None,
        controller_name: "sluice.dev/gateway-controller".into(),
        conditions: vec![
            gcond("Accepted", true, "Accepted"),
            gcond("ResolvedRefs", reason == "ResolvedRefs", reason),
        ],
    };
    let g = |reason| sluice_core::dag::GatewayApiStatus {
        ancestors: Some(vec![ancestor(reason)]),
        ..Default::default()
    };
    let s = gateway_verdict(g("ResolvedRefs"), State::Valid);
    let kind = Kind::BackendTlsPolicy;
    let first = applied(plan(kind, Verdict::Dag(&s), &observed(None), None, T0));
    assert_eq!(
        first,
        json!({"ancestors": [{
            "ancestorRef": {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "shop", "name": "edge"},
            "controllerName": "sluice.dev/gateway-controller",
            "conditions": [
                {"type": "Accepted", "status": "True", "reason": "Accepted", "message": "Accepted is true", "observedGeneration": 4, "lastTransitionTime": T0},
                {"type": "ResolvedRefs", "status": "True", "reason": "ResolvedRefs", "message": "ResolvedRefs is true", "observedGeneration": 4, "lastTransitionTime": T0},
            ],
        }]})
    );
    let stored = observed(Some(first.clone()));
    assert_eq!(plan(kind, Verdict::Dag(&s), &stored, None, T1), Plan::Keep);
    // The CA ConfigMap goes: ResolvedRefs moves, Accepted keeps its time.
    let s = gateway_verdict(g("InvalidCACertificateRef"), State::Valid);
    let next = applied(plan(kind, Verdict::Dag(&s), &stored, None, T1));
    let cs = &next["ancestors"][0]["conditions"];
    assert_eq!(cs[0]["lastTransitionTime"], T0);
    assert_eq!(
        (&cs[1]["lastTransitionTime"], &cs[1]["status"]),
        (&json!(T1), &json!("False"))
    );
    // No longer sluice's: the ancestors sluice wrote are released (the CRD requires the list).
    let ignored = ObjectStatus {
        gateway: None,
        ..mk_status(State::Ignored, 1)
    };
    let owned = Observed {
        sluice_owns_status: true,
        ..observed(Some(next))
    };
    assert_eq!(
        plan(kind, Verdict::Dag(&ignored), &owned, None, T1),
        Plan::Apply(json!({"ancestors": []}))
    );
}

#[test]
fn the_status_writer_writes_backend_tls_verified_beside_valid_and_ready() {
    use sluice_core::synth::secure_backends::{UNVERIFIED, ca_pem, manifests};
    let d = sluice_core::dag::build(
        &sluice_core::store::Snapshot::from_test_yaml(&manifests(&[UNVERIFIED], &ca_pem("ca"))),
        &Default::default(),
    );
    let s = &d.statuses[&sluice_core::api::ObjectRef::new(Kind::IngressRouteV1, "web", "root")];
    let observed = Observed::default();
    let Plan::Apply(v) = plan(
        Kind::IngressRouteV1,
        Verdict::Dag(s),
        &observed,
        None,
        "2025-01-01T00:00:00Z",
    ) else {
        panic!()
    };
    let conditions = v["conditions"].as_array().unwrap();
    let types: Vec<&str> = conditions
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["Valid", "Ready", "BackendTLSVerified"]);
    assert_eq!(conditions[0]["status"], "True");
    assert_eq!(conditions[2]["status"], "False");
    assert_eq!(conditions[2]["reason"], "NotVerified");
    assert!(
        conditions[2]["message"]
            .as_str()
            .unwrap()
            .contains("SNI api.web.svc")
    );
}
