use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::cluster::LbPolicy;
use envoy_types::pb::envoy::config::core::v3::{health_check, transport_socket};
use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
use envoy_types::pb::envoy::config::listener::v3::filter;
use envoy_types::pb::envoy::config::route::v3::{
    HeaderMatcher, Route as EnvoyRoute, RouteConfiguration, header_matcher::HeaderMatchSpecifier,
    route::Action, route_action::ClusterSpecifier, route_match::PathSpecifier,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, http_connection_manager::RouteSpecifier,
    http_connection_manager::StripPortMode,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    DownstreamTlsContext, UpstreamTlsContext,
};
use envoy_types::pb::envoy::r#type::matcher::v3::string_matcher::MatchPattern;
use prost::Message;

use super::*;
use sluice_core::api::{Kind, LbStrategy, ObjectRef, TlsVersion};
use sluice_core::dag::{
    Cluster as DagCluster, Endpoint, HeaderMatch, HeaderOp, HealthCheckPolicy, OutlierDetection,
    PathMatch, QueryMatch, QueryOp, RetryPolicy, Route, RouteAction, TlsSecret, UpstreamProtocol,
    VhostTls, VirtualHost, WeightedCluster,
};
use sluice_core::validate::common::Timeout;

pub(crate) fn mk_route(path: PathMatch, cluster: &str) -> Route {
    Route {
        path,
        headers: vec![],
        action: RouteAction::Forward(smallvec::smallvec![WeightedCluster {
            cluster: cluster.into(),
            weight: 1,
        }]),
        permit_insecure: false,
        timeout: None,
        retry: None,
        extras: None,
        source: ObjectRef::new(Kind::Ingress, "default", "ing"),
    }
}

/// Forward to these (cluster, weight) pairs.
fn forward(clusters: &[(&str, u32)]) -> RouteAction {
    RouteAction::Forward(
        clusters
            .iter()
            .map(|&(cluster, weight)| WeightedCluster {
                cluster: cluster.into(),
                weight,
            })
            .collect(),
    )
}

pub(crate) fn mk_cluster(name: &str, port: u16) -> DagCluster {
    DagCluster {
        name: name.into(),
        service: Default::default(),
        port: 80,
        protocol: UpstreamProtocol::Http,
        lb: LbStrategy::RoundRobin,
        health_check: None,
        outlier_detection: None,
        upstream_tls: None,
        endpoints: vec![Endpoint {
            address: "127.0.0.1".parse().unwrap(),
            port,
        }]
        .into(),
    }
}

pub(crate) fn mk_vhost(host: &str, routes: Vec<Route>) -> VirtualHost {
    VirtualHost {
        host: host.to_string(),
        tls: None,
        routes,
        tcp_proxy: None,
        tls_passthrough: None,
        owner: None,
        isolated: false,
    }
}

pub(crate) fn mk_dag(vhosts: Vec<VirtualHost>, clusters: Vec<DagCluster>) -> Dag {
    let mut dag = Dag::default();
    for v in vhosts {
        dag.vhosts.insert(v.host.clone(), v.into());
    }
    for c in clusters {
        dag.clusters.insert(c.name.clone(), c.into());
    }
    dag
}

fn http_rc(r: &Resources) -> &RouteConfiguration {
    r.routes
        .iter()
        .find(|rc| rc.name == HTTP_ROUTE_CONFIG)
        .expect("http route config")
}

fn vhost_routes<'a>(rc: &'a RouteConfiguration, host: &str) -> &'a [EnvoyRoute] {
    &rc.virtual_hosts
        .iter()
        .find(|v| v.name == host)
        .unwrap_or_else(|| panic!("no vhost {host}"))
        .routes
}

fn path_of(r: &EnvoyRoute) -> PathSpecifier {
    r.r#match.as_ref().unwrap().path_specifier.clone().unwrap()
}

fn headers_of(r: &EnvoyRoute) -> &[HeaderMatcher] {
    &r.r#match.as_ref().unwrap().headers
}

fn regex_of(h: &HeaderMatcher) -> &str {
    match &h.header_match_specifier {
        Some(HeaderMatchSpecifier::StringMatch(s)) => match &s.match_pattern {
            Some(MatchPattern::SafeRegex(r)) => &r.regex,
            other => panic!("not a regex: {other:?}"),
        },
        other => panic!("not a string match: {other:?}"),
    }
}

