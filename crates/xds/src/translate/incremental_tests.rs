//! Tests of the incremental encoder: always the same snapshot as a full encode.

use super::*;
use sluice_core::store::{Prepared, Snapshot as Store};
use sluice_core::synth;
use sluice_core::test_rng::Rng;

fn full(dag: &Dag, options: &Options) -> Snapshot {
    Snapshot::from_resources(&crate::translate::build(dag, options))
}

fn build(store: &Store) -> Arc<Dag> {
    Arc::new(sluice_core::dag::build(
        store,
        &sluice_core::dag::Options::default(),
    ))
}

/// `obj` under another namespace/name.
fn renamed<T>(obj: &T, key: &sluice_core::api::ObjKey) -> T
where
    T: serde::Serialize + serde::de::DeserializeOwned,
{
    let mut value = serde_json::to_value(obj).unwrap();
    value["metadata"]["name"] = key.name.to_string().into();
    value["metadata"]["namespace"] = key.namespace.to_string().into();
    serde_json::from_value(value).unwrap()
}

/// Drops one object of `map`, gives it another object's content, or adds a copy of one under
/// a new name (`copy` makes the object stored under a key from another's).
fn shuffle<T>(
    map: &mut sluice_core::store::Objects<T>,
    rng: &mut Rng,
    fresh: usize,
    copy: impl Fn(&T, &sluice_core::api::ObjKey) -> Arc<T>,
) {
    if map.is_empty() {
        return;
    }
    let keys: Vec<sluice_core::api::ObjKey> = map.keys().cloned().collect();
    let victim = keys[rng.below(keys.len())].clone();
    let donor = keys[rng.below(keys.len())].clone();
    let target = match rng.below(4) {
        0 => {
            map.remove(&victim);
            return;
        }
        1 => sluice_core::api::ObjKey::new(
            victim.namespace.clone(),
            format!("{}-copy{fresh}", victim.name),
        ),
        _ => victim,
    };
    let copied = copy(map[&donor].as_ref(), &target);
    map.insert(target, copied);
}

/// Changes one object of a random routing-relevant kind.
fn mutate(store: &mut Store, rng: &mut Rng, fresh: usize) {
    match rng.below(5) {
        0 => shuffle(&mut store.ingressroutes_v1beta1, rng, fresh, |o, key| {
            Arc::new(Prepared::new(key, Arc::new(renamed(&**o, key))))
        }),
        1 => shuffle(&mut store.ingresses, rng, fresh, |o, key| {
            Arc::new(Prepared::new(key, Arc::new(renamed(&**o, key))))
        }),
        // Stored Services, slices and Secrets hold no name of their own.
        2 => {
            let mut services = store.services().clone();
            shuffle(&mut services, rng, fresh, |s, _| Arc::new(s.clone()));
            store.set_services(services);
        }
        3 => {
            let mut slices = store.endpoint_slices().clone();
            shuffle(&mut slices, rng, fresh, |s, _| Arc::new(s.clone()));
            store.set_endpoint_slices(slices);
        }
        _ => shuffle(&mut store.secrets, rng, fresh, |s, _| Arc::new(s.clone())),
    }
}

#[test]
fn the_same_as_a_full_encode_over_a_sequence_of_changes() {
    same_as_a_full_encode_over_a_sequence_of_changes(1);
}

/// With route shards: each change splices the shards of the hosts it changed.
#[test]
fn the_same_as_a_full_encode_over_a_sequence_of_changes_with_route_shards() {
    same_as_a_full_encode_over_a_sequence_of_changes(3);
}

