//! Listeners: plain HTTP on `http_port`; TLS on `https_port` with one filter chain per TLS host,
//! selected by SNI.

use envoy_types::pb::envoy::config::core::v3::{
    Address, Http2ProtocolOptions, HttpProtocolOptions, SocketAddress, TransportSocket, address,
    socket_address::PortSpecifier, transport_socket,
};
use envoy_types::pb::envoy::config::listener::v3::{
    Filter, FilterChain, FilterChainMatch, Listener, ListenerFilter, filter, listener_filter,
};
use envoy_types::pb::envoy::extensions::filters::http::cors::v3::Cors as CorsFilter;
use envoy_types::pb::envoy::extensions::filters::http::router::v3::Router;
use envoy_types::pb::envoy::extensions::filters::listener::proxy_protocol::v3::ProxyProtocol;
use envoy_types::pb::envoy::extensions::filters::listener::tls_inspector::v3::TlsInspector;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    HttpConnectionManager, HttpFilter, Rds,
    http_connection_manager::{
        CodecType, PathWithEscapedSlashesAction, RouteSpecifier, StripPortMode, UpgradeConfig,
    },
    http_filter,
};
use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::{
    TcpProxy, tcp_proxy::ClusterSpecifier as TcpClusterSpecifier, tcp_proxy::WeightedCluster,
    tcp_proxy::weighted_cluster::ClusterWeight,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CertificateValidationContext, CommonTlsContext, DownstreamTlsContext, SdsSecretConfig,
    TlsParameters,
    certificate_validation_context::TrustChainVerification,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
    tls_parameters::TlsProtocol,
};

use super::access_log::access_logs;
use envoy_types::pb::envoy::config::accesslog::v3::AccessLog as EnvoyAccessLog;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as HcmTracing;
use super::route::{
    self, HTTP_ROUTE_CONFIG, ROUTE_SHARD_HEADER, http_route_config_name, https_route_config_name,
};
use envoy_types::pb::envoy::config::core::v3::{DataSource, data_source};
use envoy_types::pb::envoy::config::route::v3::{
    ScopedRouteConfiguration, scoped_route_configuration,
};
use envoy_types::pb::envoy::extensions::filters::http::lua::v3::Lua;
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    ScopedRds, ScopedRoutes,
    scoped_routes::{
        ConfigSpecifier, ScopeKeyBuilder,
        scope_key_builder::{
            FragmentBuilder, fragment_builder,
            fragment_builder::{HeaderValueExtractor, header_value_extractor::ExtractType},
        },
    },
};
use super::trace::hcm_tracing;
use super::wire_encode;
use super::{Options, ads_config_source, any, boolv, duration, u32v};
use sluice_core::api::TlsVersion;
use sluice_core::dag::model::ClientValidation;
use sluice_core::dag::{Dag, TcpListener, VirtualHost, WeightedCluster as DagWeightedCluster};

/// How long a client has from the first byte of a request's headers to the last: a client that
/// trickles them (slowloris) gets a 408 and the connection closes.
pub const REQUEST_HEADERS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);
/// A downstream connection without a request in flight for this long is closed, one that never
/// sent a byte included (Envoy's own default is an hour).
pub const CONNECTION_IDLE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);
/// HTTP/2 limits per client connection: streams at once, and the flow-control windows, which
/// bound what one client can make Envoy buffer (Envoy's edge proxy recommendations).
pub const H2_MAX_CONCURRENT_STREAMS: u32 = 100;
pub const H2_INITIAL_STREAM_WINDOW: u32 = 64 * 1024;
pub const H2_INITIAL_CONNECTION_WINDOW: u32 = 1024 * 1024;
/// Bytes Envoy buffers per downstream connection before it stops reading from it.
pub const PER_CONNECTION_BUFFER_LIMIT: u32 = 32 * 1024;

pub const HTTP_LISTENER: &str = "ingress_http";
pub const HTTPS_LISTENER: &str = "ingress_https";

/// The name of the listener of a Gateway `TCP` listener's port.
pub fn tcp_listener_name(port: u16) -> String {
    format!("ingress_tcp_{port}")
}