fn cluster_of(r: &EnvoyRoute) -> String {
    match &r.action {
        Some(Action::Route(a)) => match &a.cluster_specifier {
            Some(ClusterSpecifier::Cluster(c)) => c.clone(),
            other => panic!("not a single cluster: {other:?}"),
        },
        other => panic!("not a route action: {other:?}"),
    }
}

fn hcm_of(f: &envoy_types::pb::envoy::config::listener::v3::Filter) -> HttpConnectionManager {
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(a)) => {
            HttpConnectionManager::decode(a.value.as_slice()).unwrap()
        }
        other => panic!("no typed config: {other:?}"),
    }
}

fn mk_tls_dag() -> Dag {
    let mut secure = mk_vhost(
        "secure.example.com",
        vec![
            Route {
                permit_insecure: true,
                ..mk_route(PathMatch::prefix("/.well-known"), "app")
            },
            mk_route(PathMatch::prefix("/"), "app"),
        ],
    );
    secure.tls = Some(VhostTls {
        secret: "default/cert".to_string(),
        min_version: TlsVersion::V1_2,
    });
    let mut dag = mk_dag(
        vec![
            secure,
            mk_vhost(
                "plain.example.com",
                vec![mk_route(PathMatch::prefix("/"), "app")],
            ),
        ],
        vec![mk_cluster("app", 9000)],
    );
    dag.secrets.insert(
        "default/cert".to_string(),
        TlsSecret {
            name: "default/cert".to_string(),
            kind: Default::default(),
            cert_pem: "CERT".into(),
            key_pem: "KEY".into(),
        },
    );
    dag
}

#[test]
fn same_dag_gives_byte_identical_resources() {
    let dag = mk_tls_dag();
    let a = build(&dag, &Options::default()).encode();
    let b = build(&dag.clone(), &Options::default()).encode();
    assert_eq!(a, b);
    let names: Vec<(ResourceType, Vec<&String>)> =
        a.iter().map(|(t, m)| (*t, m.keys().collect())).collect();
    assert_eq!(
        format!("{names:?}"),
        r#"[(Cluster, ["app"]), (Endpoint, ["app"]), (Secret, ["default/cert"]), (Listener, ["ingress_http", "ingress_https"]), (ScopedRoute, []), (Route, ["https/secure.example.com", "ingress_http"])]"#
    );
}

#[test]
fn hcm_strips_ports_and_normalizes_paths() {
    let res = build(&mk_dag(vec![], vec![]), &Options::default());
    assert_eq!(res.listeners.len(), 1, "no TLS host, no HTTPS listener");
    let l = &res.listeners[0];
    assert_eq!(l.name, HTTP_LISTENER);
    let hcm = hcm_of(&l.filter_chains[0].filters[0]);
    assert_eq!(
        hcm.strip_port_mode,
        Some(StripPortMode::StripAnyHostPort(true))
    );
    assert_eq!(hcm.normalize_path.map(|b| b.value), Some(true));
    assert!(hcm.merge_slashes);
    match hcm.route_specifier {
        Some(RouteSpecifier::Rds(rds)) => assert_eq!(rds.route_config_name, HTTP_ROUTE_CONFIG),
        other => panic!("not RDS: {other:?}"),
    }
}

