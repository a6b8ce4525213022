//! The listeners of Gateways that have addresses of their own ([`Dag::entries`]): one Envoy
//! listener per port of a Gateway's address, bound to that address and port, routing only the
//! routes attached to that Gateway's listeners of the port.
//!
//! | port speaks | listener | route configurations |
//! |---|---|---|
//! | HTTP | one filter chain, routes `gateway/<ns>/<name>/<port>` | that one: every host of the port |
//! | TLS (HTTPS and TLS listeners) | a filter chain per host by SNI (TLS terminated for HTTP, terminated for a stream, or passed through); a default chain with the port's first HTTPS certificate | `…/<port>/listener/<hostname or *>` per HTTPS listener (its hosts' routes, 421 for the other listeners' hosts), shared by the chains of its hosts, and `…/<port>` (every HTTPS host) for the default chain |
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
use sluice_core::dag::{Dag, Entry, EntryKey, EntryProtocol, VirtualHost};

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

/// The route configuration of the filter chain of HTTPS host `host` of a TLS port: the one of
/// the HTTPS listener that takes the host (every host of that listener shares it), or the host's
/// own when no listener's hostname covers it.
fn sni_route_config_name(key: &EntryKey, e: &Entry, host: &str) -> String {
    match listener_of(&e.https_listeners, host) {
        Some(Some(listener)) => format!("{}/listener/{listener}", key.name()),
        Some(None) => format!("{}/listener/*", key.name()),
        None => format!("{}/{host}", key.name()),
    }
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
                    let routes = sni_route_config_name(key, e, &v.host);
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
            let mut named = std::collections::HashSet::new();
            let https: Vec<&VirtualHost> = (e.vhosts.values().map(|v| &**v))
                .filter(|v| routes_https(v))
                .collect();
            for v in &https {
                let config = route::build_https_route_config(v);
                all.extend(config.virtual_hosts.iter().cloned());
                // The catch-all host is the default chain's only.
                if v.host == "*" {
                    continue;
                }
                let name = sni_route_config_name(key, e, &v.host);
                if !named.insert(name.clone()) {
                    continue;
                }
                let virtual_hosts = match listener_of(&e.https_listeners, &v.host) {
                    Some(own) => sni_vhosts(&e.https_listeners, own, &https),
                    None => config.virtual_hosts,
                };
                out.push(RouteConfiguration {
                    name,
                    virtual_hosts,
                    ignore_port_in_host_matching: true,
                    ..Default::default()
                });
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

/// The listener of a TLS port that takes `host` (a request's Host or a TLS client's SNI), by the
/// listeners' hostnames (None: a listener without one): the one of that exact hostname, else the
/// one of the longest wildcard covering it, else one without a hostname; None when no listener
/// takes it.
fn listener_of<'l>(listeners: &'l [Option<String>], host: &str) -> Option<Option<&'l str>> {
    let specificity = |l: &Option<String>| match l.as_deref() {
        None => Some(0),
        Some(name) if name == host => Some(usize::MAX),
        Some(name) => {
            let suffix = name.strip_prefix('*')?;
            (suffix.starts_with('.') && host.len() > suffix.len() && host.ends_with(suffix))
                .then_some(suffix.len())
        }
    };
    (listeners.iter())
        .filter_map(|l| Some((specificity(l)?, l.as_deref())))
        .max_by_key(|(s, _)| *s)
        .map(|(_, l)| l)
}

/// The virtual hosts of the filter chains whose SNI picks HTTPS listener `own` of a port (by its
/// hostname; None: the one without): the hosts of that listener, with their routes (a Host of
/// that listener that no route serves gets 404), and 421 Misdirected Request for a Host another
/// listener of the port takes, or, when `own` has a hostname, that no listener takes. One
/// configuration per listener, shared by its hosts' filter chains: each host's routes are in
/// one configuration of the port besides the default chain's.
fn sni_vhosts(
    listeners: &[Option<String>],
    own: Option<&str>,
    https: &[&VirtualHost],
) -> Vec<envoy_types::pb::envoy::config::route::v3::VirtualHost> {
    let own = Some(own);
    let mut out = Vec::new();
    let mut domains = std::collections::BTreeSet::new();
    for v in https {
        domains.insert(v.host.as_str());
        if listener_of(listeners, &v.host) == own {
            out.extend(route::build_https_route_config(v).virtual_hosts);
        } else {
            out.push(route::build_misdirected_vhost(&v.host));
        }
    }
    for l in listeners.iter().flatten() {
        if Some(Some(l.as_str())) != own && domains.insert(l.as_str()) {
            out.push(route::build_misdirected_vhost(l));
        }
    }
    if own != Some(None) && domains.insert("*") {
        out.push(route::build_misdirected_vhost("*"));
    }
    out
}