fn same_as_a_full_encode_over_a_sequence_of_changes(shards: u16) {
    let options = Options {
        route_shards: crate::translate::RouteShards::Fixed(shards),
        ..Default::default()
    };
    let mut store = synth::snapshot(synth::Shape {
        routing_objects: 120,
        endpoints_per_service: 2,
        unrelated_secrets: 2,
    });
    let mut encoder = Encoder::new(options.clone());
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut previous: Option<Snapshot> = None;
    // Models come from the incremental builder, as in a running sluice (they share the
    // previous model's unchanged tree nodes), and every few steps from a full build (nothing
    // shared: the diff compares every entry).
    let mut incremental = sluice_core::dag::incremental::Incremental::new(Default::default());
    let mut last: Option<(Store, Arc<Dag>)> = None;
    // Steps after which the hosts sharing the HTTPS redirect's virtual host were others.
    let mut redirected = hashbrown::HashSet::new();
    let mut redirected_changes = 0;
    for step in 0..150 {
        let dag = match &last {
            Some((s, d)) if step % 5 != 0 => {
                Arc::new(incremental.build(Some((s, d.as_ref())), &store).0)
            }
            _ => Arc::new(incremental.build_full(&store)),
        };
        assert_eq!(*dag, *build(&store), "step {step}: the model");
        last = Some((store.clone(), dag.clone()));
        let (got, _) = encoder.encode(&dag);
        let want = full(&dag, &options);
        assert_eq!(got, want, "step {step}");
        let layouts = &encoder.prev.as_ref().unwrap().http;
        assert_eq!(layouts.len(), usize::from(shards));
        let now: hashbrown::HashSet<String> =
            layouts.iter().flat_map(|l| l.redirected.clone()).collect();
        if now != redirected {
            redirected_changes += 1;
            redirected = now;
        }
        if let Some(p) = &previous {
            // Unchanged types are shared, not copied.
            for t in ResourceType::ALL {
                if p.shared(t).map(|a| &a.version) == want.shared(t).map(|a| &a.version) {
                    assert!(
                        Arc::ptr_eq(p.shared(t).unwrap(), got.shared(t).unwrap()),
                        "step {step}: {t:?} unchanged but not shared"
                    );
                }
            }
        }
        previous = Some(got);
        for _ in 0..=rng.below(3) {
            mutate(&mut store, &mut rng, step);
        }
    }
    assert!(
        redirected_changes >= 5,
        "hosts joined or left the shared HTTPS redirect only {redirected_changes} times"
    );
}

/// The HTTP route configuration of `hosts` (host → encoded `VirtualHost`) assembled from
/// nothing, as prost would encode it, with the fields of `shards` shards after the hosts.
fn assembled(hosts: &BTreeMap<String, Vec<u8>>, shards: u16) -> Vec<u8> {
    let mut config = RouteConfiguration {
        name: "config".to_string(),
        request_headers_to_remove: route::shard_headers_to_remove(shards),
        ..Default::default()
    };
    for body in hosts.values() {
        let v = envoy_types::pb::envoy::config::route::v3::VirtualHost::decode(&body[..]);
        config.virtual_hosts.push(v.unwrap());
    }
    config.encode_to_vec()
}

/// An encoded `VirtualHost` named `host` with `n` domains (bodies from ~10 to ~300 bytes:
/// length varints of one and two bytes).
fn vhost(host: &str, n: usize) -> Vec<u8> {
    envoy_types::pb::envoy::config::route::v3::VirtualHost {
        name: host.to_string(),
        domains: (0..n).map(|i| format!("{host}-{i}")).collect(),
        ..Default::default()
    }
    .encode_to_vec()
}

/// How many groups of the content hash the layout's entries make.
fn groups(layout: &Layout) -> usize {
    layout.entries.iter().filter(|e| e.ends_group).count() + 1
}

#[test]
fn host_edits_are_sorted_with_each_hosts_last_edit() {
    let mut edits = HostEdits::default();
    edits.put("b".into(), Some(vec![1]));
    edits.put("a".into(), None);
    edits.put("c".into(), Some(vec![2]));
    edits.put("b".into(), None);
    edits.put("a".into(), Some(vec![3]));
    edits.put("b".into(), Some(vec![4]));
    assert_eq!(
        edits.sorted(),
        vec![
            ("a".to_string(), Some(vec![3])),
            ("b".to_string(), Some(vec![4])),
            ("c".to_string(), Some(vec![2])),
        ]
    );
}

