use std::collections::BTreeMap;

use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::google::rpc::Status;

use super::*;
use crate::xds::cache::set_version;
use ResourceType::{Cluster as C, Endpoint as E, Listener as L, Route as R, Secret as S};
use sluice_core::test_rng::Rng;

fn mk_snap(items: &[(ResourceType, &[(&str, &str)])]) -> Snapshot {
    let mut m: BTreeMap<ResourceType, BTreeMap<String, Any>> = BTreeMap::new();
    for (t, rs) in items {
        let e = m.entry(*t).or_default();
        for (n, content) in rs.iter() {
            e.insert(
                n.to_string(),
                Any {
                    type_url: t.type_url().into(),
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
        type_url: t.type_url().into(),
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
        type_url: t.type_url().into(),
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
                ResourceType::from_type_url(d.type_url).unwrap(),
                d.nonce.clone(),
                d.resources
                    .iter()
                    .map(|r| String::from_utf8(r.body.value.clone()).unwrap())
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
                ResourceType::from_type_url(d.type_url).unwrap(),
                d.nonce.clone(),
                d.resources
                    .iter()
                    .map(|r| String::from_utf8(r.body.value.clone()).unwrap())
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
    let names: Vec<&str> = snap.of(C).keys().map(|k| &**k).collect();
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
    req.version_info = set_version([&snap.of(C)["a"]]);
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
    // The client holds a's endpoints already: b's alone go out.
    assert_eq!((out[0].0, out[0].2.clone()), (E, strs(&["eps-b"])));
    let n = out[0].1.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a", "b"], &n), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (R, strs(&["routes->b"])));
    let n = out[0].1.clone();
    // Routes acknowledged: now a goes.
    let out = sotw(&s.on_sotw_request(&mk_sotw(R, &["ingress_http"], &n), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (C, strs(&["cluster-b"])));
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(C, &[], &n), &next)).is_empty());
    // Envoy drops a's endpoint subscription: it is answered, with nothing to add (b's
    // endpoints are held already).
    let eds_nonce = s.types[&E].last_nonce.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["b"], &eds_nonce), &next));
    assert_eq!((out[0].0, out[0].2.clone()), (E, vec![]));
}

#[test]
fn sotw_named_subscription_change_is_answered() {
    let snap = mk_snap(&[(S, &[("ns/one", "secret-1"), ("ns/two", "secret-2")])]);
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    let out = sotw(&s.on_sotw_request(&mk_sotw(S, &["ns/one"], ""), &snap));
    assert_eq!(out[0].2, strs(&["secret-1"]));
    let n = out[0].1.clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(S, &["ns/one", "ns/two"], &n), &snap));
    assert_eq!(
        out[0].2,
        strs(&["secret-2"]),
        "the newly requested secret alone"
    );
}

#[test]
fn sotw_responses_of_routes_carry_only_what_changed_and_of_listeners_everything() {
    let world = |https_a: &str, listener: &str| {
        mk_snap(&[
            (C, &[("a", "cluster-a")]),
            (E, &[("a", "eps-a")]),
            (
                L,
                &[
                    ("ingress_http", "listener-http"),
                    ("ingress_https", listener),
                ],
            ),
            (
                R,
                &[
                    ("https/a.example.com", https_a),
                    ("https/b.example.com", "routes-b"),
                    ("ingress_http", "routes-http"),
                ],
            ),
        ])
    };
    let routes = ["https/a.example.com", "https/b.example.com", "ingress_http"];
    let snap = world("routes-a", "listener-https");
    let mut s = Stream::new(Mode::Sotw, Arc::default());
    let n = sotw(&s.on_sotw_request(&mk_sotw(C, &[], ""), &snap))[0]
        .1
        .clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], ""), &snap)).is_empty());
    assert!(sotw(&s.on_sotw_request(&mk_sotw(C, &[], &n), &snap)).is_empty());
    let n = sotw(&s.on_sotw_request(&mk_sotw(E, &["a"], ""), &snap))[0]
        .1
        .clone();
    let out = sotw(&s.on_sotw_request(&mk_sotw(E, &["a"], &n), &snap));
    assert_eq!(out[0].0, L);
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], &n), &snap)).is_empty());
    // The first answer carries every requested route configuration.
    let out = sotw(&s.on_sotw_request(&mk_sotw(R, &routes, ""), &snap));
    assert_eq!(out[0].2, strs(&["routes-a", "routes-b", "routes-http"]));
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(R, &routes, &n), &snap)).is_empty());

    // One host's routes change: its configuration alone goes out, at the new set's version.
    let next = world("routes-a2", "listener-https");
    let out = s.on_snapshot(&next);
    let Response::Sotw(r) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(sotw(&out)[0].2, strs(&["routes-a2"]));
    assert_eq!(r.version_info, next.shared(R).unwrap().version);
    let n = r.nonce.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(R, &routes, &n), &next)).is_empty());

    // A listener change still carries every listener: one left out would be deleted.
    let third = world("routes-a2", "listener-https-2");
    let out = sotw(&s.on_snapshot(&third));
    assert_eq!(
        (out[0].0, out[0].2.clone()),
        (L, strs(&["listener-http", "listener-https-2"]))
    );

    // A request without a nonce (a client that saw no response of the type) gets everything.
    let mut fresh = mk_sotw(R, &routes, "");
    fresh.version_info = r.version_info.clone();
    let n = out[0].1.clone();
    assert!(sotw(&s.on_sotw_request(&mk_sotw(L, &[], &n), &third)).is_empty());
    let out = sotw(&s.on_sotw_request(&fresh, &third));
    assert_eq!(out[0].2, strs(&["routes-a2", "routes-b", "routes-http"]));
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
        .insert("a".into(), snap.of(C)["a"].version.to_string());
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