fn socket(options: &Options, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: options.listen_address.clone(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

/// What every filter chain of one listener carries the same, made once per listener rather than
/// once per TLS host's chain.
pub(super) struct Shared<'a> {
    options: &'a Options,
    access_log: Vec<EnvoyAccessLog>,
    tracing: Option<HcmTracing>,
    /// Forward the `Host` header with its port, as the client sent it (a Gateway's own ports:
    /// the Gateway API passes the header on unchanged; hosts are matched without the port by
    /// the route configuration instead). Envoy's shared listeners strip the port.
    keep_host_port: bool,
}

impl<'a> Shared<'a> {
    pub(super) fn new(options: &'a Options) -> Shared<'a> {
        Shared {
            options,
            access_log: access_logs(&options.access_log),
            tracing: options.tracing.as_ref().map(hcm_tracing),
            keep_host_port: false,
        }
    }

    /// [`Shared::new`] for the listeners of a Gateway's own address.
    pub(super) fn for_gateway(options: &'a Options) -> Shared<'a> {
        Shared {
            keep_host_port: true,
            ..Shared::new(options)
        }
    }
}

/// Routes from one route configuration over ADS.
pub(super) fn rds(route_config: &str) -> RouteSpecifier {
    RouteSpecifier::Rds(Rds {
        config_source: Some(ads_config_source()),
        route_config_name: route_config.to_string(),
    })
}

/// The scopes of the HTTP listener's route shards, in name order: one per shard, keyed by the
/// shard's number in [`ROUTE_SHARD_HEADER`], routing with the shard's configuration (RDS over
/// ADS). None with one shard.
pub fn build_scoped_routes(shards: u16) -> Vec<ScopedRouteConfiguration> {
    if shards <= 1 {
        return Vec::new();
    }
    let mut scopes: Vec<_> = (0..usize::from(shards))
        .map(|k| ScopedRouteConfiguration {
            name: http_route_config_name(k, shards),
            route_configuration_name: http_route_config_name(k, shards),
            key: Some(scoped_route_configuration::Key {
                fragments: vec![scoped_route_configuration::key::Fragment {
                    r#type: Some(scoped_route_configuration::key::fragment::Type::StringKey(
                        k.to_string(),
                    )),
                }],
            }),
            ..Default::default()
        })
        .collect();
    scopes.sort_by(|a, b| a.name.cmp(&b.name));
    scopes
}

/// The HTTP listener's routes: [`HTTP_ROUTE_CONFIG`] over ADS, or with shards, scoped routes
/// over ADS ([`build_scoped_routes`]) picked by [`ROUTE_SHARD_HEADER`] (docs/xds.md, "Route
/// shards").
fn http_routes(shards: u16) -> RouteSpecifier {
    if shards <= 1 {
        return rds(HTTP_ROUTE_CONFIG);
    }
    RouteSpecifier::ScopedRoutes(ScopedRoutes {
        name: HTTP_ROUTE_CONFIG.to_string(),
        scope_key_builder: Some(ScopeKeyBuilder {
            fragments: vec![FragmentBuilder {
                r#type: Some(fragment_builder::Type::HeaderValueExtractor(
                    HeaderValueExtractor {
                        name: ROUTE_SHARD_HEADER.to_string(),
                        extract_type: Some(ExtractType::Index(0)),
                        ..Default::default()
                    },
                )),
            }],
        }),
        rds_config_source: Some(ads_config_source()),
        config_specifier: Some(ConfigSpecifier::ScopedRds(ScopedRds {
            scoped_rds_config_source: Some(ads_config_source()),
            ..Default::default()
        })),
    })
}

/// The HTTP filter that names each request's route shard ([`route::shard_lua`]).
fn shard_filter(shards: u16) -> HttpFilter {
    let lua = Lua {
        default_source_code: Some(DataSource {
            specifier: Some(data_source::Specifier::InlineString(route::shard_lua(
                shards,
            ))),
            ..Default::default()
        }),
        ..Default::default()
    };
    HttpFilter {
        name: "envoy.filters.http.lua".to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&lua))),
        ..Default::default()
    }
}

pub(super) fn hcm_filter(
    shared: &Shared<'_>,
    stat_prefix: &str,
    routes: RouteSpecifier,
    http_filters: Vec<HttpFilter>,
) -> Filter {
    let hcm = hcm(shared, stat_prefix, Some(routes), http_filters);
    Filter {
        name: HCM_FILTER.to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&hcm))),
    }
}

/// The name of the HTTP connection manager's network filter.
const HCM_FILTER: &str = "envoy.filters.network.http_connection_manager";

/// The HTTP connection manager of every TLS host's filter chain, encoded once per listener: the
/// hosts' differ only in the name of their route configuration (`rds`, field 3), so each host's
/// is the bytes of the fields before that one, its own `rds`, and the bytes of the fields after
/// it ([`wire_encode::hcm_with_rds`]); a test holds the result to a whole encoding of each
/// host's.
pub(super) struct HttpsHcm {
    before: Vec<u8>,
    after: Vec<u8>,
    /// `Rds.config_source` (field 1), encoded: the same for every host.
    config_source: Vec<u8>,
}

