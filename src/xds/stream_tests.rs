use std::collections::BTreeMap;

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::google::rpc::Status;

use super::*;
use ResourceType::{Cluster as C, Endpoint as E, Listener as L, Route as R, Secret as S};

fn mk_snap(items: &[(ResourceType, &[(&str, &str)])]) -> Snapshot {
    let mut m: BTreeMap<ResourceType, BTreeMap<String, Any>> = BTreeMap::new();
    for (t, rs) in items {
        let e = m.entry(*t).or_default();
        for (n, content) in rs.iter() {
            e.insert(
                n.to_string(),
                Any {
                    type_url: t.type_url(),
                    value: content.as_bytes().to_vec(),
                },
            );
        }
    }
    Snapshot::from_encoded(m)
}

/// Clusters a and b, their endpoints, one listener using route config "http" which uses `uses`.
fn mk_world(clusters: &[(&str, &str)], eps: &[(&str, &str)], route: &str) -> Snapshot {
    mk_snap(&[
        (C, clusters),
        (E, eps),
        (L, &[("ingress_http", "listener-v1")]),
        (R, &[("ingress_http", route)]),
    ])
}

fn mk_sotw(t: ResourceType, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        type_url: t.type_url(),
        resource_names: names.iter().map(|s| s.to_string()).collect(),
        response_nonce: nonce.to_string(),
        ..Default::default()
    }
}

fn mk_nack(t: ResourceType, names: &[&str], nonce: &str) -> DiscoveryRequest {
    DiscoveryRequest {
        error_detail: Some(Status {
            code: 3,
            message: "bad config".into(),
            details: vec![],
        }),
        ..mk_sotw(t, names, nonce)
    }
}

fn mk_delta(t: ResourceType, sub: &[&str], unsub: &[&str], nonce: &str) -> DeltaDiscoveryRequest {
    DeltaDiscoveryRequest {
        type_url: t.type_url(),
        resource_names_subscribe: sub.iter().map(|s| s.to_string()).collect(),
        resource_names_unsubscribe: unsub.iter().map(|s| s.to_string()).collect(),
        response_nonce: nonce.to_string(),
        ..Default::default()
    }
}

/// (type, nonce, resource contents) of SotW responses.
fn sotw(out: &[Response]) -> Vec<(ResourceType, String, Vec<String>)> {
    out.iter()
        .map(|r| match r {
            Response::Sotw(d) => (
                ResourceType::from_type_url(&d.type_url).unwrap(),
                d.nonce.clone(),
                d.resources
                    .iter()
                    .map(|a| String::from_utf8(a.value.clone()).unwrap())
                    .collect(),
            ),
            Response::Delta(_) => panic!("delta response on a SotW stream"),
        })
        .collect()
}

/// (type, nonce, changed contents, removed names) of delta responses.
fn delta(out: &[Response]) -> Vec<(ResourceType, String, Vec<String>, Vec<String>)> {
    out.iter()
        .map(|r| match r {
            Response::Delta(d) => (
                ResourceType::from_type_url(&d.type_url).unwrap(),
                d.nonce.clone(),
                d.resources
                    .iter()
                    .map(|r| String::from_utf8(r.resource.as_ref().unwrap().value.clone()).unwrap())
                    .collect(),
                d.removed_resources.clone(),
            ),
            Response::Sotw(_) => panic!("SotW response on a delta stream"),
        })
        .collect()
}

