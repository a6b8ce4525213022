//! Property tests of the hand-written encoders: over generated inputs (deterministic
//! pseudo-random, so a failure reproduces from its seed), each writes exactly the bytes prost
//! writes for the envoy-types message of the same content. Lengths are drawn around the varint
//! boundaries (127/128 bytes), empty values included, since those are where a hand-written
//! encoder goes wrong.

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster as EnvoyCluster, cluster::ClusterDiscoveryType, cluster::DiscoveryType,
    cluster::LbPolicy,
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, ApiVersion, ConfigSource, SocketAddress, address, socket_address::PortSpecifier,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint, LbEndpoint, LocalityLbEndpoints, lb_endpoint::HostIdentifier,
};
use envoy_types::pb::envoy::config::route::v3::{
    DirectResponseAction, RedirectAction, Route, RouteAction, RouteConfiguration, RouteMatch,
    VirtualHost, redirect_action::SchemeRewriteSpecifier, route::Action,
    route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, Rds, http_connection_manager::RouteSpecifier,
};
use envoy_types::pb::google::protobuf::BoolValue;
use prost::Message;
use sluice_core::test_rng::Rng;

use super::wire_encode::*;

/// How many inputs each property is checked on.
const CASES: usize = 500;

/// A length: mostly short, often around a varint boundary, sometimes 0 or long.
fn length(rng: &mut Rng) -> usize {
    match rng.below(6) {
        0 => 0,
        1 => 126 + rng.below(4),
        2 => 200 + rng.below(200),
        _ => 1 + rng.below(40),
    }
}

/// Text of `length` printable ASCII characters (what names, hosts and paths hold).
fn text(rng: &mut Rng) -> String {
    let len = length(rng);
    (0..len)
        .map(|_| char::from(b' ' + rng.below(95) as u8))
        .collect()
}

/// A field number: one, two or more bytes of key.
fn tag(rng: &mut Rng) -> u32 {
    match rng.below(3) {
        0 => 1 + rng.below(15) as u32,
        1 => 16 + rng.below(2_032) as u32,
        _ => 2_048 + rng.below(1 << 20) as u32,
    }
}

#[test]
fn fields_are_prosts_whatever_the_tag_and_length() {
    let mut rng = Rng::new(1);
    for _ in 0..CASES {
        let (tag, value) = (tag(&mut rng), text(&mut rng));
        let mut want = Vec::new();
        if !value.is_empty() {
            prost::encoding::string::encode(tag, &value, &mut want);
        }
        let mut got = Vec::new();
        put_string(tag, &value, &mut got);
        assert_eq!(got, want, "string {tag} {value:?}");
        assert_eq!(string_len(tag, &value), want.len());
        got.clear();
        put_bytes(tag, value.as_bytes(), &mut got);
        assert_eq!(got, want, "bytes {tag} {value:?}");
        assert_eq!(bytes_len(tag, value.as_bytes()), want.len());
        // Written even when empty, as an entry of a list.
        let mut want = Vec::new();
        prost::encoding::bytes::encode(tag, &value.as_bytes().to_vec(), &mut want);
        got.clear();
        put_always(tag, value.as_bytes(), &mut got);
        assert_eq!(got, want, "always {tag} {value:?}");
        assert_eq!(field_len(tag, value.len()), want.len());
    }
}

/// A route action of any kind [`action_bytes`] may be given: a redirect, a direct response, a
/// cluster with a timeout.
fn action(rng: &mut Rng) -> Action {
    match rng.below(3) {
        0 => Action::Redirect(RedirectAction {
            scheme_rewrite_specifier: Some(SchemeRewriteSpecifier::HttpsRedirect(rng.chance(50))),
            host_redirect: text(rng),
            ..Default::default()
        }),
        1 => Action::DirectResponse(DirectResponseAction {
            status: rng.below(600) as u32,
            ..Default::default()
        }),
        _ => Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(text(rng))),
            timeout: Some(super::duration(std::time::Duration::from_millis(
                rng.below(100_000) as u64,
            ))),
            ..Default::default()
        }),
    }
}