impl HttpsHcm {
    pub(super) fn new(shared: &Shared<'_>, stat_prefix: &str) -> HttpsHcm {
        use prost::Message;
        let hcm = hcm(shared, stat_prefix, None, Vec::new());
        let mut before = hcm.encode_to_vec();
        let head = HttpConnectionManager {
            codec_type: hcm.codec_type,
            stat_prefix: hcm.stat_prefix.clone(),
            ..Default::default()
        };
        let after = before.split_off(head.encoded_len());
        let config_source = Rds {
            config_source: Some(ads_config_source()),
            route_config_name: String::new(),
        };
        HttpsHcm {
            before,
            after,
            config_source: config_source.encode_to_vec(),
        }
    }

    /// The filter of a host whose routes are the route configuration `route_config`.
    fn filter(&self, route_config: &str) -> Filter {
        let value =
            wire_encode::hcm_with_rds(&self.before, &self.config_source, route_config, &self.after);
        Filter {
            name: HCM_FILTER.to_string(),
            config_type: Some(filter::ConfigType::TypedConfig(super::Any {
                type_url: <HttpConnectionManager as prost::Name>::type_url(),
                value,
            })),
        }
    }
}

/// The HTTP connection manager of a listener's filter chain.
fn hcm(
    shared: &Shared<'_>,
    stat_prefix: &str,
    routes: Option<RouteSpecifier>,
    mut http_filters: Vec<HttpFilter>,
) -> HttpConnectionManager {
    let options = shared.options;
    // CORS policies are routes' (Gateway API `CORS` filters); the filter does nothing on a route
    // without one. After the filters before it (the route shards' Lua sets the header that
    // picks the route), as it reads the route.
    http_filters.push(HttpFilter {
        name: super::route::CORS_FILTER.to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(&CorsFilter {}))),
        ..Default::default()
    });
    http_filters.push(HttpFilter {
        name: "envoy.filters.http.router".to_string(),
        config_type: Some(http_filter::ConfigType::TypedConfig(
            any(&Router::default()),
        )),
        ..Default::default()
    });
    HttpConnectionManager {
        codec_type: CodecType::Auto as i32,
        stat_prefix: stat_prefix.to_string(),
        route_specifier: routes,
        http_filters,
        use_remote_address: Some(boolv(true)),
        xff_num_trusted_hops: options.num_trusted_hops,
        // Paths are routed as the backend will read them: dot segments resolved (`normalize_path`,
        // RFC 3986), `//` merged, and a path with an escaped slash or backslash (`%2F`, `%5C`)
        // redirected to its unescaped form, so that no route is chosen on a path whose
        // segments the backend splits otherwise (docs/xds.md, "Envoy hardening").
        normalize_path: Some(boolv(true)),
        merge_slashes: true,
        path_with_escaped_slashes_action: PathWithEscapedSlashesAction::UnescapeAndRedirect as i32,
        strip_port_mode: (!shared.keep_host_port).then_some(StripPortMode::StripAnyHostPort(true)),
        // Envoy's recommendations for an edge proxy: bounds on what a slow or greedy client can
        // hold (docs/xds.md, "Limits on clients").
        request_headers_timeout: Some(duration(REQUEST_HEADERS_TIMEOUT)),
        common_http_protocol_options: Some(HttpProtocolOptions {
            idle_timeout: Some(duration(CONNECTION_IDLE_TIMEOUT)),
            ..Default::default()
        }),
        http2_protocol_options: Some(Http2ProtocolOptions {
            max_concurrent_streams: Some(u32v(H2_MAX_CONCURRENT_STREAMS)),
            initial_stream_window_size: Some(u32v(H2_INITIAL_STREAM_WINDOW)),
            initial_connection_window_size: Some(u32v(H2_INITIAL_CONNECTION_WINDOW)),
            ..Default::default()
        }),
        access_log: shared.access_log.clone(),
        tracing: shared.tracing.clone(),
        // WebSockets on every route: an HTTP/1.1 request with `Upgrade: websocket` is proxied
        // to the route's backend, and the connection becomes a byte stream both ways.
        upgrade_configs: vec![UpgradeConfig {
            upgrade_type: "websocket".to_string(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The listener filters in front of every listener's filter chains: the PROXY protocol header
/// first, when the load balancer sends one; then, on the TLS listener, the TLS inspector.
pub(super) fn listener_filters(options: &Options, tls: bool) -> Vec<ListenerFilter> {
    let filter = |name: &str, config| ListenerFilter {
        name: name.to_string(),
        config_type: Some(listener_filter::ConfigType::TypedConfig(config)),
        ..Default::default()
    };
    let mut filters = Vec::new();
    if options.proxy_protocol {
        let config = any(&ProxyProtocol::default());
        filters.push(filter("envoy.filters.listener.proxy_protocol", config));
    }
    if tls {
        let config = any(&TlsInspector::default());
        filters.push(filter("envoy.filters.listener.tls_inspector", config));
    }
    filters
}

/// The plain HTTP listener, its hosts spread over `shards` route configurations.
pub fn build_http_listener(options: &Options, shards: u16) -> Listener {
    Listener {
        name: HTTP_LISTENER.to_string(),
        address: Some(socket(options, options.http_port)),
        listener_filters: listener_filters(options, false),
        per_connection_buffer_limit_bytes: Some(u32v(PER_CONNECTION_BUFFER_LIMIT)),
        filter_chains: vec![FilterChain {
            filters: vec![hcm_filter(
                &Shared::new(options),
                HTTP_LISTENER,
                http_routes(shards),
                if shards > 1 {
                    vec![shard_filter(shards)]
                } else {
                    Vec::new()
                },
            )],
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// The listener of a Gateway `TCP` listener's port: every connection is forwarded to the
/// TCPRoute's backends (None when none of them has a weight).
pub fn build_tcp_listener(l: &TcpListener, options: &Options) -> Option<Listener> {
    let shared = Shared::new(options);
    let filter = tcp_proxy_filter(&shared, &format!("port-{}", l.port), &l.clusters)?;
    Some(Listener {
        name: tcp_listener_name(l.port),
        address: Some(socket(options, l.port)),
        listener_filters: listener_filters(options, false),
        per_connection_buffer_limit_bytes: Some(u32v(PER_CONNECTION_BUFFER_LIMIT)),
        filter_chains: vec![FilterChain {
            filters: vec![filter],
            ..Default::default()
        }],
        ..Default::default()
    })
}

/// The TLS listener, or None when no host has TLS (Envoy refuses a listener without filter chains).
pub fn build_https_listener(dag: &Dag, options: &Options) -> Option<Listener> {
    let shared = Shared::new(options);
    let hcm = HttpsHcm::new(&shared, HTTPS_LISTENER);
    let filter_chains: Vec<FilterChain> = dag
        .vhosts
        .values()
        .filter_map(|v| {
            if let Some(clusters) = &v.tls_passthrough {
                return passthrough_filter_chain(&shared, v, clusters);
            }
            let tls = v.tls.as_ref()?;
            let secret = dag.secrets.get(&tls.secret)?;
            let routes = https_route_config_name(&v.host);
            build_tls_filter_chain(
                &shared,
                &hcm,
                v,
                &secret.name,
                tls.min_version,
                &routes,
                None,
            )
        })
        .collect();
    if filter_chains.is_empty() {
        return None;
    }
    Some(Listener {
        name: HTTPS_LISTENER.to_string(),
        address: Some(socket(options, options.https_port)),
        listener_filters: listener_filters(options, true),
        per_connection_buffer_limit_bytes: Some(u32v(PER_CONNECTION_BUFFER_LIMIT)),
        filter_chains,
        ..Default::default()
    })
}

/// The cipher suites (TLS 1.2 and older; TLS 1.3's are fixed) of a host that accepts TLS 1.1:
/// Envoy's defaults, which are AEAD suites of TLS 1.2, then the ECDHE CBC suites a TLS 1.1 client
/// can use. Hosts of a newer minimum keep Envoy's defaults.
const TLS_1_1_CIPHER_SUITES: [&str; 8] = [
    "[ECDHE-ECDSA-AES128-GCM-SHA256|ECDHE-ECDSA-CHACHA20-POLY1305]",
    "[ECDHE-RSA-AES128-GCM-SHA256|ECDHE-RSA-CHACHA20-POLY1305]",
    "ECDHE-ECDSA-AES256-GCM-SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA",
    "ECDHE-ECDSA-AES256-SHA",
    "ECDHE-RSA-AES256-SHA",
];

fn tls_protocol(v: TlsVersion) -> TlsProtocol {
    match v {
        TlsVersion::V1_1 => TlsProtocol::TlSv11,
        TlsVersion::V1_2 => TlsProtocol::TlSv12,
        TlsVersion::V1_3 => TlsProtocol::TlSv13,
    }
}

/// One TLS host's filter chain; None for a TCP proxy without a backend carrying weight. With
/// `client`, Envoy asks the client for a certificate and verifies it (a Gateway's port).
pub(super) fn build_tls_filter_chain(
    shared: &Shared<'_>,
    hcm: &HttpsHcm,
    v: &VirtualHost,
    secret: &str,
    min: TlsVersion,
    route_config: &str,
    client: Option<&ClientValidation>,
) -> Option<FilterChain> {
    let (filter, alpn) = match &v.tcp_proxy {
        Some(clusters) => (tcp_proxy_filter(shared, &v.host, clusters)?, vec![]),
        None => (
            hcm.filter(route_config),
            vec!["h2".to_string(), "http/1.1".to_string()],
        ),
    };
    let tls = downstream_tls(secret, min, alpn, client);
    Some(FilterChain {
        name: v.host.clone(),
        filter_chain_match: Some(FilterChainMatch {
            server_names: vec![v.host.clone()],
            ..Default::default()
        }),
        filters: vec![filter],
        transport_socket: Some(TransportSocket {
            name: "envoy.transport_sockets.tls".to_string(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&tls))),
        }),
        ..Default::default()
    })
}

/// The filter chain of a TLS port's connections whose SNI names none of its hosts: TLS
/// terminated with `secret`, HTTP routed by `route_config`, clients validated as `client` says.
pub(super) fn default_tls_chain(
    hcm: &HttpsHcm,
    secret: &str,
    route_config: &str,
    client: Option<&ClientValidation>,
) -> FilterChain {
    let alpn = vec!["h2".to_string(), "http/1.1".to_string()];
    let tls = downstream_tls(
        secret,
        sluice_core::dag::gateway::GATEWAY_MIN_TLS,
        alpn,
        client,
    );
    FilterChain {
        name: "default".to_string(),
        filters: vec![hcm.filter(route_config)],
        transport_socket: Some(TransportSocket {
            name: "envoy.transport_sockets.tls".to_string(),
            config_type: Some(transport_socket::ConfigType::TypedConfig(any(&tls))),
        }),
        ..Default::default()
    }
}

/// The TLS settings of a chain that terminates TLS with the certificate `secret` (by SDS), and
/// with `client`, validates the clients' certificates against its CA certificates (by SDS).
///
/// `AllowValidOnly`: a certificate is required and must chain to the CA. `AllowInsecureFallback`
/// (the Gateway API: "accept connections even if the client certificate is not presented or
/// fails verification"): Envoy still asks for a certificate and checks one presented against
/// the CA, but lets the client in without one (`require_client_certificate: false`) or with one
/// that does not chain to the CA (`trust_chain_verification: ACCEPT_UNTRUSTED`).
fn downstream_tls(
    secret: &str,
    min: TlsVersion,
    alpn: Vec<String>,
    client: Option<&ClientValidation>,
) -> DownstreamTlsContext {
    let validation = client.map(|c| {
        let trust = match c.insecure_fallback {
            true => TrustChainVerification::AcceptUntrusted,
            false => TrustChainVerification::VerifyTrustChain,
        };
        ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
            default_validation_context: Some(CertificateValidationContext {
                trust_chain_verification: trust as i32,
                ..Default::default()
            }),
            validation_context_sds_secret_config: Some(SdsSecretConfig {
                name: c.ca_secret.clone(),
                sds_config: Some(ads_config_source()),
            }),
            ..Default::default()
        })
    });
    DownstreamTlsContext {
        require_client_certificate: client.map(|c| super::boolv(!c.insecure_fallback)),
        common_tls_context: Some(CommonTlsContext {
            tls_params: Some(TlsParameters {
                tls_minimum_protocol_version: tls_protocol(min) as i32,
                tls_maximum_protocol_version: TlsProtocol::TlSv13 as i32,
                cipher_suites: if min == TlsVersion::V1_1 {
                    TLS_1_1_CIPHER_SUITES
                        .iter()
                        .map(|s| s.to_string())
                        .collect()
                } else {
                    Vec::new()
                },
                ..Default::default()
            }),
            tls_certificate_sds_secret_configs: vec![SdsSecretConfig {
                name: secret.to_string(),
                sds_config: Some(ads_config_source()),
            }],
            alpn_protocols: alpn,
            validation_context_type: validation,
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A TLS passthrough host's filter chain: matched by SNI like the others, its connections
/// forwarded as they are, still encrypted; None without a backend carrying weight.
pub(super) fn passthrough_filter_chain(
    shared: &Shared<'_>,
    v: &VirtualHost,
    clusters: &[DagWeightedCluster],
) -> Option<FilterChain> {
    Some(FilterChain {
        name: v.host.clone(),
        filter_chain_match: Some(FilterChainMatch {
            server_names: vec![v.host.clone()],
            ..Default::default()
        }),
        filters: vec![tcp_proxy_filter(
            shared,
            &format!("passthrough/{}", v.host),
            clusters,
        )?],
        ..Default::default()
    })
}

/// A filter that closes every connection it gets (a TCP proxy to a cluster no model has): a
/// port that is listened on but has nowhere to send a connection accepts it and closes it, as the
/// Gateway API asks (a refused connection would say the port is not served).
pub(super) fn closing_filter(shared: &Shared<'_>, stat: &str) -> Filter {
    let proxy = TcpProxy {
        stat_prefix: format!("tcp/{stat}"),
        cluster_specifier: Some(TcpClusterSpecifier::Cluster(
            sluice_core::dag::INVALID_BACKEND_CLUSTER.to_string(),
        )),
        access_log: shared.access_log.clone(),
        ..Default::default()
    };
    Filter {
        name: "envoy.filters.network.tcp_proxy".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    }
}

pub(super) fn tcp_proxy_filter(
    shared: &Shared<'_>,
    host: &str,
    clusters: &[DagWeightedCluster],
) -> Option<Filter> {
    let live: Vec<_> = clusters.iter().filter(|c| c.weight > 0).collect();
    let specifier = match live.as_slice() {
        [] => return None,
        [one] => TcpClusterSpecifier::Cluster(String::from(&*one.cluster)),
        many => TcpClusterSpecifier::WeightedClusters(WeightedCluster {
            clusters: many
                .iter()
                .map(|c| ClusterWeight {
                    name: String::from(&*c.cluster),
                    weight: c.weight,
                    ..Default::default()
                })
                .collect(),
        }),
    };
    let proxy = TcpProxy {
        stat_prefix: format!("tcp/{host}"),
        cluster_specifier: Some(specifier),
        access_log: shared.access_log.clone(),
        ..Default::default()
    };
    Some(Filter {
        name: "envoy.filters.network.tcp_proxy".to_string(),
        config_type: Some(filter::ConfigType::TypedConfig(any(&proxy))),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::translate::access_log::{AccessLog, AccessLogFormat};
    use crate::translate::trace::Tracing;

    #[test]
    fn every_connection_manager_normalizes_paths_and_redirects_escaped_slashes() {
        let options = Options::default();
        for shared in [Shared::new(&options), Shared::for_gateway(&options)] {
            let hcm = hcm(&shared, HTTP_LISTENER, None, Vec::new());
            assert_eq!(hcm.normalize_path, Some(boolv(true)));
            assert!(hcm.merge_slashes);
            assert_eq!(
                hcm.path_with_escaped_slashes_action(),
                PathWithEscapedSlashesAction::UnescapeAndRedirect
            );
        }
    }

    #[test]
    fn a_tls_hosts_connection_manager_from_the_listeners_bytes_is_its_whole_encoding() {
        let tracing = Tracing {
            collector: "otel.observability:4317".into(),
            service_name: "edge".into(),
            sampling_per_million: 10_000,
        };
        let variants = [
            Options::default(),
            Options {
                tracing: Some(tracing),
                num_trusted_hops: 2,
                ..Default::default()
            },
            Options {
                access_log: AccessLog {
                    format: AccessLogFormat::Off,
                    ..Default::default()
                },
                ..Default::default()
            },
            Options {
                access_log: AccessLog {
                    format: AccessLogFormat::Envoy,
                    path: "/var/log/envoy/access.log".into(),
                },
                ..Default::default()
            },
        ];
        let long = format!("https/{}.example.com", "a".repeat(200));
        for options in &variants {
            let shared = Shared::new(options);
            let hcm = HttpsHcm::new(&shared, HTTPS_LISTENER);
            for name in ["https/shop.example.com", "", "https/x", long.as_str()] {
                assert_eq!(
                    hcm.filter(name),
                    hcm_filter(&shared, HTTPS_LISTENER, rds(name), Vec::new()),
                    "route configuration {name:?}, {options:?}"
                );
            }
        }
    }
}
