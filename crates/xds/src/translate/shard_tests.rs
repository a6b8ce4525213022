//! Route shards: the hash that picks a request's shard, and how the HTTP route configuration
//! and listener are cut by it.

use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
use envoy_types::pb::envoy::config::route::v3::scoped_route_configuration::key::fragment;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier, scoped_routes::ConfigSpecifier,
};
use prost::Message;

use super::route::{HTTPS_REDIRECT_VHOST, shard_lua, shards_of};
use super::*;
use sluice_core::store::Snapshot as Store;

#[test]
fn a_hosts_shard_is_the_hash_reduced_at_every_step_as_the_lua_does() {
    // The Lua's arithmetic, step by step, below 2^53 (no port in these hosts, no ':').
    let reference = |host: &[u8], shards: u16| {
        let mut x: u64 = 0;
        for &b in host {
            x = (x * 31 + u64::from(b.to_ascii_lowercase())) % 1_000_000_007;
        }
        (x % u64::from(shards)) as usize
    };
    let mut rng = sluice_core::test_rng::Rng::new(0x5eed_0005_4a7d);
    for len in (0..40).chain([63, 64, 65, 253, 1000]) {
        for _ in 0..20 {
            let host: String = (0..len)
                .map(|_| char::from(b"abcXYZ019-._"[rng.below(12)]))
                .collect();
            for shards in [2, 7, 16, MAX_HTTP_ROUTE_SHARDS] {
                assert_eq!(
                    shard_of(&host, shards),
                    reference(host.as_bytes(), shards),
                    "{host}"
                );
            }
        }
    }
    let high = "\u{ff}".repeat(300);
    assert_eq!(shard_of(&high, 251), reference(high.as_bytes(), 251));
}

#[test]
fn a_hosts_shard_ignores_case_and_port() {
    for shards in [2, 16, MAX_HTTP_ROUTE_SHARDS] {
        let k = shard_of("app.example.com", shards);
        assert!(k < usize::from(shards));
        assert_eq!(shard_of("APP.Example.COM", shards), k);
        assert_eq!(shard_of("app.example.com:8080", shards), k);
        assert_eq!(
            shard_of("[fd00::1]:80", shards),
            shard_of("[FD00::1]", shards)
        );
        assert_eq!(shard_of("app.example.com", 1), 0);
    }
    // The hash of the lower-case host modulo 1,000,000,007, then modulo the shards: the value
    // the listener's Lua computes ("ab": 97 * 31 + 98 = 3105).
    assert_eq!(shard_of("ab", 256), 3105 % 256);
    assert_eq!(shard_of("AB:1", 7), 3105 % 7);
}

#[test]
fn hosts_spread_over_the_shards() {
    let mut counts = [0usize; 16];
    for i in 0..1600 {
        counts[shard_of(&format!("host-{i}.example.com"), 16)] += 1;
    }
    // 100 each on average; a hash that left shards empty or doubled some would show here.
    assert!(
        counts.iter().all(|&c| (60..=140).contains(&c)),
        "{counts:?}"
    );
}

#[test]
fn wildcard_and_catch_all_hosts_are_in_every_shard() {
    assert_eq!(shards_of("*", 5), 0..5);
    assert_eq!(shards_of("*.example.com", 5), 0..5);
    let k = shard_of("a.example.com", 5);
    assert_eq!(shards_of("a.example.com", 5), k..k + 1);
    assert_eq!(shards_of("a.example.com", 1), 0..1);
}

#[test]
fn the_lua_filter_hashes_as_sluice_does() {
    let lua = shard_lua(12);
    assert!(lua.contains("% 1000000007"), "{lua}");
    assert!(lua.contains("tostring(x % 12)"), "{lua}");
    assert!(lua.contains(&format!("headers:replace(\"{ROUTE_SHARD_HEADER}\"")));
    assert!(lua.contains("handle:clearRouteCache()"));
}

pub(super) fn ingress(name: &str, host: Option<&str>) -> sluice_core::store::AnyObject {
    ingress_at(name, host, "/")
}

