//! The listeners of Gateways that have addresses of their own ([`Dag::entries`]): one Envoy
//! listener per port of a Gateway's address, bound to that address and port, routing only the
//! routes attached to that Gateway's listeners of the port.
//!
//! | port speaks | listener | route configurations |
//! |---|---|---|
//! | HTTP | one filter chain, routes `gateway/<ns>/<name>/<port>` | that one: every host of the port |
//! | TLS (HTTPS and TLS listeners) | a filter chain per host by SNI (TLS terminated for HTTP, terminated for a stream, or passed through); a default chain with the port's first HTTPS certificate | `…/<port>/<host>` per HTTPS host, and `…/<port>` (every HTTPS host) for the default chain |
//! | TCP | a TCP proxy to the TCPRoute's backends | none |

use envoy_types::pb::envoy::config::core::v3::socket_address::PortSpecifier;
use envoy_types::pb::envoy::config::core::v3::{Address, SocketAddress, address};
use envoy_types::pb::envoy::config::listener::v3::{FilterChain, Listener};
use envoy_types::pb::envoy::config::route::v3::RouteConfiguration;

use super::listener::{
    HttpsHcm, PER_CONNECTION_BUFFER_LIMIT, Shared, build_tls_filter_chain, closing_filter,
    default_tls_chain, hcm_filter, listener_filters, passthrough_filter_chain, rds,
    tcp_proxy_filter,
};
use super::{Options, route, u32v};
use crate::dag::{Dag, Entry, EntryKey, EntryProtocol, VirtualHost};

/// The address Envoy binds for a port of a Gateway's address.
fn socket_at(e: &Entry, port: u16) -> Address {
    Address {
        address: Some(address::Address::SocketAddress(SocketAddress {
            address: e.address.to_string(),
            port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
            ..Default::default()
        })),
    }
}

/// Whether a host of a TLS port routes HTTP (its TLS terminated, not forwarded as a stream).
fn routes_https(v: &VirtualHost) -> bool {
    v.tls.is_some() && v.tcp_proxy.is_none() && v.tls_passthrough.is_none()
}

/// The route configuration of one HTTPS host of a TLS port.
fn host_route_config_name(key: &EntryKey, host: &str) -> String {
    format!("{}/{host}", key.name())
}

/// The listener of one port of a Gateway's address. A port with nowhere to send a connection
/// (a TCP port without a route, a TLS connection whose SNI names no host on a port without an
/// HTTPS certificate) accepts it and closes it. Always Some today; an Option for the caller's
/// sake, as a listener Envoy would refuse must not be sent.
pub fn build_entry_listener(
    key: &EntryKey,
    e: &Entry,
    dag: &Dag,
    options: &Options,
) -> Option<Listener> {
    let shared = Shared::for_gateway(options);
    let name = key.name();
    let mut listener = Listener {
        name: name.clone(),
        address: Some(socket_at(e, key.port)),
        per_connection_buffer_limit_bytes: Some(u32v(PER_CONNECTION_BUFFER_LIMIT)),
        ..Default::default()
    };
    match e.protocol {
        EntryProtocol::Http => {
            listener.listener_filters = listener_filters(options, false);
            listener.filter_chains = vec![FilterChain {
                filters: vec![hcm_filter(&shared, &name, rds(&name), Vec::new())],
                ..Default::default()
            }];
        }
        EntryProtocol::Tcp => {
            // No route, or no backend with a weight: connections are accepted and closed.
            let filter = (e.tcp.as_ref())
                .and_then(|(clusters, _)| tcp_proxy_filter(&shared, &name, clusters))
                .unwrap_or_else(|| closing_filter(&shared, &name));
            listener.listener_filters = listener_filters(options, false);
            listener.filter_chains = vec![FilterChain {
                filters: vec![filter],
                ..Default::default()
            }];
        }
        EntryProtocol::Tls => {
            let hcm = HttpsHcm::new(&shared, &name);
            listener.listener_filters = listener_filters(options, true);
            listener.filter_chains = (e.vhosts.values())
                .filter(|v| v.host != "*")
                .filter_map(|v| {
                    if let Some(clusters) = &v.tls_passthrough {
                        return passthrough_filter_chain(&shared, v, clusters);
                    }
                    let tls = v.tls.as_ref()?;
                    let secret = dag.secrets.get(&tls.secret)?;
                    let routes = host_route_config_name(key, &v.host);
                    build_tls_filter_chain(
                        &shared,
                        &hcm,
                        v,
                        &secret.name,
                        tls.min_version,
                        &routes,
                        e.client_validation.as_ref(),
                    )
                })
                .collect();
            // A connection whose SNI names no host here: the port's certificate and every
            // HTTPS host's routes, or, without a certificate, accepted and closed.
            listener.default_filter_chain = Some(
                match (e.default_secret.as_ref()).filter(|s| dag.secrets.get(*s).is_some()) {
                    Some(secret) => {
                        default_tls_chain(&hcm, secret, &name, e.client_validation.as_ref())
                    }
                    None => FilterChain {
                        name: "default".to_string(),
                        filters: vec![closing_filter(&shared, &name)],
                        ..Default::default()
                    },
                },
            );
        }
    }
    Some(listener)
}

/// The route configurations of one port of a Gateway's address.
pub fn build_entry_route_configs(key: &EntryKey, e: &Entry) -> Vec<RouteConfiguration> {
    let name = key.name();
    match e.protocol {
        EntryProtocol::Tcp => Vec::new(),
        EntryProtocol::Http => {
            let fallback = e.vhosts.get("*").map(|v| &**v);
            let virtual_hosts = (e.vhosts.values())
                .filter(|v| v.serves_http())
                .map(|v| route::build_http_vhost(v, fallback))
                .collect();
            vec![RouteConfiguration {
                name,
                virtual_hosts,
                ignore_port_in_host_matching: true,
                ..Default::default()
            }]
        }
        EntryProtocol::Tls => {
            let mut out = Vec::new();
            let mut all = Vec::new();
            for v in e.vhosts.values().filter(|v| routes_https(v)) {
                let mut config = route::build_https_route_config(v);
                config.ignore_port_in_host_matching = true;
                all.extend(config.virtual_hosts.iter().cloned());
                // The catch-all host is the default chain's only.
                if v.host != "*" {
                    config.name = host_route_config_name(key, &v.host);
                    out.push(config);
                }
            }
            // The default filter chain's: every HTTPS host of the port, by the Host header.
            out.push(RouteConfiguration {
                name,
                virtual_hosts: all,
                ignore_port_in_host_matching: true,
                ..Default::default()
            });
            out.sort_by(|a, b| a.name.cmp(&b.name));
            out
        }
    }
}

/// The names of the route configurations [`build_entry_route_configs`] makes.
pub fn entry_route_config_names(key: &EntryKey, e: &Entry) -> Vec<String> {
    build_entry_route_configs(key, e)
        .into_iter()
        .map(|c| c.name)
        .collect()
}