fn strs(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// Drives a SotW stream to the fully acknowledged state of `snap`; returns the stream.
fn mk_synced_sotw(snap: &Snapshot, stats: Arc<Stats>) -> Stream {
    let mut s = Stream::new(Mode::Sotw, stats);
    let out = sotw(&s.on_sotw_request(&mk_sotw(C, &[], ""), snap));
    assert_eq!(out.len(), 1);
    let cds_nonce = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], ""), snap)).is_empty());
    let names: Vec<&str> = snap.of(C).keys().map(String::as_str).collect();
    let out = sotw(&s.on_sotw_request(&mk_sotw(C, &[], &cds_nonce), snap));
    assert!(out.is_empty());
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &names, ""), snap));
    let eds_nonce = out[0].1.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &names, &eds_nonce), snap));
    let lds_nonce = out[0].1.clone();
    assert_eq!(out[0].0, L);
    let o = sotw(&s.on_sotw_request(&mk_sotw(L, &[], &lds_nonce), snap));
    assert!(o.is_empty(), "{o:?}");
    let out = sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], ""), snap));
    let rds_nonce = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], &rds_nonce), snap)).is_empty());
    s
}

#[test]
fn sotw_warming_order_clusters_then_endpoints_then_listeners_then_routes() {
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    // Envoy asks for clusters and listeners at once: only clusters are answered.
    let out = sotw(&s.on_sotw_request(&mk_sotw(C, &[], ""), &snap));
    assert_eq!(out, vec![(C, "1".into(), strs(&["cluster-a"]))]);
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], ""), &snap)).is_empty());
    // Clusters acknowledged, but their endpoints are not requested yet: listeners still wait.
    assert!(sotw(&s.on_sotw_request(&mk_sotw(C, &[], "1"), &snap)).is_empty());
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a"], ""), &snap));
    assert_eq!(out, vec![(E, "2".into(), strs(&["eps-a"]))]);
    // Endpoints acknowledged: now listeners.
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a"], "2"), &snap));
    assert_eq!(out, vec![(L, "3".into(), strs(&["listener-v1"]))]);
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], "3"), &snap)).is_empty());
    let out = sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], ""), &snap));
    assert_eq!(out, vec![(R, "4".into(), strs(&["routes->a"]))]);
    assert!(sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], "4"), &snap)).is_empty());
    // Nothing changed: nothing is sent.
    assert!(s.on_snapshot(&snap).is_empty());
}

#[test]
fn sotw_endpoint_change_sends_only_endpoints() {
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let mut s = mk_synced_sotw(&snap, Arc::default());
    let next = mk_world(&[("a", "cluster-a")], &[("a", "eps-a2")], "routes->a");
    let out = sotw(&s.on_snapshot(&next));
    assert_eq!(out.len(), 1);
    assert_eq!((out[0].0, out[0].2.clone()), (E, strs(&["eps-a2"])));
}

#[test]
fn sotw_nack_is_counted_and_not_resent() {
    let stats: Arc<Stats> = Arc::default();
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let mut s = mk_synced_sotw(&snap, stats.clone());
    let bad = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->BROKEN");
    let out = sotw(&s.on_snapshot(&bad));
    assert_eq!(out[0].0, R);
    let nonce = out[0].1.clone();
    // Envoy refuses it and keeps the last good routes: no resend loop.
    assert!(sotw(&s.on_sotw_request(&mk_nack(R, &["ingress_http"], &nonce), &bad)).is_empty());
    assert_eq!(stats.nacks.get(), 1);
    assert!(s.on_snapshot(&bad).is_empty());
    // The next good change goes out.
    let fixed = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a-fixed");
    let out = sotw(&s.on_snapshot(&fixed));
    assert_eq!(
        (out[0].0, out[0].2.clone()),
        (R, strs(&["routes->a-fixed"]))
    );
}

#[test]
fn sotw_stale_nonce_is_ignored() {
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let mut s = mk_synced_sotw(&snap, Arc::default());
    let next = mk_world(&[("a", "cluster-a")], &[("a", "eps-a2")], "routes->a");
    let out = sotw(&s.on_snapshot(&next));
    let eds_nonce = out[0].1.clone();
    // A request carrying an older nonce (sent before Envoy saw the new response), even with
    // other names, changes nothing and is not answered.
    assert!(sotw(&s.on_sotw_request(&mk_sotw(E, &["a", "zzz"], "2"), &next)).is_empty());
    let third = mk_world(&[("a", "cluster-a")], &[("a", "eps-a3")], "routes->a");
    assert!(
        s.on_snapshot(&third).is_empty(),
        "one response in flight per type"
    );
    // The ACK of the current nonce then brings the newest state.
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a"], &eds_nonce), &third));
    assert_eq!((out[0].0, out[0].2.clone()), (E, strs(&["eps-a3"])));
}