#[test]
fn hcms_allow_websockets_and_take_the_client_address_settings() {
    let plain = build(&mk_tls_dag(), &Options::default());
    let behind = build(
        &mk_tls_dag(),
        &Options {
            proxy_protocol: true,
            num_trusted_hops: 2,
            ..Default::default()
        },
    );
    for l in &plain.listeners {
        assert!(
            l.listener_filters
                .iter()
                .all(|f| f.name != "envoy.filters.listener.proxy_protocol")
        );
        let hcm = hcm_of(&l.filter_chains[0].filters[0]);
        assert_eq!(hcm.xff_num_trusted_hops, 0);
        let upgrades: Vec<_> = hcm
            .upgrade_configs
            .iter()
            .map(|u| &u.upgrade_type)
            .collect();
        assert_eq!(upgrades, ["websocket"], "{}", l.name);
        // Limits on clients (docs/xds.md).
        let secs = |d: Option<envoy_types::pb::google::protobuf::Duration>| d.map(|d| d.seconds);
        assert_eq!(secs(hcm.request_headers_timeout), Some(10));
        let common = hcm.common_http_protocol_options.unwrap_or_default();
        assert_eq!(secs(common.idle_timeout), Some(60));
        let h2 = hcm.http2_protocol_options.clone().unwrap_or_default();
        assert_eq!(h2.max_concurrent_streams.map(|v| v.value), Some(100));
        assert_eq!(h2.initial_stream_window_size.map(|v| v.value), Some(65536));
        assert_eq!(
            h2.initial_connection_window_size.map(|v| v.value),
            Some(1 << 20)
        );
        let limit = l.per_connection_buffer_limit_bytes.map(|v| v.value);
        assert_eq!(limit, Some(32768), "{}", l.name);
    }
    for l in &behind.listeners {
        // The PROXY header comes before TLS: it is read first, then the TLS inspector.
        let names: Vec<_> = l.listener_filters.iter().map(|f| f.name.as_str()).collect();
        let want: &[&str] = if l.name == HTTPS_LISTENER {
            &[
                "envoy.filters.listener.proxy_protocol",
                "envoy.filters.listener.tls_inspector",
            ]
        } else {
            &["envoy.filters.listener.proxy_protocol"]
        };
        assert_eq!(names, want, "{}", l.name);
        let hcm = hcm_of(&l.filter_chains[0].filters[0]);
        assert_eq!(hcm.xff_num_trusted_hops, 2);
        assert!(hcm.use_remote_address.is_some_and(|b| b.value));
    }
    assert_eq!(behind.listeners.len(), 2);
}

#[test]
fn wildcard_hosts_match_one_label_and_fall_back_to_star() {
    let dag = mk_dag(
        vec![
            mk_vhost("*.foo.com", vec![mk_route(PathMatch::prefix("/"), "wild")]),
            mk_vhost("*", vec![mk_route(PathMatch::prefix("/"), "default")]),
        ],
        vec![mk_cluster("wild", 9000), mk_cluster("default", 9001)],
    );
    let res = build(&dag, &Options::default());
    let routes = vhost_routes(http_rc(&res), "*.foo.com");
    assert_eq!(routes.len(), 2);
    let own = &headers_of(&routes[0])[0];
    assert_eq!(own.name, ":authority");
    assert!(!own.invert_match);
    let re = regex_of(own);
    assert_eq!(re, r"(?i)[^.:]+\.foo\.com(:[0-9]+)?");
    let full = regex::Regex::new(&format!("^(?:{re})$")).unwrap();
    assert!(full.is_match("bar.foo.com"));
    assert!(full.is_match("BAR.Foo.COM:8080"));
    assert!(!full.is_match("a.b.foo.com"));
    assert!(!full.is_match("foo.com"));
    assert_eq!(cluster_of(&routes[0]), "wild");
    let fallback = &headers_of(&routes[1])[0];
    assert_eq!(regex_of(fallback), re);
    assert!(
        fallback.invert_match,
        "star routes only for multi-label hosts"
    );
    assert_eq!(cluster_of(&routes[1]), "default");
    // The star host itself has no authority condition.
    assert!(headers_of(&vhost_routes(http_rc(&res), "*")[0]).is_empty());

    // A wildcard host a Gateway listener's hostname takes (listener isolation): no star routes.
    let mut isolated = dag.clone();
    let mut wild = (*isolated.vhosts["*.foo.com"]).clone();
    wild.isolated = true;
    isolated
        .vhosts
        .insert("*.foo.com".to_string(), std::sync::Arc::new(wild));
    let res = build(&isolated, &Options::default());
    let routes = vhost_routes(http_rc(&res), "*.foo.com");
    assert_eq!(routes.len(), 1);
    assert_eq!(cluster_of(&routes[0]), "wild");
}