/// The type and nonce of a response.
fn response_nonce(r: &Response) -> (ResourceType, String) {
    match r {
        Response::Sotw(d) => (
            ResourceType::from_type_url(d.type_url).unwrap(),
            d.nonce.clone(),
        ),
        Response::Delta(d) => (
            ResourceType::from_type_url(d.type_url).unwrap(),
            d.nonce.clone(),
        ),
    }
}

/// Differential tests against the reference algorithm.
#[path = "stream_differential_tests.rs"]
mod differential;

/// `n` clusters c0… with their endpoints, one listener and one route configuration.
fn big_world(n: usize) -> Snapshot {
    let any = |t: ResourceType, content: String| Any {
        type_url: t.type_url().into(),
        value: content.into_bytes(),
    };
    let per_cluster = |t: ResourceType| -> BTreeMap<String, Any> {
        (0..n)
            .map(|i| (format!("c{i}"), any(t, format!("{}-c{i}", t.short()))))
            .collect()
    };
    Snapshot::from_encoded(BTreeMap::from([
        (C, per_cluster(C)),
        (E, per_cluster(E)),
        (
            L,
            BTreeMap::from([("http".to_string(), any(L, "listener".into()))]),
        ),
        (
            R,
            BTreeMap::from([("http".to_string(), any(R, "routes-1".into()))]),
        ),
    ]))
}

/// Sends a request of type `t` for `names` with `nonce` (SotW: the whole subscription; delta:
/// `names` subscribed).
fn request(
    s: &mut Stream,
    t: ResourceType,
    names: &[&str],
    nonce: &str,
    snap: &Snapshot,
) -> Vec<Response> {
    match s.mode {
        Mode::Sotw => s.on_sotw_request(&mk_sotw(t, names, nonce), snap),
        Mode::Delta => {
            let sub = if nonce.is_empty() { names } else { &[] };
            s.on_delta_request(&mk_delta(t, sub, &[], nonce), snap)
        }
    }
}

/// Acknowledges `out` and whatever that brings, as Envoy would; returns the types acknowledged.
fn ack_all(
    s: &mut Stream,
    mut out: Vec<Response>,
    names: &BTreeMap<ResourceType, Vec<&str>>,
    snap: &Snapshot,
) -> Vec<ResourceType> {
    let mut acked = Vec::new();
    while !out.is_empty() {
        let (t, nonce) = response_nonce(&out.remove(0));
        acked.push(t);
        out.extend(request(s, t, &names[&t], &nonce, snap));
    }
    acked
}