/// A generated plain route: what [`put_plain_route`] writes of it, and the message it stands
/// for.
fn plain_route(rng: &mut Rng) -> (Vec<u8>, Route) {
    let path = text(rng);
    let (field, specifier) = match rng.below(3) {
        0 => (PathField::Prefix, PathSpecifier::Prefix(path.clone())),
        1 => (PathField::Path, PathSpecifier::Path(path.clone())),
        _ => (
            PathField::PathSeparatedPrefix,
            PathSpecifier::PathSeparatedPrefix(path.clone()),
        ),
    };
    let (got, action) = if rng.chance(50) {
        let cluster = text(rng);
        let mut got = Vec::new();
        put_plain_route(field, &path, PlainAction::Cluster(&cluster), &mut got);
        let action = Action::Route(RouteAction {
            cluster_specifier: Some(ClusterSpecifier::Cluster(cluster)),
            ..Default::default()
        });
        (got, action)
    } else {
        let action = action(rng);
        let fixed = action_bytes(action.clone());
        let mut got = Vec::new();
        put_plain_route(field, &path, PlainAction::Fixed(&fixed), &mut got);
        (got, action)
    };
    let route = Route {
        r#match: Some(RouteMatch {
            path_specifier: Some(specifier),
            ..Default::default()
        }),
        action: Some(action),
        ..Default::default()
    };
    (got, route)
}

#[test]
fn plain_routes_are_prosts_encoding_of_the_route() {
    let mut rng = Rng::new(2);
    for _ in 0..CASES {
        let (got, route) = plain_route(&mut rng);
        let mut want = Vec::new();
        prost::encoding::message::encode(VHOST_ROUTES, &route, &mut want);
        assert_eq!(got, want, "{route:?}");
    }
}

/// A generated route that is not plain: a name, header matchers' worth of fields, an action.
fn other_route(rng: &mut Rng) -> Route {
    Route {
        name: text(rng),
        r#match: Some(RouteMatch {
            path_specifier: Some(PathSpecifier::Prefix(text(rng))),
            case_sensitive: rng.chance(50).then_some(BoolValue { value: false }),
            ..Default::default()
        }),
        action: Some(action(rng)),
        request_headers_to_remove: (0..rng.below(3)).map(|_| text(rng)).collect(),
        ..Default::default()
    }
}

#[test]
fn virtual_hosts_and_route_configurations_are_prosts() {
    let mut rng = Rng::new(3);
    for _ in 0..CASES {
        let host = text(&mut rng);
        let n = rng.below(6);
        let mut got = vhost_head(&host, n);
        let mut routes = Vec::with_capacity(n);
        for _ in 0..n {
            if rng.chance(60) {
                let (bytes, route) = plain_route(&mut rng);
                got.extend_from_slice(&bytes);
                routes.push(route);
            } else {
                let route = other_route(&mut rng);
                put_route(&route, &mut got);
                routes.push(route);
            }
        }
        let vhost = VirtualHost {
            name: host.clone(),
            domains: vec![host],
            routes,
            ..Default::default()
        };
        assert_eq!(got, vhost.encode_to_vec(), "{vhost:?}");
        let name = text(&mut rng);
        let config = RouteConfiguration {
            name: name.clone(),
            virtual_hosts: vec![vhost],
            ..Default::default()
        };
        assert_eq!(route_config_of_one(&name, &got), config.encode_to_vec());
    }
}

#[test]
fn named_clusters_are_prosts_encoding_of_the_cluster() {
    let mut rng = Rng::new(4);
    let policies = [
        LbPolicy::RoundRobin,
        LbPolicy::LeastRequest,
        LbPolicy::Random,
    ];
    for _ in 0..CASES {
        let settings = EnvoyCluster {
            cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
            lb_policy: policies[rng.below(policies.len())] as i32,
            connect_timeout: Some(super::duration(std::time::Duration::from_millis(
                rng.below(10_000) as u64,
            ))),
            alt_stat_name: text(&mut rng),
            ..Default::default()
        };
        let name = text(&mut rng);
        let want = EnvoyCluster {
            name: name.clone(),
            ..settings.clone()
        };
        let got = named_cluster(&name, &settings.encode_to_vec());
        assert_eq!(got, want.encode_to_vec(), "{want:?}");
    }
}