#[test]
fn tls_hosts_get_sni_filter_chains_and_http_redirects() {
    let res = build(&mk_tls_dag(), &Options::default());
    let https = res
        .listeners
        .iter()
        .find(|l| l.name == HTTPS_LISTENER)
        .unwrap();
    assert_eq!(
        https.listener_filters[0].name,
        "envoy.filters.listener.tls_inspector"
    );
    assert_eq!(https.filter_chains.len(), 1);
    let chain = &https.filter_chains[0];
    assert_eq!(
        chain.filter_chain_match.as_ref().unwrap().server_names,
        vec!["secure.example.com"]
    );
    match hcm_of(&chain.filters[0]).route_specifier {
        Some(RouteSpecifier::Rds(rds)) => {
            assert_eq!(rds.route_config_name, "https/secure.example.com")
        }
        other => panic!("{other:?}"),
    }
    let Some(transport_socket::ConfigType::TypedConfig(a)) =
        &chain.transport_socket.as_ref().unwrap().config_type
    else {
        panic!()
    };
    let tls = DownstreamTlsContext::decode(a.value.as_slice()).unwrap();
    let common = tls.common_tls_context.unwrap();
    assert_eq!(common.alpn_protocols, vec!["h2", "http/1.1"]);
    assert_eq!(
        common.tls_certificate_sds_secret_configs[0].name,
        "default/cert"
    );
    let params = common.tls_params.unwrap();
    assert_eq!(params.tls_minimum_protocol_version, 3, "TLSv1_2");

    // HTTP: the TLS host redirects except its permitInsecure route; the plain host forwards.
    let http = http_rc(&res);
    let secure = vhost_routes(http, "secure.example.com");
    let kinds: Vec<String> = secure
        .iter()
        .map(|r| match &r.action {
            Some(Action::Redirect(rd)) => format!(
                "redirect {} {:?}",
                rd.response_code, rd.scheme_rewrite_specifier
            ),
            Some(Action::Route(_)) => format!("forward {}", cluster_of(r)),
            other => format!("{other:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        vec![
            "forward app".to_string(),
            "redirect 0 Some(HttpsRedirect(true))".to_string()
        ]
    );
    assert_eq!(
        cluster_of(&vhost_routes(http, "plain.example.com")[0]),
        "app"
    );
    // The HTTPS route config forwards everything.
    let rc = res
        .routes
        .iter()
        .find(|r| r.name == "https/secure.example.com")
        .unwrap();
    let fwd: Vec<String> = rc.virtual_hosts[0].routes.iter().map(cluster_of).collect();
    assert_eq!(fwd, vec!["app", "app"]);
}

#[test]
fn tls_hosts_that_redirect_everything_share_one_virtual_host() {
    let tls = |mut v: VirtualHost| {
        v.tls = Some(VhostTls {
            secret: "default/cert".to_string(),
            min_version: TlsVersion::V1_2,
        });
        v
    };
    let root = || mk_route(PathMatch::prefix("/"), "app");
    let api = || mk_route(PathMatch::prefix("/api"), "app");
    let header = HeaderMatch {
        name: "x-canary".into(),
        op: HeaderOp::Present,
    };
    let dag = mk_dag(
        vec![
            // Shared: `/` among its routes, none served insecurely.
            tls(mk_vhost("b.example.com", vec![api(), root()])),
            tls(mk_vhost("a.example.com", vec![root()])),
            tls(mk_vhost(
                "ingress.example.com",
                vec![mk_route(PathMatch::StringPrefix("/".into()), "app")],
            )),
            // Their own: no route takes every request, or one is served over HTTP.
            tls(mk_vhost("api-only.example.com", vec![api()])),
            tls(mk_vhost(
                "canary.example.com",
                vec![Route {
                    headers: vec![header],
                    ..root()
                }],
            )),
            tls(mk_vhost(
                "acme.example.com",
                vec![
                    Route {
                        permit_insecure: true,
                        ..api()
                    },
                    root(),
                ],
            )),
            // Its own: a wildcard host carries the catch-all host's routes as well.
            tls(mk_vhost("*.example.com", vec![root()])),
            mk_vhost("plain.example.com", vec![root()]),
            // HTTPS only (TCP proxy): not in the HTTP route configuration at all.
            VirtualHost {
                tcp_proxy: Some(smallvec::smallvec![WeightedCluster {
                    cluster: "app".into(),
                    weight: 1,
                }]),
                ..tls(mk_vhost("tcp.example.com", vec![]))
            },
        ],
        vec![mk_cluster("app", 9000)],
    );
    let res = build(&dag, &Options::default());
    let http = http_rc(&res);
    let names: Vec<&str> = http.virtual_hosts.iter().map(|v| v.name.as_str()).collect();
    assert_eq!(
        names,
        vec![
            "*.example.com",
            "acme.example.com",
            "api-only.example.com",
            "canary.example.com",
            route::HTTPS_REDIRECT_VHOST,
            "plain.example.com",
        ],
        "virtual hosts in name order"
    );
    let shared = &http.virtual_hosts[4];
    assert_eq!(
        shared.domains,
        vec!["a.example.com", "b.example.com", "ingress.example.com"]
    );
    let [only] = shared.routes.as_slice() else {
        panic!("one route: {:?}", shared.routes)
    };
    assert_eq!(path_of(only), PathSpecifier::Prefix("/".into()));
    assert!(headers_of(only).is_empty());
    match &only.action {
        Some(Action::Redirect(rd)) => assert_eq!(
            rd.scheme_rewrite_specifier,
            Some(
                envoy_types::pb::envoy::config::route::v3::redirect_action::SchemeRewriteSpecifier::HttpsRedirect(true)
            )
        ),
        other => panic!("not a redirect: {other:?}"),
    }
    // Every domain is in exactly one virtual host.
    let mut domains: Vec<&String> = http.virtual_hosts.iter().flat_map(|v| &v.domains).collect();
    let count = domains.len();
    domains.sort();
    domains.dedup();
    assert_eq!(domains.len(), count);
    // Over HTTPS each shared host still has its own routes.
    let b = res
        .routes
        .iter()
        .find(|r| r.name == "https/b.example.com")
        .unwrap();
    assert_eq!(b.virtual_hosts[0].routes.len(), 2);
}

#[test]
fn clusters_carry_lb_health_checks_outlier_detection_and_protocols() {
    let mut c = mk_cluster("svc", 9000);
    c.lb = LbStrategy::WeightedLeastRequest;
    c.protocol = UpstreamProtocol::H2;
    c.health_check = Some(Box::new(HealthCheckPolicy {
        path: "/healthz".into(),
        host: "hc".into(),
        interval: Duration::from_secs(5),
        timeout: Duration::from_secs(2),
        unhealthy_threshold: 3,
        healthy_threshold: 2,
    }));
    c.outlier_detection = Some(OutlierDetection { consecutive_5xx: 4 });
    let ec = build_cluster(&c);
    assert_eq!(ec.lb_policy, LbPolicy::LeastRequest as i32);
    let hc = &ec.health_checks[0];
    assert_eq!(hc.interval.map(|d| d.seconds), Some(5));
    assert_eq!(hc.timeout.map(|d| d.seconds), Some(2));
    assert_eq!(hc.unhealthy_threshold.map(|v| v.value), Some(3));
    assert_eq!(hc.healthy_threshold.map(|v| v.value), Some(2));
    match &hc.health_checker {
        Some(health_check::HealthChecker::HttpHealthCheck(h)) => {
            assert_eq!((h.path.as_str(), h.host.as_str()), ("/healthz", "hc"));
            assert_eq!(h.codec_client_type, 1, "HTTP2 probes for h2 upstreams");
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        ec.outlier_detection
            .unwrap()
            .consecutive_5xx
            .map(|v| v.value),
        Some(4)
    );
    let Some(transport_socket::ConfigType::TypedConfig(a)) =
        &ec.transport_socket.as_ref().unwrap().config_type
    else {
        panic!()
    };
    let tls = UpstreamTlsContext::decode(a.value.as_slice()).unwrap();
    assert_eq!(tls.common_tls_context.unwrap().alpn_protocols, vec!["h2"]);
    assert_eq!(
        ec.typed_extension_protocol_options
            .keys()
            .collect::<Vec<_>>(),
        vec!["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
    );

    let plain = build_cluster(&mk_cluster("p", 1));
    assert_eq!(plain.lb_policy, LbPolicy::RoundRobin as i32);
    assert!(plain.transport_socket.is_none());
    assert!(plain.typed_extension_protocol_options.is_empty());
    assert!(plain.health_checks.is_empty());
    let mut random = mk_cluster("r", 1);
    random.lb = LbStrategy::Random;
    random.protocol = UpstreamProtocol::H2c;
    let r = build_cluster(&random);
    assert_eq!(r.lb_policy, LbPolicy::Random as i32);
    assert!(r.transport_socket.is_none());
    assert_eq!(r.typed_extension_protocol_options.len(), 1);

    let cla = build_load_assignment(&c);
    assert_eq!(cla.cluster_name, "svc");
    assert_eq!(cla.endpoints[0].lb_endpoints.len(), 1);
    let mut empty = mk_cluster("e", 1);
    empty.endpoints = Default::default();
    assert!(build_load_assignment(&empty).endpoints.is_empty());
}

#[test]
fn load_assignment_bytes_are_prosts_encoding_of_the_load_assignment() {
    // Clusters of 3, 1, none, 2, then 3,000 endpoints (the locality's length takes three bytes)
    // through one encoder, IPv6 among them: what a longer cluster leaves behind must not reach
    // a shorter one's bytes, and the bytes are prost's own encoding of the message each time.
    let with = |name: &str, n: u16| {
        let mut c = mk_cluster(name, 8000);
        c.endpoints = (1..=n)
            .map(|i| Endpoint {
                address: if i % 5 == 0 {
                    format!("fd00::{i:x}").parse().unwrap()
                } else {
                    format!("10.{}.{}.{}", i / 256, i % 256, 100 + i % 100)
                        .parse()
                        .unwrap()
                },
                // Ports whose varint takes one, two and three bytes, 0 among them.
                port: [0, 80, 8000 + i, u16::MAX][usize::from(i % 4)],
            })
            .collect::<Vec<_>>()
            .into();
        c
    };
    let mut bytes = super::LoadAssignmentBytes::default();
    for c in [
        with("a-long-cluster-name", 3),
        with("b", 1),
        with("c", 0),
        with("d", 2),
        with(&"e".repeat(300), 3000),
        with("", 2),
        with("f", 1),
    ] {
        let want = build_load_assignment(&c);
        let got = bytes.encode(&c);
        assert_eq!(got, want.encode_to_vec(), "{}", c.name);
        assert_eq!(ClusterLoadAssignment::decode(&got[..]).unwrap(), want);
    }
}

#[test]
fn tcp_proxy_hosts_get_a_tcp_filter_chain() {
    let mut dag = mk_tls_dag();
    let mut tcp = mk_vhost("tcp.example.com", vec![]);
    tcp.tls = Some(VhostTls {
        secret: "default/cert".into(),
        min_version: TlsVersion::V1_1,
    });
    tcp.tcp_proxy = Some(smallvec::smallvec![WeightedCluster {
        cluster: "app".into(),
        weight: 1,
    }]);
    dag.vhosts.insert(tcp.host.clone(), tcp.into());
    let res = build(&dag, &Options::default());
    let https = res
        .listeners
        .iter()
        .find(|l| l.name == HTTPS_LISTENER)
        .unwrap();
    let names: Vec<&str> = https
        .filter_chains
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, vec!["secure.example.com", "tcp.example.com"]);
    assert_eq!(
        https.filter_chains[1].filters[0].name,
        "envoy.filters.network.tcp_proxy"
    );
    assert!(
        !res.routes.iter().any(|r| r.name == "https/tcp.example.com"),
        "no route config for a TCP host"
    );
    assert!(
        !http_rc(&res)
            .virtual_hosts
            .iter()
            .any(|v| v.name == "tcp.example.com"),
        "TCP hosts are not on the HTTP listener"
    );
}

#[test]
fn static_bootstrap_inlines_routes_endpoints_and_secrets() {
    let res = build(&mk_tls_dag(), &Options::default());
    let b = static_config::build_static_bootstrap(&res).unwrap();
    let s = b.static_resources.unwrap();
    assert_eq!(
        s.clusters[0].load_assignment.as_ref().unwrap().cluster_name,
        "app"
    );
    assert!(s.clusters[0].eds_cluster_config.is_none());
    assert_eq!(s.secrets.len(), 1);
    for l in &s.listeners {
        for chain in &l.filter_chains {
            match hcm_of(&chain.filters[0]).route_specifier {
                Some(RouteSpecifier::RouteConfig(rc)) => assert!(!rc.virtual_hosts.is_empty()),
                other => panic!("not inline: {other:?}"),
            }
        }
    }
}

#[test]
fn type_urls_are_the_messages_type_urls() {
    use envoy_types::pb::envoy::config::cluster::v3::Cluster;
    use envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment;
    use envoy_types::pb::envoy::config::listener::v3::Listener;
    use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;
    use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::Secret;
    use prost::Name;
    assert_eq!(ResourceType::Cluster.type_url(), Cluster::type_url());
    assert_eq!(
        ResourceType::Endpoint.type_url(),
        ClusterLoadAssignment::type_url()
    );
    assert_eq!(ResourceType::Secret.type_url(), Secret::type_url());
    assert_eq!(ResourceType::Listener.type_url(), Listener::type_url());
    assert_eq!(
        ResourceType::Route.type_url(),
        RouteConfiguration::type_url()
    );
    for t in ResourceType::ALL {
        assert_eq!(ResourceType::from_type_url(t.type_url()), Some(t));
    }
}

mod routes;
