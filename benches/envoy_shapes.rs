//! What Envoy's time to take in an update of the HTTP route configuration grows with: the same
//! hosts and routes laid out in other shapes, each served to a real Envoy (a study: it records no
//! keys; docs/benchmarks.md, "Envoy's update by the configuration's shape").
//!
//! For each shape, sluice's ADS server (the production `xds::serve` over loopback gRPC) serves the
//! synthetic cluster's resources (`crates/core/src/synth.rs`, 10k routing objects: 5,601 plain-HTTP virtual
//! hosts, 9,201 routes) with `ingress_http` rewritten in that shape to a real Envoy started with
//! the bootstrap `sluice bootstrap` writes. Once Envoy has taken the first configuration in, one
//! host is added at a time and each update is timed by Envoy's own log: received → route table
//! built (decode, checks, the table), as the `envoy` benchmark splits it. The shapes:
//!
//! - `sluice`: `ingress_http` as sluice writes it, one virtual host per host;
//! - `first-route-only`: each virtual host keeps its first route (fewer routes, as many hosts);
//! - `half-the-hosts`: the first half of the virtual hosts (half of both);
//! - `direct-responses`: every route answers 503 itself instead of naming a cluster;
//! - `one-virtual-host`: every route in one virtual host for `*`, its host an exact `:authority`
//!   condition (as many routes, one virtual host);
//! - `matcher-tree`: one virtual host whose generic matcher finds each host's first route in a
//!   map keyed by `:authority` (a route per host, no virtual hosts to search).
//!
//! Requests are never sent: only Envoy's handling of the configuration is timed, and no address
//! but 127.0.0.1 (the ADS server) is used. `cargo bench --bench envoy_shapes` runs 10k objects,
//! twelve updates per shape; any other way (`cargo test --all-targets`) a smoke run with 200
//! objects and two updates per shape, which checks that Envoy accepts every shape.

mod common;
#[path = "../tests/envoy_support/mod.rs"]
mod envoy_support;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, HeaderMatcher, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost, header_matcher::HeaderMatchSpecifier, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{
    HttpRequestHeaderMatchInput, StringMatcher, string_matcher::MatchPattern,
};
use envoy_types::pb::google::protobuf::Any;
use envoy_types::pb::xds::core::v3::TypedExtensionConfig;
use envoy_types::pb::xds::r#type::matcher::v3::{
    Matcher,
    matcher::{
        MatcherTree, MatcherType, OnMatch, matcher_tree::MatchMap, matcher_tree::TreeType, on_match,
    },
};
use prost::Message;
use tokio::sync::watch;

use common::envoy::{Envoy, updates};
use sluice::translate::HTTP_ROUTE_CONFIG;
use sluice::{dag, translate, xds};

const SHAPES: [&str; 6] = [
    "sluice",
    "first-route-only",
    "half-the-hosts",
    "direct-responses",
    "one-virtual-host",
    "matcher-tree",
];

fn authority_is(host: &str) -> HeaderMatcher {
    HeaderMatcher {
        name: ":authority".into(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(host.into())),
            ignore_case: false,
        })),
        ..Default::default()
    }
}

/// A `prefix /` route to `cluster`, as a new host gets.
fn route_to(cluster: &str) -> Route {
    Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix("/".into())),
            ..Default::default()
        }),
        action: Some(Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster.into())),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// The matcher tree's action for a host: its route, as a typed extension.
fn on_match(route: &Route) -> OnMatch {
    OnMatch {
        on_match: Some(on_match::OnMatch::Action(TypedExtensionConfig {
            name: "route".into(),
            typed_config: Some(Any {
                type_url: "type.googleapis.com/envoy.config.route.v3.Route".into(),
                value: route.encode_to_vec(),
            }),
        })),
        keep_matching: false,
    }
}

/// The single virtual host for `*` of the last two shapes.
fn catch_all(routes: Vec<Route>, matcher: Option<Matcher>) -> VirtualHost {
    VirtualHost {
        name: "all".into(),
        domains: vec!["*".into()],
        routes,
        matcher,
        ..Default::default()
    }
}

/// `ingress_http` in `shape`.
fn reshape(rc: &RouteConfiguration, shape: &str) -> RouteConfiguration {
    let mut out = rc.clone();
    match shape {
        "sluice" => {}
        "first-route-only" => out
            .virtual_hosts
            .iter_mut()
            .for_each(|v| v.routes.truncate(1)),
        "half-the-hosts" => out.virtual_hosts.truncate(rc.virtual_hosts.len() / 2),
        "direct-responses" => {
            for r in out.virtual_hosts.iter_mut().flat_map(|v| &mut v.routes) {
                r.action = Some(Action::DirectResponse(DirectResponseAction {
                    status: 503,
                    ..Default::default()
                }));
            }
        }
        "one-virtual-host" => {
            let mut routes = Vec::new();
            for v in &rc.virtual_hosts {
                for r in &v.routes {
                    let mut r = r.clone();
                    let m = r.r#match.get_or_insert_with(Default::default);
                    m.headers.insert(0, authority_is(&v.domains[0]));
                    routes.push(r);
                }
            }
            out.virtual_hosts = vec![catch_all(routes, None)];
        }
        "matcher-tree" => {
            // Every exact domain of every virtual host, to that host's first route.
            let map: HashMap<String, OnMatch> = (rc.virtual_hosts.iter())
                .filter_map(|v| Some((v, v.routes.first()?)))
                .flat_map(|(v, r)| v.domains.iter().map(move |d| (d, r)))
                .filter(|(d, _)| !d.contains('*'))
                .map(|(d, r)| (d.clone(), on_match(r)))
                .collect();
            let input = TypedExtensionConfig {
                name: "authority".into(),
                typed_config: Some(Any {
                    type_url:
                        "type.googleapis.com/envoy.type.matcher.v3.HttpRequestHeaderMatchInput"
                            .into(),
                    value: HttpRequestHeaderMatchInput {
                        header_name: ":authority".into(),
                    }
                    .encode_to_vec(),
                }),
            };
            let matcher = Matcher {
                matcher_type: Some(MatcherType::MatcherTree(MatcherTree {
                    input: Some(input),
                    tree_type: Some(TreeType::ExactMatchMap(MatchMap { map })),
                })),
                on_no_match: None,
            };
            out.virtual_hosts = vec![catch_all(Vec::new(), Some(matcher))];
        }
        other => panic!("no shape {other}"),
    }
    out
}