#[test]
fn acks_on_a_large_stream_compute_nothing() {
    let snap = big_world(10_000);
    let eps: Vec<&str> = snap.of(E).keys().map(|k| &**k).collect();
    let names = BTreeMap::from([(C, vec![]), (E, eps), (L, vec![]), (R, vec!["http"])]);
    for mode in [Mode::Sotw, Mode::Delta] {
        let mut s = Stream::new(mode, Arc::default());
        let mut out = Vec::new();
        for t in [C, L, E, R] {
            out.extend(request(&mut s, t, &names[&t], "", &snap));
        }
        let acked = ack_all(&mut s, out, &names, &snap);
        assert_eq!(acked, vec![C, E, L, R], "{mode:?}");

        // One endpoint changes: only endpoints are computed, and their ACK computes nothing.
        s.computed_log.clear();
        s.walks.set(0);
        let next = snap.with_replaced(
            E,
            vec![(
                "c7".into(),
                Any {
                    type_url: E.type_url().into(),
                    value: b"eds-c7-2".to_vec(),
                },
            )],
        );
        let out = s.on_snapshot(&next);
        assert_eq!(s.computed_log, vec![E], "{mode:?}");
        assert_eq!(ack_all(&mut s, out, &names, &next), vec![E]);
        assert_eq!(s.computed_log, vec![E], "{mode:?}: the ACK computed a type");
        assert_eq!(s.walks.get(), 0, "{mode:?}: a walk over every resource");
        let eds = &s.types[&E];
        assert!(
            eds.computed
                .as_ref()
                .is_some_and(|b| !b.kept && b.snapshot.as_ref() == next.shared(E))
        );

        // The route changes: only routes are computed, and they wait for nothing. That clusters
        // are settled was found when listeners were first sent; neither the acknowledged clusters
        // nor the endpoint subscription changed since, so no walk finds it again. Their ACK
        // computes nothing and walks nothing either.
        let third = next.with_replaced(
            R,
            vec![(
                "http".into(),
                Any {
                    type_url: R.type_url().into(),
                    value: b"routes-2".to_vec(),
                },
            )],
        );
        let out = s.on_snapshot(&third);
        assert_eq!(s.computed_log, vec![E, R], "{mode:?}");
        assert_eq!(s.walks.get(), 0, "{mode:?}: clusters walked again");
        assert_eq!(ack_all(&mut s, out, &names, &third), vec![R]);
        assert_eq!(
            s.computed_log,
            vec![E, R],
            "{mode:?}: the ACK computed a type"
        );
        assert_eq!(s.walks.get(), 0, "{mode:?}: the ACK walked every resource");

        // A request repeating an acknowledged nonce computes nothing either.
        let nonce = s.types[&C].last_nonce.clone();
        assert!(request(&mut s, C, &[], &nonce, &third).is_empty());
        assert_eq!(s.computed_log, vec![E, R], "{mode:?}");
    }
}

#[test]
fn a_new_cluster_and_its_endpoints_walk_nothing_on_a_large_stream() {
    let snap = big_world(10_000);
    let eps: Vec<&str> = snap.of(E).keys().map(|k| &**k).collect();
    let names = BTreeMap::from([
        (C, vec![]),
        (E, eps.clone()),
        (L, vec![]),
        (R, vec!["http"]),
    ]);
    let any = |t: ResourceType, v: &str| Any {
        type_url: t.type_url().into(),
        value: v.as_bytes().to_vec(),
    };
    for mode in [Mode::Sotw, Mode::Delta] {
        let mut s = Stream::new(mode, Arc::default());
        let mut out = Vec::new();
        for t in [C, L, E, R] {
            out.extend(request(&mut s, t, &names[&t], "", &snap));
        }
        ack_all(&mut s, out, &names, &snap);
        s.walks.set(0);

        // A Service appears: its cluster, its endpoints and a route to it.
        let next = snap
            .with_replaced(C, vec![("cnew".into(), any(C, "cds-cnew"))])
            .with_replaced(E, vec![("cnew".into(), any(E, "eds-cnew"))])
            .with_replaced(R, vec![("http".into(), any(R, "routes-2"))]);
        let out = s.on_snapshot(&next);
        let sent: Vec<ResourceType> = out.iter().map(|r| response_nonce(r).0).collect();
        assert_eq!(sent, vec![C], "{mode:?}: the cluster goes first");
        // Envoy accepts the cluster; the route waits until the cluster's endpoints are asked for.
        let (_, nonce) = response_nonce(&out[0]);
        let out = request(&mut s, C, &[], &nonce, &next);
        assert!(
            out.is_empty(),
            "{mode:?}: sent before the endpoints were requested"
        );
        let mut with_new = eps.clone();
        with_new.push("cnew");
        let out = match mode {
            Mode::Sotw => {
                let nonce = s.types[&E].last_nonce.clone();
                s.on_sotw_request(&mk_sotw(E, &with_new, &nonce), &next)
            }
            Mode::Delta => s.on_delta_request(&mk_delta(E, &["cnew"], &[], ""), &next),
        };
        let names = BTreeMap::from([(C, vec![]), (E, with_new), (L, vec![]), (R, vec!["http"])]);
        let acked = ack_all(&mut s, out, &names, &next);
        assert!(
            acked.contains(&E) && acked.contains(&R),
            "{mode:?}: {acked:?}"
        );
        assert_eq!(
            s.types[&R].acked["http"].body.value,
            b"routes-2".to_vec(),
            "{mode:?}"
        );
        // Only names were added to the endpoint subscription: what was found requested before
        // still is, and the new cluster alone is looked at. (Whether the one route configuration
        // is acknowledged is a walk over the route configurations, 1 here.)
        assert!(
            s.walks.get() < 10,
            "{mode:?}: walks visited {} resources",
            s.walks.get()
        );

        // Endpoints of an acknowledged cluster unsubscribed: that is found (routes wait again).
        if mode == Mode::Delta {
            let out = s.on_delta_request(&mk_delta(E, &[], &["c1"], ""), &next);
            assert!(out.is_empty(), "{out:?}");
            let last = next.with_replaced(R, vec![("http".into(), any(R, "routes-3"))]);
            let out = s.on_snapshot(&last);
            assert!(
                out.is_empty(),
                "routes sent though c1's endpoints are not requested"
            );
        }
    }
}