/// An Ingress `ns/<name>` of class sluice: `path` (a prefix) of `host` (None: every host) to the
/// Service `web`.
pub(super) fn ingress_at(
    name: &str,
    host: Option<&str>,
    path: &str,
) -> sluice_core::store::AnyObject {
    let mut rule = serde_json::json!({"http": {"paths": [{"path": path, "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}}}]}});
    if let Some(h) = host {
        rule["host"] = h.into();
    }
    let v = serde_json::json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"ingressClassName": "sluice", "rules": [rule]}});
    match sluice_core::manifest::decode_value(v) {
        Ok(sluice_core::manifest::Document::Object(o)) => o,
        other => panic!("{other:?}"),
    }
}

/// A synthetic cluster (TLS hosts among them, some redirecting everything to HTTPS) with a
/// wildcard host and the catch-all host.
fn model() -> Dag {
    let mut store = sluice_core::synth::snapshot(sluice_core::synth::Shape {
        routing_objects: 80,
        endpoints_per_service: 1,
        unrelated_secrets: 0,
    });
    store.insert(ingress("wild", Some("*.example.com")));
    store.insert(ingress("all", None));
    sluice_core::dag::build(&store, &sluice_core::dag::Options::default())
}

fn hcm(l: &envoy_types::pb::envoy::config::listener::v3::Listener) -> HttpConnectionManager {
    match &l.filter_chains[0].filters[0].config_type {
        Some(filter::ConfigType::TypedConfig(a)) => {
            HttpConnectionManager::decode(a.value.as_slice()).unwrap()
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn each_shard_holds_its_hosts_and_every_wildcard_host() {
    let dag = model();
    let shards = 4;
    let options = Options {
        route_shards: super::RouteShards::Fixed(shards),
        ..Default::default()
    };
    let res = build(&dag, &options);
    let whole = build(&dag, &Options::default());
    let whole = (whole.routes.iter())
        .find(|r| r.name == HTTP_ROUTE_CONFIG)
        .unwrap();
    let configs: Vec<_> = (0..usize::from(shards))
        .map(|k| {
            let name = http_route_config_name(k, shards);
            assert_eq!(name, format!("ingress_http/{k}"));
            (res.routes.iter()).find(|r| r.name == name).unwrap()
        })
        .collect();
    assert!(!res.routes.iter().any(|r| r.name == HTTP_ROUTE_CONFIG));
    let mut redirected = 0;
    for (k, rc) in configs.iter().enumerate() {
        assert_eq!(rc.request_headers_to_remove, [ROUTE_SHARD_HEADER]);
        for v in &rc.virtual_hosts {
            for domain in &v.domains {
                assert!(
                    shards_of(domain, shards).contains(&k),
                    "{domain} in shard {k}"
                );
            }
            if v.name == HTTPS_REDIRECT_VHOST {
                redirected += v.domains.len();
            } else {
                // The same virtual host as in the one configuration.
                assert!(whole.virtual_hosts.contains(v), "{}", v.name);
            }
        }
        for wild in ["*", "*.example.com"] {
            assert!(
                rc.virtual_hosts.iter().any(|v| v.name == wild),
                "{wild} in {k}"
            );
        }
    }
    // Every exact host is in its shard: the shards hold the one configuration's hosts, the
    // wildcard ones once per shard.
    let hosts = |rcs: &[&RouteConfiguration]| -> usize {
        (rcs.iter().flat_map(|rc| &rc.virtual_hosts))
            .map(|v| v.domains.len())
            .sum()
    };
    assert_eq!(
        hosts(&configs),
        hosts(&[whole]) + 2 * (usize::from(shards) - 1)
    );
    let whole_redirected = (whole.virtual_hosts.iter())
        .find(|v| v.name == HTTPS_REDIRECT_VHOST)
        .map_or(0, |v| v.domains.len());
    assert!(
        whole_redirected > 0,
        "the model has hosts that redirect everything"
    );
    assert_eq!(redirected, whole_redirected);
    assert!(
        configs.iter().all(|rc| rc.virtual_hosts.len() > 2),
        "every shard has hosts"
    );
}

#[test]
fn the_http_listener_picks_a_shard_by_the_header_its_lua_filter_sets() {
    let shards = 6;
    let options = Options {
        route_shards: super::RouteShards::Fixed(shards),
        ..Default::default()
    };
    let res = build(&Dag::default(), &options);
    let hcm = hcm(&res.listeners[0]);
    let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
    // The Lua that picks the shard, then what reads the route it picked.
    assert_eq!(
        names,
        [
            "envoy.filters.http.lua",
            "envoy.filters.http.cors",
            "envoy.filters.http.router"
        ]
    );
    let Some(RouteSpecifier::ScopedRoutes(scoped)) = hcm.route_specifier else {
        panic!("not scoped routes");
    };
    let builder = scoped.scope_key_builder.unwrap();
    assert_eq!(builder.fragments.len(), 1);
    assert!(matches!(
        scoped.config_specifier,
        Some(ConfigSpecifier::ScopedRds(_))
    ));
    // The scopes, over ADS; sorted by name as resources are.
    let scopes = &res.scoped_routes;
    assert_eq!(scopes.len(), usize::from(shards));
    let mut names: Vec<&str> = scopes.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    assert!(
        names
            .iter()
            .copied()
            .eq(scopes.iter().map(|s| s.name.as_str()))
    );
    let mut scopes = scopes.clone();
    scopes.sort_by_key(|s| s.name.rsplit('/').next().unwrap().parse::<usize>().unwrap());
    for (k, scope) in scopes.iter().enumerate() {
        assert_eq!(
            scope.route_configuration_name,
            http_route_config_name(k, shards)
        );
        let key = &scope.key.as_ref().unwrap().fragments;
        assert_eq!(key.len(), 1);
        assert_eq!(
            key[0].r#type,
            Some(fragment::Type::StringKey(k.to_string()))
        );
        // Each shard's configuration is in the resources.
        assert!(
            res.routes
                .iter()
                .any(|r| r.name == scope.route_configuration_name)
        );
    }
    // One shard: one configuration, no Lua in front of the router.
    let one = build(&Dag::default(), &Options::default());
    let hcm = super::shard_tests::hcm(&one.listeners[0]);
    let names: Vec<&str> = hcm.http_filters.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["envoy.filters.http.cors", "envoy.filters.http.router"]
    );
    assert!(matches!(hcm.route_specifier, Some(RouteSpecifier::Rds(_))));
    assert_eq!(one.routes.len(), 1);
    assert!(one.scoped_routes.is_empty());
    assert!(one.routes[0].request_headers_to_remove.is_empty());
}

/// The versions of the HTTP route configuration's shards.
fn shard_versions(snapshot: &crate::xds::cache::Snapshot, shards: u16) -> Vec<String> {
    (0..usize::from(shards))
        .map(|k| {
            let name = http_route_config_name(k, shards);
            let r = snapshot.of(ResourceType::Route).get(name.as_str()).unwrap();
            r.version.to_string()
        })
        .collect()
}

#[test]
fn a_change_of_one_host_changes_its_shard_only() {
    let shards = 4;
    let options = Options {
        route_shards: super::RouteShards::Fixed(shards),
        ..Default::default()
    };
    let hosts: Vec<String> = (0..12).map(|i| format!("h{i}.example.com")).collect();
    let mut store = Store::from_objects(
        (hosts.iter().enumerate()).map(|(i, h)| ingress(&format!("r{i}"), Some(h))),
    );
    store.insert(ingress("wild", Some("*.example.com")));
    let mut encoder = incremental::Encoder::new(options.clone());
    let dag = std::sync::Arc::new(sluice_core::dag::build(&store, &Default::default()));
    let before = shard_versions(&encoder.encode(&dag).0, shards);
    // One exact host's route: its shard's configuration changes, no other.
    store.insert(ingress_at("r5", Some(&hosts[5]), "/v2"));
    let dag = std::sync::Arc::new(sluice_core::dag::build(&store, &Default::default()));
    let (snapshot, _) = encoder.encode(&dag);
    let after = shard_versions(&snapshot, shards);
    let changed: Vec<usize> = (0..before.len())
        .filter(|&k| before[k] != after[k])
        .collect();
    assert_eq!(changed, [shard_of(&hosts[5], shards)]);
    assert_eq!(
        snapshot,
        crate::xds::cache::Snapshot::from_resources(&build(&dag, &options))
    );
    // A wildcard host's: every shard's.
    store.insert(ingress_at("wild", Some("*.example.com"), "/v2"));
    let dag = std::sync::Arc::new(sluice_core::dag::build(&store, &Default::default()));
    let last = shard_versions(&encoder.encode(&dag).0, shards);
    assert!(
        (0..last.len()).all(|k| last[k] != after[k]),
        "{after:?} {last:?}"
    );
}