/// The names of the route configurations [`build_entry_route_configs`] makes.
pub fn entry_route_config_names(key: &EntryKey, e: &Entry) -> Vec<String> {
    build_entry_route_configs(key, e)
        .into_iter()
        .map(|c| c.name)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listeners() -> Vec<Option<String>> {
        [
            None,
            Some("second-example.org"),
            Some("*.wildcard.org"),
            Some("fourth-example.wildcard.org"),
        ]
        .into_iter()
        .map(|h| h.map(String::from))
        .collect()
    }

    #[test]
    fn a_name_belongs_to_the_listener_of_its_exact_name_else_the_longest_wildcard_else_the_catch_all()
     {
        let ls = listeners();
        let of = |h| listener_of(&ls, h);
        assert_eq!(of("example.org"), Some(None));
        assert_eq!(of("second-example.org"), Some(Some("second-example.org")));
        assert_eq!(of("third.wildcard.org"), Some(Some("*.wildcard.org")));
        assert_eq!(of("*.wildcard.org"), Some(Some("*.wildcard.org")));
        assert_eq!(
            of("wildcard.org"),
            Some(None),
            "a wildcard takes subdomains only"
        );
        assert_eq!(
            of("fourth-example.wildcard.org"),
            Some(Some("fourth-example.wildcard.org"))
        );
        let named = &ls[1..];
        assert_eq!(listener_of(named, "example.org"), None);
    }

    /// The HTTPS hosts of the upstream suite's misdirected-request test: what each SNI's filter
    /// chain answers for each Host, by Envoy's domain matching (exact, then longest suffix
    /// wildcard, then `*`).
    #[test]
    fn a_host_of_another_listener_than_the_snis_is_misdirected() {
        let ls = listeners();
        let host = |h: &str| VirtualHost {
            host: h.to_string(),
            tls: Some(sluice_core::dag::VhostTls {
                secret: "cert".to_string(),
                min_version: sluice_core::api::TlsVersion::V1_2,
            }),
            ..Default::default()
        };
        let hosts = [
            host("example.org"),
            host("second-example.org"),
            host("*.wildcard.org"),
            host("fourth-example.wildcard.org"),
        ];
        let https: Vec<&VirtualHost> = hosts.iter().collect();
        let answer = |sni: usize, req: &str| {
            let own = listener_of(&ls, &hosts[sni].host).expect("a listener takes the host");
            let vhosts = sni_vhosts(&ls, own, &https);
            let domains =
                |v: &envoy_types::pb::envoy::config::route::v3::VirtualHost| v.domains.clone();
            let pick = (vhosts.iter().find(|v| domains(v).iter().any(|d| d == req)))
                .or_else(|| {
                    (vhosts.iter())
                        .filter_map(|v| {
                            let d = v.domains.first()?;
                            let suffix = d.strip_prefix('*')?;
                            (!suffix.is_empty() && req.ends_with(suffix))
                                .then_some((suffix.len(), v))
                        })
                        .max_by_key(|(n, _)| *n)
                        .map(|(_, v)| v)
                })
                .or_else(|| vhosts.iter().find(|v| v.domains == ["*"]));
            match pick {
                None => "404".to_string(),
                Some(v) if v.name.starts_with("misdirected/") => "421".to_string(),
                Some(v) => v.name.clone(),
            }
        };
        let cases = [
            (0, "example.org", "example.org"),
            (0, "second-example.org", "421"),
            (0, "unknown-example.org", "404"),
            (1, "second-example.org", "second-example.org"),
            (1, "example.org", "421"),
            (1, "unknown-example.org", "421"),
            (2, "third-example.wildcard.org", "*.wildcard.org"),
            (2, "fith-example.wildcard.org", "*.wildcard.org"),
            (2, "fourth-example.wildcard.org", "421"),
            (2, "second-example.org", "421"),
            (2, "unknown-example.org", "421"),
            (
                3,
                "fourth-example.wildcard.org",
                "fourth-example.wildcard.org",
            ),
            (3, "fith-example.wildcard.org", "421"),
        ];
        for (sni, req, want) in cases {
            assert_eq!(
                answer(sni, req),
                want,
                "SNI {}, Host {req}",
                hosts[sni].host
            );
        }
    }
}