/// The generated message of the endpoint `ip`:`port`.
fn lb_endpoint(ip: &str, port: u16) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(HostIdentifier::Endpoint(Endpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: ip.to_string(),
                    port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// An address text: IPv4 or IPv6 as sluice writes them, or any text (the general path).
fn ip_text(rng: &mut Rng) -> String {
    match rng.below(3) {
        0 => std::net::Ipv4Addr::from(rng.next() as u32).to_string(),
        1 => std::net::Ipv6Addr::from(u128::from(rng.next()) << rng.below(65)).to_string(),
        _ => text(rng),
    }
}

/// A port whose varint takes one, two or three bytes, 0 among them.
fn port(rng: &mut Rng) -> u16 {
    match rng.below(4) {
        0 => 0,
        1 => rng.below(128) as u16,
        2 => u16::MAX - rng.below(10) as u16,
        _ => rng.next() as u16,
    }
}

#[test]
fn load_assignments_are_prosts_encoding_of_the_load_assignment() {
    let mut rng = Rng::new(5);
    for _ in 0..CASES {
        let name = text(&mut rng);
        let endpoints: Vec<(String, u16)> = (0..rng.below(8))
            .map(|_| (ip_text(&mut rng), port(&mut rng)))
            .collect();
        let mut locality = Vec::new();
        for (ip, port) in &endpoints {
            put_lb_endpoint(ip.as_bytes(), *port, &mut locality);
        }
        let want = ClusterLoadAssignment {
            cluster_name: name.clone(),
            endpoints: if endpoints.is_empty() {
                Vec::new()
            } else {
                vec![LocalityLbEndpoints {
                    lb_endpoints: (endpoints.iter())
                        .map(|(ip, port)| lb_endpoint(ip, *port))
                        .collect(),
                    ..Default::default()
                }]
            },
            ..Default::default()
        };
        assert_eq!(
            load_assignment(&name, &locality),
            want.encode_to_vec(),
            "{want:?}"
        );
    }
}

#[test]
fn connection_managers_with_rds_are_prosts() {
    let mut rng = Rng::new(6);
    for _ in 0..CASES {
        let hcm = HttpConnectionManager {
            codec_type: rng.below(4) as i32,
            stat_prefix: text(&mut rng),
            use_remote_address: rng.chance(50).then_some(BoolValue { value: true }),
            server_name: text(&mut rng),
            ..Default::default()
        };
        let config_source = ConfigSource {
            resource_api_version: if rng.chance(50) {
                ApiVersion::V3 as i32
            } else {
                0
            },
            ..Default::default()
        };
        let route_config = text(&mut rng);
        // The fields before `rds` (codec type and stat prefix) and those after it, as
        // `listener::HttpsHcm` cuts a connection manager's encoding.
        let mut before = hcm.encode_to_vec();
        let head = HttpConnectionManager {
            codec_type: hcm.codec_type,
            stat_prefix: hcm.stat_prefix.clone(),
            ..Default::default()
        };
        let after = before.split_off(head.encoded_len());
        let want = HttpConnectionManager {
            route_specifier: Some(RouteSpecifier::Rds(Rds {
                config_source: Some(config_source.clone()),
                route_config_name: route_config.clone(),
            })),
            ..hcm
        };
        let rds_head = Rds {
            config_source: Some(config_source.clone()),
            route_config_name: String::new(),
        };
        let got = hcm_with_rds(&before, &rds_head.encode_to_vec(), &route_config, &after);
        assert_eq!(got, want.encode_to_vec(), "{want:?}");
    }
}

/// Generated routing models: the translation's encoders, which call this module, write what
/// prost writes for the messages the translation builds of the same model.
mod of_the_model {
    use std::time::Duration;

    use prost::Message;
    use sluice_core::api::{LbStrategy, TlsVersion};
    use sluice_core::dag::{
        Cluster, Endpoint, HeaderMatch, HeaderOp, HealthCheckPolicy, OutlierDetection, PathMatch,
        Route, RouteAction, UpstreamProtocol, VhostTls, VirtualHost, WeightedCluster,
    };
    use sluice_core::test_rng::Rng;
    use sluice_core::validate::common::Timeout;

    use super::{CASES, port, text};
    use crate::translate::tests::{mk_route, mk_vhost};
    use crate::translate::{
        ClusterBytes, LoadAssignmentBytes, build_cluster, build_load_assignment, route,
    };

    /// A path of any kind the model has, `//` in string prefixes among them.
    fn path(rng: &mut Rng) -> PathMatch {
        let p = format!("/{}", text(rng).replace(['\\', ' '], "/"));
        match rng.below(5) {
            0 => PathMatch::Exact(p.into()),
            1 => PathMatch::prefix(&p),
            2 => PathMatch::StringPrefix(p.into()),
            3 => PathMatch::StringPrefix(format!("/a//{p}").into()),
            _ => PathMatch::prefix("/"),
        }
    }

    /// A route: mostly of the kinds written directly, some that prost encodes.
    fn model_route(rng: &mut Rng) -> Route {
        let mut r = mk_route(path(rng), &text(rng));
        r.action = match rng.below(6) {
            0 => RouteAction::Unavailable(text(rng)),
            1 => RouteAction::Invalid(text(rng)),
            _ => RouteAction::Forward(
                (0..1 + rng.below(3))
                    .map(|_| WeightedCluster {
                        cluster: text(rng).into(),
                        weight: rng.below(3) as u32,
                    })
                    .collect(),
            ),
        };
        r.permit_insecure = rng.chance(30);
        if rng.chance(15) {
            r.timeout = Some(Timeout::After(Duration::from_millis(
                rng.below(9_000) as u64
            )));
        }
        if rng.chance(15) {
            r.headers = vec![HeaderMatch {
                name: "x-a".into(),
                op: HeaderOp::Exact(text(rng)),
            }];
        }
        if rng.chance(5) {
            r.path = PathMatch::Regex("/r/[0-9]+".into());
        }
        r
    }

    /// A host: a name, a wildcard or the catch-all, with TLS or without.
    fn model_vhost(rng: &mut Rng) -> VirtualHost {
        let host = match rng.below(4) {
            0 => format!("*.{}", text(rng)),
            1 => "*".to_string(),
            _ => text(rng),
        };
        let routes = (0..rng.below(6)).map(|_| model_route(rng)).collect();
        let mut v = mk_vhost(&host, routes);
        if rng.chance(40) {
            v.tls = Some(VhostTls {
                secret: "default/cert".into(),
                min_version: TlsVersion::V1_2,
            });
        }
        v.isolated = rng.chance(10);
        v
    }

    #[test]
    fn virtual_hosts_are_prosts_encoding_of_the_built_host() {
        let mut rng = Rng::new(7);
        for _ in 0..CASES {
            let v = model_vhost(&mut rng);
            let fallback = rng.chance(50).then(|| {
                let mut fb = model_vhost(&mut rng);
                fb.host = "*".into();
                fb
            });
            let want = route::build_http_vhost(&v, fallback.as_ref());
            let got = route::encode_http_vhost(&v, fallback.as_ref());
            assert_eq!(got, want.encode_to_vec(), "{v:?} {fallback:?}");
            let want = route::build_https_route_config(&v);
            let (name, got) = route::encode_https_route_config(&v);
            assert_eq!(name, want.name);
            assert_eq!(got, want.encode_to_vec(), "https {v:?}");
        }
    }

    /// A cluster of generated settings (a few values each, so that settings repeat and
    /// [`ClusterBytes`] both reuses and makes encodings) and endpoints.
    fn model_cluster(rng: &mut Rng) -> Cluster {
        let lbs = [
            LbStrategy::RoundRobin,
            LbStrategy::WeightedLeastRequest,
            LbStrategy::Random,
        ];
        let protocols = [
            UpstreamProtocol::Http,
            UpstreamProtocol::Https,
            UpstreamProtocol::H2c,
            UpstreamProtocol::H2,
            UpstreamProtocol::Tcp,
        ];
        let health_check = rng.chance(30).then(|| {
            Box::new(HealthCheckPolicy {
                path: format!("/{}", rng.below(3)),
                host: "probe.example".into(),
                interval: Duration::from_secs(5),
                timeout: Duration::from_millis(1500),
                unhealthy_threshold: 3,
                healthy_threshold: 2,
            })
        });
        let endpoints: Vec<Endpoint> = (0..rng.below(12))
            .map(|_| Endpoint {
                address: if rng.chance(80) {
                    std::net::Ipv4Addr::from(rng.next() as u32).into()
                } else {
                    std::net::Ipv6Addr::from(u128::from(rng.next()) << rng.below(65)).into()
                },
                port: port(rng),
            })
            .collect();
        Cluster {
            name: text(rng).into(),
            service: sluice_core::dag::ServiceSpan::new("web", "app"),
            port: 80,
            protocol: protocols[rng.below(protocols.len())],
            lb: lbs[rng.below(lbs.len())],
            health_check,
            outlier_detection: rng.chance(30).then(|| OutlierDetection {
                consecutive_5xx: rng.below(10) as u32,
            }),
            upstream_tls: None,
            endpoints: endpoints.into(),
        }
    }

    #[test]
    fn clusters_and_load_assignments_are_prosts_encoding_of_the_built_messages() {
        let mut rng = Rng::new(8);
        let (mut clusters, mut assignments) =
            (ClusterBytes::default(), LoadAssignmentBytes::default());
        for _ in 0..CASES {
            let c = model_cluster(&mut rng);
            assert_eq!(
                clusters.encode(&c),
                build_cluster(&c).encode_to_vec(),
                "{c:?}"
            );
            let want = build_load_assignment(&c).encode_to_vec();
            assert_eq!(assignments.encode(&c), want, "{c:?}");
        }
    }
}