#[test]
fn a_splice_makes_the_bytes_and_the_digest_an_assembly_from_nothing_makes() {
    for shards in [1, 5] {
        splice_makes_the_bytes_and_the_digest_an_assembly_from_nothing_makes(shards);
    }
}

fn splice_makes_the_bytes_and_the_digest_an_assembly_from_nothing_makes(shards: u16) {
    let mut rng = Rng(0x5eed_0000_5011_ce00);
    let mut want: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut layout = Layout::default();
    let suffix = http_route_config_suffix(shards);
    assert_eq!(suffix.is_empty(), shards == 1);
    let mut bytes = http_route_config_head("config");
    bytes.extend_from_slice(&suffix);
    for step in 0..300 {
        // Edits at random places: first, last, middle, new hosts, removals; a few at a time
        // (in place), and now and then many (merged). The first step puts most hosts.
        let mut edits = BTreeMap::new();
        let n = match step {
            0 => 1_000,
            _ if step % 10 == 9 => 40,
            _ => 1 + rng.below(4),
        };
        for _ in 0..n {
            let host = format!("h{:04}", rng.below(1_200));
            if step > 0 && rng.below(3) == 0 {
                if want.remove(&host).is_some() {
                    edits.insert(host, None);
                }
            } else {
                let body = vhost(&host, rng.below(25));
                want.insert(host.clone(), body.clone());
                edits.insert(host, Some(body));
            }
        }
        let digest;
        let old = bytes.strip_suffix(&suffix[..]).unwrap();
        (bytes, digest) = layout.splice("config", old, edits.into(), &suffix);
        assert!(bytes == assembled(&want, shards), "step {step}: the bytes");
        assert_eq!(layout.len + suffix.len(), bytes.len());
        assert_eq!(
            digest,
            Some(content::large_digest("config", &bytes)),
            "step {step}: the digest"
        );
        for (host, body) in &want {
            assert_eq!(
                layout.body(&bytes, host),
                Some(&body[..]),
                "step {step}: {host}"
            );
        }
        assert_eq!(layout.entries.len(), want.len());
        assert!(
            (layout.ends.iter()).eq(layout.entries.iter().map(|e| &e.ends_group)),
            "step {step}: where groups end"
        );
        // Enough bytes for groups to matter: ~100 KB in ~6 groups.
        assert!(
            groups(&layout) >= 3,
            "step {step}: {} groups",
            groups(&layout)
        );
    }
}

/// Hosts `host-<i>.example.com` for each i of `range`, with [`vhost`]`(host, n)` as bytes.
fn hosts(range: std::ops::Range<usize>, n: usize) -> BTreeMap<String, Option<Vec<u8>>> {
    range
        .map(|i| {
            let host = format!("host-{i:05}.example.com");
            let body = vhost(&host, n);
            (host, Some(body))
        })
        .collect()
}

#[test]
fn a_change_of_a_host_hashes_only_its_group_again() {
    let mut layout = Layout::default();
    let (mut bytes, _) = layout.splice(
        "config",
        &http_route_config_head("config"),
        hosts(0..6_000, 3).into(),
        &[],
    );
    let total = bytes.len();
    assert!(total > 500_000 && groups(&layout) > 20, "{total} bytes");
    // The first host, the last, one in the middle; one changed, one added, one removed.
    let mut edits = vec![
        hosts(0..1, 4),
        hosts(5_999..6_000, 4),
        hosts(3_000..3_001, 4),
    ];
    edits.push(hosts(6_000..6_001, 3));
    edits.push(BTreeMap::from([(
        "host-02000.example.com".to_string(),
        None,
    )]));
    for edit in edits {
        layout.hashed = 0;
        let digest;
        (bytes, digest) = layout.splice("config", &bytes, edit.clone().into(), &[]);
        assert_eq!(
            digest,
            Some(content::large_digest("config", &bytes)),
            "{edit:?}"
        );
        // One group of ~16 KiB, two when the changed host moved where a group ends.
        assert!(
            layout.hashed < 4 * content::GROUP_BYTES as usize,
            "{} of {total} bytes hashed again for {:?}",
            layout.hashed,
            edit.keys()
        );
    }
}