/// Adds host `new-<k>.shape.example.com`, routing `/` to `cluster`, to `rc` in `shape`.
fn add_host(rc: &mut RouteConfiguration, shape: &str, k: usize, cluster: &str) {
    let host = format!("new-{k}.shape.example.com");
    let route = route_to(cluster);
    match shape {
        "one-virtual-host" => {
            let mut route = route;
            let m = route.r#match.get_or_insert_with(Default::default);
            m.headers.push(authority_is(&host));
            rc.virtual_hosts[0].routes.push(route);
        }
        "matcher-tree" => {
            let tree =
                rc.virtual_hosts[0]
                    .matcher
                    .as_mut()
                    .and_then(|m| match &mut m.matcher_type {
                        Some(MatcherType::MatcherTree(t)) => t.tree_type.as_mut(),
                        _ => None,
                    });
            let Some(TreeType::ExactMatchMap(map)) = tree else {
                panic!("the matcher-tree shape holds an exact match map");
            };
            map.map.insert(host, on_match(&route));
        }
        _ => rc.virtual_hosts.push(VirtualHost {
            name: host.clone(),
            domains: vec![host],
            routes: vec![route],
            ..Default::default()
        }),
    }
}

/// Envoy's route table steps, ms, for `steps` updates of `ingress_http` in `shape`.
fn run_shape(
    rt: &tokio::runtime::Runtime,
    resources: &translate::Resources,
    shape: &str,
    steps: usize,
) -> Vec<f64> {
    let mut res = resources.clone();
    let at = (res.routes.iter())
        .position(|r| r.name == HTTP_ROUTE_CONFIG)
        .expect("the HTTP route configuration");
    let mut http = reshape(&res.routes[at], shape);
    let cluster = res.clusters[0].name.clone();
    res.routes[at] = http.clone();
    println!(
        "{shape:<18} {:>5} virtual hosts, {:>5} routes, {:>7} bytes",
        http.virtual_hosts.len(),
        http.virtual_hosts
            .iter()
            .map(|v| v.routes.len())
            .sum::<usize>(),
        http.encoded_len()
    );
    let (tx, rx) = watch::channel(Arc::new(xds::Snapshot::from_resources(&res)));
    let (xds_port, stop) = common::serve_snapshots(rt, rx);
    let envoy = Envoy::start(
        &envoy_support::envoy_bin(),
        xds_port,
        envoy_support::free_port(),
    );
    // Bounded waits: for Envoy to take the first configuration in, then each update.
    let wait_for = |n: usize, limit: Duration| {
        let t = Instant::now();
        while updates(&envoy.log()).len() < n {
            assert!(
                t.elapsed() < limit,
                "{shape}: Envoy took {} of {n} updates in within {limit:?}; its log:\n{}",
                updates(&envoy.log()).len(),
                envoy.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    wait_for(1, Duration::from_secs(120));
    for k in 0..steps {
        add_host(&mut http, shape, k, &cluster);
        res.routes[at] = http.clone();
        tx.send_replace(Arc::new(xds::Snapshot::from_resources(&res)));
        wait_for(k + 2, Duration::from_secs(30));
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(stop);
    let log = envoy.log();
    let done = updates(&log);
    assert!(
        !log.contains("rejected") && done.len() == steps + 1,
        "{shape}: Envoy took {} of {} updates in; its log:\n{log}",
        done.len(),
        steps + 1
    );
    done[1..]
        .iter()
        .map(|u| (u.built - u.received) * 1e3)
        .collect()
}

fn main() {
    let smoke = common::smoke();
    let (objects, steps) = if smoke { (200, 2) } else { (10_000, 12) };
    let rt = common::runtime(2);
    let model = dag::build(&common::cluster(objects), &dag::Options::default());
    let resources = translate::build(
        &model,
        &translate::Options {
            listen_address: "127.0.0.1".into(),
            http_port: envoy_support::free_port(),
            https_port: envoy_support::free_port(),
            ..Default::default()
        },
    );
    println!(
        "{objects} routing objects; Envoy's received → route table built, p50 and min of {steps} \
         updates adding one host each:"
    );
    let mut base = None;
    for shape in SHAPES {
        let ms = run_shape(&rt, &resources, shape, steps);
        let p50 = common::quantile(&ms, 0.5);
        let base = *base.get_or_insert(p50);
        println!(
            "{:<18} p50 {p50:6.1} ms  min {:6.1} ms  p50 / sluice's shape {:.2}",
            "",
            common::quantile(&ms, 0.0),
            p50 / base
        );
    }
}