#[test]
fn sotw_reconnect_gets_a_full_answer() {
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let _old = mk_synced_sotw(&snap, Arc::default());
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    let mut req = mk_sotw(C, &[], "");
    req.version_info = set_version([(&"a".to_string(), &snap.of(C)["a"].version)]);
    let out = sotw(&s.on_sotw_request(&req, &snap));
    assert_eq!(out, vec![(C, "1".into(), strs(&["cluster-a"]))]);
}

#[test]
fn sotw_make_before_break_keeps_old_clusters_until_routes_moved() {
    let snap = mk_world(&[("a", "cluster-a")], &[("a", "eps-a")], "routes->a");
    let mut s = mk_synced_sotw(&snap, Arc::default());
    // Routes move from a to b; a disappears.
    let next = mk_world(&[("b", "cluster-b")], &[("b", "eps-b")], "routes->b");
    let out = sotw(&s.on_snapshot(&next));
    assert_eq!(out.len(), 1, "routes wait for the new cluster: {out:?}");
    assert_eq!(
        (out[0].0, out[0].2.clone()),
        (C, strs(&["cluster-a", "cluster-b"]))
    );
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(C, &[], &n), &next)).is_empty());
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a", "b"], "2"), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (E, strs(&["eps-a", "eps-b"])));
    let n = out[0].1.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a", "b"], &n), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (R, strs(&["routes->b"])));
    let n = out[0].1.clone();
    // Routes acknowledged: now a goes.
    let out = sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], &n), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (C, strs(&["cluster-b"])));
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(C, &[], &n), &next)).is_empty());
    // Envoy drops a's endpoint subscription: it is answered with b's alone.
    let eds_nonce = s.types[&E].last_nonce.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["b"], &eds_nonce), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (E, strs(&["eps-b"])));
}

#[test]
fn sotw_named_subscription_change_is_answered() {
    let snap = mk_snap(&[(S, &[("ns/one", "secret-1"), ("ns/two", "secret-2")])]);
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    let out = sotw(&s.on_sotw_request(&mk_sotw(S, &["ns/one"], ""), &snap));
    assert_eq!(out[0].2, strs(&["secret-1"]));
    let n = out[0].1.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(S, &["ns/one", "ns/two"], &n), &snap));
    assert_eq!(out[0].2, strs(&["secret-1", "secret-2"]));
}

#[test]
fn delta_sends_only_changes_and_removals() {
    let snap = mk_world(
        &[("a", "cluster-a"), ("b", "cluster-b")],
        &[("a", "eps-a"), ("b", "eps-b")],
        "routes",
    );
    let mut s = Stream::new(Mode::Delta, Arc::default());
    let out = delta(&s.on_delta_request(&mk_delta(C, &[], &[], ""), &snap));
    assert_eq!(
        out,
        vec![(C, "1".into(), strs(&["cluster-a", "cluster-b"]), vec![])]
    );
    assert!(
        s.on_delta_request(&mk_delta(C, &[], &[], "1"), &snap)
            .is_empty()
    );
    let out = delta(&s.on_delta_request(&mk_delta(E, &["a", "b"], &[], ""), &snap));
    assert_eq!(
        out,
        vec![(E, "2".into(), strs(&["eps-a", "eps-b"]), vec![])]
    );
    assert!(
        s.on_delta_request(&mk_delta(E, &[], &[], "2"), &snap)
            .is_empty()
    );
    // b's endpoints change: only b's load assignment goes out.
    let next = mk_world(
        &[("a", "cluster-a"), ("b", "cluster-b")],
        &[("a", "eps-a"), ("b", "eps-b2")],
        "routes",
    );
    let out = delta(&s.on_snapshot(&next));
    assert_eq!(out, vec![(E, "3".into(), strs(&["eps-b2"]), vec![])]);
    assert!(
        s.on_delta_request(&mk_delta(E, &[], &[], "3"), &next)
            .is_empty()
    );
    // a disappears (no listener/route subscription on this stream, so nothing holds it back).
    let gone = mk_world(&[("b", "cluster-b")], &[("b", "eps-b2")], "routes");
    let out = delta(&s.on_snapshot(&gone));
    assert_eq!(
        out,
        vec![
            (C, "4".into(), vec![], strs(&["a"])),
            (E, "5".into(), vec![], strs(&["a"]))
        ]
    );
}