/// A configuration below [`LARGE`] is hashed in one piece by the snapshot (no digest from the
/// splice); the groups its edits touched meanwhile are still hashed again once it is large.
#[test]
fn a_small_configuration_is_hashed_whole_and_in_groups_once_large() {
    use crate::xds::cache::LARGE;
    let mut layout = Layout::default();
    let head = http_route_config_head("config");
    let (mut bytes, mut digest) = layout.splice("config", &head, hosts(0..400, 3).into(), &[]);
    assert!(bytes.len() >= LARGE, "{} bytes", bytes.len());
    assert_eq!(digest, Some(content::large_digest("config", &bytes)));
    // Most hosts removed, then one changed and one added while small: no digest.
    let removed: BTreeMap<String, Option<Vec<u8>>> =
        (hosts(40..400, 3).into_keys()).map(|h| (h, None)).collect();
    let mut edits = vec![removed, hosts(5..6, 4), hosts(400..401, 3)];
    for edit in edits.drain(..) {
        (bytes, digest) = layout.splice("config", &bytes, edit.into(), &[]);
        assert!(bytes.len() < LARGE, "{} bytes", bytes.len());
        assert_eq!(digest, None);
    }
    // Large again: the digest is the bytes', whatever groups were forgotten while small.
    (bytes, digest) = layout.splice("config", &bytes, hosts(40..400, 5).into(), &[]);
    assert!(bytes.len() >= LARGE);
    assert_eq!(digest, Some(content::large_digest("config", &bytes)));
    (bytes, digest) = layout.splice("config", &bytes, hosts(5..6, 3).into(), &[]);
    assert_eq!(digest, Some(content::large_digest("config", &bytes)));
}