/// The stream algorithm as it was before types were skipped by their basis: the oracle of the
/// differential tests.
#[path = "stream_reference.rs"]
mod reference;

/// The one-walk comparisons against what a lookup per name gives, over random sets.
#[test]
fn walked_diffs_match_lookups() {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for _ in 0..300 {
        let mut set = |n: usize| -> BTreeMap<String, String> {
            (0..rng.below(n))
                .map(|_| (format!("r{}", rng.below(40)), format!("v{}", rng.below(3))))
                .collect()
        };
        let (a, b) = (set(30), set(30));
        let map = |m: &BTreeMap<String, String>| -> ResourceMap {
            m.iter()
                .map(|(n, v)| {
                    let r = Resource::known(n.as_str(), v.clone());
                    (r.name.clone(), Arc::new(r))
                })
                .collect()
        };
        let desired = map(&a);
        // `b` built on its own, and `b` derived from `desired` by edits (sharing its nodes):
        // both walks must find the same differences.
        let mut derived = desired.clone();
        for n in a.keys().filter(|n| !b.contains_key(*n)) {
            derived.remove(n.as_str());
        }
        for (n, v) in &b {
            if a.get(n) != Some(v) {
                derived.insert(
                    n.as_str().into(),
                    Arc::new(Resource::known(n.as_str(), v.clone())),
                );
            }
        }
        for sent in [map(&b), derived] {
            let (changed, removed) = diff(&desired, &sent);
            let changed: Vec<&str> = changed.iter().map(|r| &*r.name).collect();
            let expect_changed: Vec<&str> = a
                .iter()
                .filter(|(n, v)| b.get(*n) != Some(*v))
                .map(|(n, _)| n.as_str())
                .collect();
            assert_eq!(changed, expect_changed);
            let expect_removed: BTreeSet<String> =
                b.keys().filter(|n| !a.contains_key(*n)).cloned().collect();
            assert_eq!(removed, expect_removed);
            let expect_versions: Vec<ResourceName> = a
                .iter()
                .filter(|(n, v)| b.get(*n).is_some_and(|bv| bv != *v))
                .map(|(n, _)| n.as_str().into())
                .collect();
            assert_eq!(changed_versions(&desired, &sent), expect_versions);
        }
    }
}

/// A resource whose new content shows the same 64-bit version string as what the client holds
/// (a collision a tenant could search for) is still sent; one the client only announced by
/// version (delta `initial_resource_versions`) is compared by that version.
#[test]
fn a_version_string_collision_is_still_sent() {
    let body = |b: &[u8]| Any {
        type_url: "t".into(),
        value: b.to_vec(),
    };
    let held = Resource::crafted("r", "00ff00ff00ff00ff", [1, 2, 3, 4], body(b"old"));
    let new = Resource::crafted("r", "00ff00ff00ff00ff", [9, 2, 3, 4], body(b"new"));
    let one = |r: Resource| -> ResourceMap {
        ResourceMap::from(vec![(ResourceName::from("r"), Arc::new(r))])
    };
    let (changed, removed) = diff(&one(new.clone()), &one(held.clone()));
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].body.value, b"new");
    assert!(removed.is_empty());
    assert_eq!(
        changed_versions(&one(held), &one(new.clone())),
        [ResourceName::from("r")]
    );
    let announced = Resource::known("r", "00ff00ff00ff00ff".into());
    assert!(
        diff(&one(new.clone()), &one(announced.clone()))
            .0
            .is_empty()
    );
    let announced_other = Resource::known("r", "1111111111111111".into());
    assert_eq!(diff(&one(new), &one(announced_other)).0.len(), 1);
}
