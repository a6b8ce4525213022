//! Tests of `--http-route-shards auto` in the incremental encoder: shards go on and off with the
//! number of hosts, and after a switch the previous listener's route configurations follow
//! changes for a while.

use std::sync::Arc;
use std::time::Duration;

use super::incremental::Encoder;
use super::shard_tests::ingress;
use super::*;
use crate::xds::cache::Snapshot;
use sluice_core::store::Snapshot as Store;

/// `auto` with 3 shards from 10 hosts on, back to one below 6.
fn auto(keep_previous_for: Duration) -> Options {
    Options {
        route_shards: RouteShards::Auto(AutoRouteShards {
            shards: 3,
            on_at_hosts: 10,
            off_below_hosts: 6,
            keep_previous_for,
        }),
        ..Default::default()
    }
}

/// A model of `n` hosts: a wildcard host and `n - 1` exact ones.
fn hosts(n: usize) -> Arc<Dag> {
    hosts_numbered(1..n)
}

/// A model of a wildcard host and the exact hosts `h{i}.example.com` of `numbers`.
fn hosts_numbered(numbers: impl IntoIterator<Item = usize>) -> Arc<Dag> {
    let mut store = Store::from_objects([ingress("wild", Some("*.example.com"))]);
    let mut n = 1;
    for i in numbers {
        store.insert(ingress(
            &format!("r{i}"),
            Some(&format!("h{i}.example.com")),
        ));
        n += 1;
    }
    let dag = sluice_core::dag::build(&store, &sluice_core::dag::Options::default());
    assert_eq!(dag.vhosts.len(), n);
    Arc::new(dag)
}

/// Asserts that every listener, scope and route configuration of `want` is in `got`, byte for
/// byte (not the listeners unless `listeners`).
fn holds(got: &Snapshot, want: &Resources, listeners: bool, what: &str) {
    let want = Snapshot::from_resources(want);
    let listener = listeners.then_some(ResourceType::Listener);
    for t in [ResourceType::ScopedRoute, ResourceType::Route]
        .into_iter()
        .chain(listener)
    {
        for (name, r) in want.of(t).iter() {
            let held = got.of(t).get(&**name);
            assert!(
                held.is_some_and(|h| h.body.value == r.body.value),
                "{what}: {t:?} {name} is not held as a full build makes it"
            );
        }
    }
}

/// Asserts that `got` holds `ingress_http`, kept beside the shards, as `one` (a build of one
/// route configuration) makes it.
fn keeps_ingress_http(got: &Snapshot, one: &Resources, what: &str) {
    let kept = (one.routes.iter().find(|r| r.name == HTTP_ROUTE_CONFIG))
        .expect("a build of one configuration makes ingress_http");
    let held = got.of(ResourceType::Route).get(HTTP_ROUTE_CONFIG);
    assert_eq!(
        held.map(|r| &r.body.value[..]),
        Some(&kept.encode_to_vec()[..]),
        "ingress_http, kept: {what}"
    );
}

#[test]
fn auto_switches_on_and_off_with_the_hosts_and_matches_a_full_build() {
    let options = auto(Duration::ZERO);
    let mut encoder = Encoder::new(options.clone());
    let mut shards_seen = Vec::new();
    // Up past the upper threshold, down below the lower one, up again.
    for n in (1..=12).chain((3..12).rev()).chain(4..=11) {
        let dag = hosts(n);
        let (snapshot, _) = encoder.encode(&dag);
        let shards = encoder.http_route_shards().unwrap();
        let want = build_with_shards(&dag, &options, shards);
        assert_eq!(snapshot, Snapshot::from_resources(&want), "{n} hosts");
        if shards_seen.last() != Some(&(n, shards)) {
            shards_seen.push((n, shards));
        }
    }
    let switches: Vec<(usize, u16)> = (shards_seen.windows(2))
        .filter(|w| w[0].1 != w[1].1)
        .map(|w| w[1])
        .collect();
    // On at 10 on the way up, off at 5 on the way down (not at 9..6), on at 10 again.
    assert_eq!(switches, [(10, 3), (5, 1), (10, 3)]);
}

#[test]
fn after_a_switch_the_previous_route_configurations_follow_changes_for_a_while() {
    let options = auto(Duration::from_secs(3600));
    let mut encoder = Encoder::new(options.clone());
    let one = |dag: &Dag| build_with_shards(dag, &options, 1);
    let three = |dag: &Dag| build_with_shards(dag, &options, 3);
    let (before, _) = encoder.encode(&hosts(9));
    assert_eq!(before, Snapshot::from_resources(&one(&hosts(9))));
    // On: the sharded listener, and `ingress_http` as well, kept up to date.
    for n in [10, 11, 12] {
        let dag = hosts(n);
        let (snapshot, _) = encoder.encode(&dag);
        assert_eq!(encoder.http_route_shards(), Some(3));
        holds(&snapshot, &three(&dag), true, "on");
        keeps_ingress_http(
            &snapshot,
            &one(&dag),
            &format!("{n} hosts: follows the changes"),
        );
        assert_eq!(snapshot.of(ResourceType::Route).len(), 4);
        assert_eq!(snapshot.of(ResourceType::Listener).len(), 1);
    }
    // Off: the listener of one configuration, and the shards and their scopes kept.
    let dag = hosts(5);
    let (snapshot, _) = encoder.encode(&dag);
    assert_eq!(encoder.http_route_shards(), Some(1));
    holds(&snapshot, &one(&dag), true, "off");
    holds(&snapshot, &three(&dag), false, "off, the shards kept");
    assert_eq!(snapshot.of(ResourceType::Listener).len(), 1);
    assert_eq!(snapshot.of(ResourceType::ScopedRoute).len(), 3);
}

#[test]
fn the_previous_route_configurations_go_with_the_first_change_after_their_time() {
    let options = auto(Duration::from_millis(20));
    let mut encoder = Encoder::new(options.clone());
    encoder.encode(&hosts(9));
    let (on, _) = encoder.encode(&hosts(10));
    assert!(on.of(ResourceType::Route).get(HTTP_ROUTE_CONFIG).is_some());
    std::thread::sleep(Duration::from_millis(40));
    let dag = hosts(11);
    let (later, _) = encoder.encode(&dag);
    assert_eq!(
        later,
        Snapshot::from_resources(&build_with_shards(&dag, &options, 3))
    );
    // And off again: the shards' scopes go too once their time is over.
    encoder.encode(&hosts(5));
    std::thread::sleep(Duration::from_millis(40));
    let dag = hosts(4);
    let (off, _) = encoder.encode(&dag);
    assert_eq!(off, Snapshot::from_resources(&build(&dag, &options)));
    assert!(off.of(ResourceType::ScopedRoute).is_empty());
}

#[test]
fn a_host_removed_by_the_change_that_switches_shards_on_leaves_the_kept_configuration() {
    let options = auto(Duration::from_secs(3600));
    let mut encoder = Encoder::new(options.clone());
    encoder.encode(&hosts(9));
    // 10 hosts, h3 gone and h9, h10 new: the sharded layouts are new (every host put in them
    // once), and `ingress_http`, kept beside them, loses h3.
    let dag = hosts_numbered((1..=10).filter(|&i| i != 3));
    let (snapshot, _) = encoder.encode(&dag);
    assert_eq!(encoder.http_route_shards(), Some(3));
    holds(&snapshot, &build_with_shards(&dag, &options, 3), true, "on");
    let one = build_with_shards(&dag, &options, 1);
    keeps_ingress_http(&snapshot, &one, "without h3");
}