#[test]
fn delta_subscribe_and_unsubscribe() {
    let snap = mk_snap(&[(E, &[("a", "eps-a"), ("b", "eps-b")])]);
    let mut s = Stream::new(Mode::Delta, Arc::default());
    let out = delta(&s.on_delta_request(&mk_delta(E, &["a", "missing"], &[], ""), &snap));
    assert_eq!(
        out,
        vec![(E, "1".into(), strs(&["eps-a"]), strs(&["missing"]))]
    );
    assert!(
        s.on_delta_request(&mk_delta(E, &[], &[], "1"), &snap)
            .is_empty()
    );
    let out = delta(&s.on_delta_request(&mk_delta(E, &["b"], &["a"], "1"), &snap));
    assert_eq!(out, vec![(E, "2".into(), strs(&["eps-b"]), vec![])]);
    assert!(
        s.on_delta_request(&mk_delta(E, &[], &[], "2"), &snap)
            .is_empty()
    );
    // a was unsubscribed: its change is not sent.
    let next = mk_snap(&[(E, &[("a", "eps-a2"), ("b", "eps-b")])]);
    assert!(s.on_snapshot(&next).is_empty());
    // Re-subscribing brings it back.
    let out = delta(&s.on_delta_request(&mk_delta(E, &["a"], &[], "2"), &next));
    assert_eq!(out, vec![(E, "3".into(), strs(&["eps-a2"]), vec![])]);
}

#[test]
fn delta_reconnect_with_known_versions_sends_only_differences() {
    let snap = mk_snap(&[(C, &[("a", "cluster-a"), ("b", "cluster-b")])]);
    let mut s = Stream::new(Mode::Delta, Arc::default());
    let mut req = mk_delta(C, &[], &[], "");
    req.initial_resource_versions
        .insert("a".into(), snap.of(C)["a"].version.clone());
    req.initial_resource_versions
        .insert("b".into(), "old-version".into());
    req.initial_resource_versions
        .insert("gone".into(), "whatever".into());
    let out = delta(&s.on_delta_request(&req, &snap));
    assert_eq!(
        out,
        vec![(C, "1".into(), strs(&["cluster-b"]), strs(&["gone"]))]
    );
}

#[test]
fn delta_nack_is_counted_and_not_resent() {
    let stats: Arc<Stats> = Arc::default();
    let snap = mk_snap(&[(C, &[("a", "cluster-a")])]);
    let mut s = Stream::new(Mode::Delta, stats.clone());
    let out = delta(&s.on_delta_request(&mk_delta(C, &[], &[], ""), &snap));
    let mut nack = mk_delta(C, &[], &[], &out[0].1);
    nack.error_detail = Some(Status {
        code: 3,
        message: "no".into(),
        details: vec![],
    });
    assert!(s.on_delta_request(&nack, &snap).is_empty());
    assert_eq!(stats.nacks.get(), 1);
    assert!(s.on_snapshot(&snap).is_empty());
}

#[test]
fn unknown_types_are_not_answered() {
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    let req = DiscoveryRequest {
        type_url: "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig".into(),
        ..Default::default()
    };
    assert!(s.on_sotw_request(&req, &Snapshot::default()).is_empty());
}