#[test]
fn a_layout_that_does_not_match_the_bytes_is_rebuilt() {
    // An encode stopped half-way (a panic caught by the pipeline's lock) leaves the layout
    // taken; the next encode must not splice into bytes it cannot describe.
    let options = Options::default();
    let mut store = synth::snapshot(synth::Shape {
        routing_objects: 40,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let mut encoder = Encoder::new(options.clone());
    let dag = build(&store);
    encoder.encode(&dag);
    encoder.prev.as_mut().unwrap().http = vec![Layout::default()];
    let mut rng = Rng(0x5eed_0000_0000_0042);
    mutate(&mut store, &mut rng, 1);
    mutate(&mut store, &mut rng, 2);
    let dag = build(&store);
    assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
    // And the encoder goes on splicing from there.
    mutate(&mut store, &mut rng, 3);
    let dag = build(&store);
    assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
}

use crate::translate::shard_tests::ingress_at as ingress;

#[test]
fn a_wildcard_host_follows_changes_of_the_catch_all_host() {
    for shards in [1, 4] {
        a_wildcard_host_follows_changes_of_the_catch_all_host_in(shards);
    }
}

fn a_wildcard_host_follows_changes_of_the_catch_all_host_in(shards: u16) {
    let options = Options {
        route_shards: crate::translate::RouteShards::Fixed(shards),
        ..Default::default()
    };
    let mut store = Store::from_objects([
        ingress("wild", Some("*.example.com"), "/"),
        ingress("all", None, "/x"),
    ]);
    let mut encoder = Encoder::new(options.clone());
    let dag = build(&store);
    assert!(dag.vhosts.contains_key("*") && dag.vhosts.contains_key("*.example.com"));
    assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
    // Only the catch-all host changes; the wildcard host's HTTP routes include its routes.
    store.insert(ingress("all", None, "/y"));
    let dag = build(&store);
    assert_eq!(encoder.encode(&dag).0, full(&dag, &options));
}

/// The xDS snapshots before and after `change` is applied to a TLS root of a small synthetic
/// cluster (model built incrementally, as in a running sluice); checks that the incremental
/// encoding equals a full one.
fn tls_root_changed(
    change: impl FnOnce(&mut sluice_core::api::heptio_v1beta1::IngressRoute),
) -> (Snapshot, Snapshot) {
    let options = Options::default();
    let mut store = synth::snapshot(synth::Shape {
        routing_objects: 30,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let mut incremental = sluice_core::dag::incremental::Incremental::new(Default::default());
    let mut encoder = Encoder::new(options.clone());
    let dag = Arc::new(incremental.build_full(&store));
    let (before, _) = encoder.encode(&dag);
    let (key, root) = store
        .ingressroutes_v1beta1
        .iter()
        .find(|(_, r)| r.spec.virtualhost.as_ref().is_some_and(|v| v.tls.is_some()))
        .map(|(k, r)| (k.clone(), r.clone()))
        .expect("a TLS root");
    let mut changed = (*root).clone();
    change(&mut changed);
    let prev_store = store.clone();
    let changed = Prepared::new(&key, Arc::new(changed));
    store.ingressroutes_v1beta1.insert(key, Arc::new(changed));
    let next = Arc::new(incremental.build(Some((&prev_store, &dag)), &store).0);
    let (after, _) = encoder.encode(&next);
    assert_eq!(after, full(&next, &options));
    (before, after)
}

#[test]
fn the_tls_listener_follows_a_hosts_tls_settings() {
    // Only a host's TLS settings change: no secret changes, yet the listener's filter chain
    // for that host does.
    let (before, after) = tls_root_changed(|root| {
        root.spec
            .virtualhost
            .as_mut()
            .and_then(|v| v.tls.as_mut())
            .unwrap()
            .minimum_protocol_version = Some(sluice_core::api::TlsVersion::V1_3);
    });
    assert_ne!(
        before.version(ResourceType::Listener),
        after.version(ResourceType::Listener)
    );
    assert_eq!(
        before.version(ResourceType::Secret),
        after.version(ResourceType::Secret)
    );
}

#[test]
fn a_tls_hosts_route_change_leaves_the_tls_listener_alone() {
    let (before, after) = tls_root_changed(|root| root.spec.routes[0].match_ = "/moved".into());
    assert_ne!(
        before.version(ResourceType::Route),
        after.version(ResourceType::Route)
    );
    assert!(Arc::ptr_eq(
        before.shared(ResourceType::Listener).unwrap(),
        after.shared(ResourceType::Listener).unwrap()
    ));
}

#[test]
fn an_unchanged_model_shares_every_type() {
    let options = Options::default();
    let store = synth::snapshot(synth::Shape {
        routing_objects: 40,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let mut encoder = Encoder::new(options);
    let (a, _) = encoder.encode(&build(&store));
    let (b, _) = encoder.encode(&build(&store));
    for t in ResourceType::ALL {
        assert!(
            Arc::ptr_eq(a.shared(t).unwrap(), b.shared(t).unwrap()),
            "{t:?}"
        );
    }
    assert!(a.same_as(&b));
}

/// A resource and its key in the snapshot hold one name, and the resources of a cluster (its
/// cluster and its load assignment) hold the model's cluster name: no copy of a name per
/// resource, whichever thread encoded it.
#[test]
fn resources_share_their_names() {
    let store = synth::snapshot(synth::Shape {
        routing_objects: 3 * PARALLEL_CLUSTERS,
        endpoints_per_service: 1,
        unrelated_secrets: 2,
    });
    let dag = build(&store);
    let options = Options {
        route_shards: crate::translate::RouteShards::Fixed(2),
        ..Default::default()
    };
    let (snapshot, _) = Encoder::new(options).encode(&dag);
    for t in ResourceType::ALL {
        assert!(!snapshot.of(t).is_empty(), "{t:?}");
        for (key, r) in snapshot.of(t) {
            assert!(Arc::ptr_eq(key, &r.name), "{t:?} {key}");
        }
    }
    for t in [ResourceType::Cluster, ResourceType::Endpoint] {
        assert_eq!(snapshot.of(t).len(), dag.clusters.len(), "{t:?}");
        for (name, c) in &dag.clusters {
            let r = &snapshot.of(t)[&**name];
            assert!(Arc::ptr_eq(&r.name, &c.name), "{t:?} {name}");
        }
    }
}

#[test]
fn many_changed_clusters_are_encoded_on_a_second_thread_with_the_same_result() {
    // One route configuration: `auto` would switch shards on and off between these models.
    let options = Options {
        route_shards: crate::translate::RouteShards::Fixed(1),
        ..Default::default()
    };
    let shape = |routing_objects| synth::Shape {
        routing_objects,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    };
    let large = build(&synth::snapshot(shape(3 * PARALLEL_CLUSTERS)));
    let small = build(&synth::snapshot(shape(PARALLEL_CLUSTERS / 10)));
    assert!(
        large.clusters.len() >= small.clusters.len() + PARALLEL_CLUSTERS,
        "{} clusters, then {}",
        large.clusters.len(),
        small.clusters.len()
    );
    // Every cluster changed, but not its endpoints: new clusters, the same load assignments.
    let mut rebalanced = (*large).clone();
    rebalanced.clusters = large
        .clusters
        .iter()
        .map(|(name, c)| {
            let mut c = (**c).clone();
            c.lb = sluice_core::api::LbStrategy::Random;
            (name.clone(), Arc::new(c))
        })
        .collect();
    let rebalanced = Arc::new(rebalanced);
    let mut encoder = Encoder::new(options.clone());
    let mut before: Option<Snapshot> = None;
    // From nothing (clusters added), to fewer (removed), back to many (added again), then every
    // cluster changed.
    for dag in [&large, &small, &large, &rebalanced] {
        let (snapshot, _) = encoder.encode(dag);
        assert_eq!(snapshot, full(dag, &options));
        if let Some(before) = before.replace(snapshot.clone())
            && Arc::ptr_eq(dag, &rebalanced)
        {
            let [endpoints_then, endpoints_now] =
                [&before, &snapshot].map(|s| s.shared(ResourceType::Endpoint).unwrap());
            assert!(
                Arc::ptr_eq(endpoints_then, endpoints_now),
                "load assignments kept"
            );
            assert!(!before.same_as(&snapshot), "the clusters changed");
        }
    }
}

#[test]
fn gateway_tcp_listeners_come_and_go_as_in_a_full_encode() {
    use sluice_core::dag::{TcpListener, WeightedCluster};
    let options = Options::default();
    let store = synth::snapshot(synth::Shape {
        routing_objects: 20,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let base = build(&store);
    let names: Vec<_> = base.clusters.keys().take(2).cloned().collect();
    let listener = |port: u16, weights: &[u32]| {
        let clusters = (names.iter().zip(weights))
            .map(|(cluster, &weight)| WeightedCluster {
                cluster: cluster.clone(),
                weight,
            })
            .collect();
        let route = sluice_core::api::ObjectRef::new(sluice_core::api::Kind::TcpRoute, "db", "pg");
        (
            port,
            Arc::new(TcpListener {
                port,
                clusters,
                route,
            }),
        )
    };
    // Ports whose names and numbers sort differently; a change of weights; a listener whose
    // weights are all 0 (no listener); removals.
    let steps: Vec<Vec<(u16, Arc<TcpListener>)>> = vec![
        vec![listener(900, &[1]), listener(10000, &[1, 3])],
        vec![listener(900, &[1]), listener(10000, &[1, 1])],
        vec![listener(900, &[0]), listener(10000, &[1, 1])],
        vec![listener(5432, &[2])],
        vec![],
    ];
    let mut encoder = Encoder::new(options.clone());
    for (i, tcp) in steps.into_iter().enumerate() {
        let mut dag = (*base).clone();
        dag.tcp_listeners = tcp.iter().cloned().collect();
        let (got, _) = encoder.encode(&Arc::new(dag.clone()));
        assert_eq!(got, full(&dag, &options), "step {i}");
        let listeners = crate::translate::build(&dag, &options).listeners;
        let tcp_names: Vec<&str> = (listeners.iter())
            .map(|l| l.name.as_str())
            .filter(|n| n.starts_with("ingress_tcp_"))
            .collect();
        let want: Vec<String> = (tcp.iter())
            .filter(|(_, l)| l.clusters.iter().any(|c| c.weight > 0))
            .map(|(port, _)| format!("ingress_tcp_{port}"))
            .collect();
        let mut want: Vec<&str> = want.iter().map(String::as_str).collect();
        want.sort();
        assert_eq!(tcp_names, want, "step {i}");
    }
}

#[test]
fn tls_passthrough_hosts_come_and_go_as_in_a_full_encode() {
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use sluice_core::dag::{VirtualHost, WeightedCluster};
    let options = Options::default();
    let store = synth::snapshot(synth::Shape {
        routing_objects: 20,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    let base = build(&store);
    let cluster = base.clusters.keys().next().cloned().expect("a cluster");
    let passthrough = |host: &str, weight: u32, with_routes: Option<&VirtualHost>| {
        let mut v = with_routes.cloned().unwrap_or_default();
        v.host = host.to_string();
        v.tls_passthrough = Some(smallvec::smallvec![WeightedCluster {
            cluster: cluster.clone(),
            weight,
        }]);
        (host.to_string(), Arc::new(v))
    };
    // A plain host of the model, whose HTTP routes stay beside its passthrough.
    let plain = (base.vhosts.values())
        .find(|v| v.tls.is_none() && v.tcp_proxy.is_none() && !v.routes.is_empty())
        .expect("a plain host")
        .clone();
    let steps: Vec<Vec<(String, Arc<VirtualHost>)>> = vec![
        vec![passthrough("db.example.com", 1, None)],
        vec![
            passthrough("db.example.com", 2, None),
            passthrough("*.pass.example.com", 1, None),
            passthrough(&plain.host, 1, Some(&plain)),
        ],
        vec![passthrough("*.pass.example.com", 0, None)],
        vec![],
    ];
    let https = |r: &crate::translate::Resources| -> Option<Listener> {
        r.listeners
            .iter()
            .find(|l| l.name == HTTPS_LISTENER)
            .cloned()
    };
    let mut encoder = Encoder::new(options.clone());
    for (i, hosts) in steps.into_iter().enumerate() {
        let mut dag = (*base).clone();
        for (host, v) in &hosts {
            dag.vhosts.insert(host.clone(), v.clone());
        }
        let (got, _) = encoder.encode(&Arc::new(dag.clone()));
        assert_eq!(got, full(&dag, &options), "step {i}");
        let resources = crate::translate::build(&dag, &options);
        let chains = https(&resources)
            .map(|l| l.filter_chains)
            .unwrap_or_default();
        for (host, v) in &hosts {
            let chain = chains.iter().find(|c| c.name == *host);
            let live = v.tls_passthrough.iter().flatten().any(|c| c.weight > 0);
            assert_eq!(chain.is_some(), live, "step {i}: {host}");
            if let Some(chain) = chain {
                let m = chain.filter_chain_match.as_ref().unwrap();
                assert_eq!(m.server_names, std::slice::from_ref(host));
                // Passed through: no TLS of Envoy's on the chain.
                assert!(chain.transport_socket.is_none(), "step {i}: {host}");
                assert_eq!(chain.filters[0].name, "envoy.filters.network.tcp_proxy");
            }
            // Only a host with HTTP routes of its own is in the plain-HTTP configuration.
            let in_http = (resources.routes.iter())
                .flat_map(|r| &r.virtual_hosts)
                .any(|vh| vh.name == *host);
            assert_eq!(in_http, !v.routes.is_empty(), "step {i}: {host}");
        }
    }
}
