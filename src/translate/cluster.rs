//! Clusters (over EDS), their load assignments and TLS secrets.

use std::collections::HashMap;
use std::fmt::Write;
use std::net::IpAddr;
use std::time::Duration;

use envoy_types::pb::envoy::config::cluster::v3::{
    Cluster as EnvoyCluster, OutlierDetection as EnvoyOutlier,
    cluster::{ClusterDiscoveryType, DiscoveryType, EdsClusterConfig, LbPolicy},
};
use envoy_types::pb::envoy::config::core::v3::{
    Address, DataSource, HealthCheck, Http2ProtocolOptions, SocketAddress, TransportSocket,
    address, data_source::Specifier, health_check, socket_address::PortSpecifier, transport_socket,
};
use envoy_types::pb::envoy::config::endpoint::v3::{
    ClusterLoadAssignment, Endpoint as EnvoyEndpoint, LbEndpoint, LocalityLbEndpoints,
    lb_endpoint::HostIdentifier,
};
use envoy_types::pb::envoy::extensions::transport_sockets::tls::v3::{
    CommonTlsContext, Secret, TlsCertificate, UpstreamTlsContext, secret,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions,
    http_protocol_options::{
        ExplicitHttpConfig, UpstreamProtocolOptions, explicit_http_config::ProtocolConfig,
    },
};
use envoy_types::pb::envoy::r#type::v3::CodecClientType;

use super::{ads_config_source, any, duration, u32v};
use crate::api::LbStrategy;
use crate::dag::{Cluster, TlsSecret, UpstreamProtocol};

/// How long Envoy waits for a TCP connection to an upstream host.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

pub fn build_cluster(c: &Cluster) -> EnvoyCluster {
    let lb_policy = match c.lb {
        LbStrategy::RoundRobin => LbPolicy::RoundRobin,
        LbStrategy::WeightedLeastRequest => LbPolicy::LeastRequest,
        LbStrategy::Random => LbPolicy::Random,
    };
    let h2 = matches!(c.protocol, UpstreamProtocol::H2 | UpstreamProtocol::H2c);
    let health_checks = c
        .health_check
        .iter()
        .map(|h| HealthCheck {
            timeout: Some(duration(h.timeout)),
            interval: Some(duration(h.interval)),
            // Probe at the same pace before the cluster has seen traffic (Envoy's default is 60 s).
            no_traffic_interval: Some(duration(h.interval)),
            unhealthy_threshold: Some(u32v(h.unhealthy_threshold)),
            healthy_threshold: Some(u32v(h.healthy_threshold)),
            health_checker: Some(health_check::HealthChecker::HttpHealthCheck(
                health_check::HttpHealthCheck {
                    host: h.host.clone(),
                    path: h.path.clone(),
                    codec_client_type: if h2 {
                        CodecClientType::Http2
                    } else {
                        CodecClientType::Http1
                    } as i32,
                    ..Default::default()
                },
            )),
            ..Default::default()
        })
        .collect();
    let outlier_detection = c.outlier_detection.as_ref().map(|o| EnvoyOutlier {
        consecutive_5xx: Some(u32v(o.consecutive_5xx)),
        ..Default::default()
    });
    let transport_socket = match c.protocol {
        UpstreamProtocol::Https | UpstreamProtocol::H2 => {
            let alpn = if c.protocol == UpstreamProtocol::H2 {
                "h2"
            } else {
                "http/1.1"
            };
            let tls = UpstreamTlsContext {
                common_tls_context: Some(CommonTlsContext {
                    alpn_protocols: vec![alpn.to_string()],
                    ..Default::default()
                }),
                ..Default::default()
            };
            Some(TransportSocket {
                name: "envoy.transport_sockets.tls".to_string(),
                config_type: Some(transport_socket::ConfigType::TypedConfig(any(&tls))),
            })
        }
        _ => None,
    };
    // A single entry: HashMap iteration order cannot make the encoding differ.
    let mut typed_extension_protocol_options = HashMap::new();
    if h2 {
        let opts = HttpProtocolOptions {
            upstream_protocol_options: Some(UpstreamProtocolOptions::ExplicitHttpConfig(
                ExplicitHttpConfig {
                    protocol_config: Some(ProtocolConfig::Http2ProtocolOptions(
                        Http2ProtocolOptions::default(),
                    )),
                },
            )),
            ..Default::default()
        };
        typed_extension_protocol_options.insert(HTTP_PROTOCOL_OPTIONS.to_string(), any(&opts));
    }
    EnvoyCluster {
        name: c.name.to_string(),
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads_config_source()),
            service_name: String::new(),
        }),
        connect_timeout: Some(duration(CONNECT_TIMEOUT)),
        lb_policy: lb_policy as i32,
        health_checks,
        outlier_detection,
        transport_socket,
        typed_extension_protocol_options,
        ..Default::default()
    }
}

pub fn build_load_assignment(c: &Cluster) -> ClusterLoadAssignment {
    let mut cla = ClusterLoadAssignment::default();
    fill_load_assignment(c, &mut cla);
    cla
}

/// Makes `cla` the load assignment of `c` (as [`build_load_assignment`] builds it), reusing the
/// strings and vectors it holds: encoding every cluster's load assignment through one message
/// allocates per cluster only what grew. `cla` must hold nothing but what this function sets.
pub fn fill_load_assignment(c: &Cluster, cla: &mut ClusterLoadAssignment) {
    cla.cluster_name.clear();
    cla.cluster_name.push_str(&c.name);
    if c.endpoints.is_empty() {
        cla.endpoints.clear();
        return;
    }
    cla.endpoints.resize_with(1, LocalityLbEndpoints::default);
    let lb_endpoints = &mut cla.endpoints[0].lb_endpoints;
    lb_endpoints.truncate(c.endpoints.len());
    for (i, e) in c.endpoints.iter().enumerate() {
        let port = Some(PortSpecifier::PortValue(u32::from(e.port)));
        if let Some(LbEndpoint {
            host_identifier:
                Some(HostIdentifier::Endpoint(EnvoyEndpoint {
                    address:
                        Some(Address {
                            address: Some(address::Address::SocketAddress(held)),
                        }),
                    ..
                })),
            ..
        }) = lb_endpoints.get_mut(i)
        {
            held.address.clear();
            push_ip(&mut held.address, e.address);
            held.port_specifier = port;
            continue;
        }
        lb_endpoints.push(LbEndpoint {
            host_identifier: Some(HostIdentifier::Endpoint(EnvoyEndpoint {
                address: Some(Address {
                    address: Some(address::Address::SocketAddress(SocketAddress {
                        address: {
                            let mut a = String::with_capacity(15);
                            push_ip(&mut a, e.address);
                            a
                        },
                        port_specifier: port,
                        ..Default::default()
                    })),
                }),
                ..Default::default()
            })),
            ..Default::default()
        });
    }
}

/// Appends an address as `Display` writes it. IPv4 addresses, nearly every endpoint, are written
/// digit by digit: the formatting machinery took a tenth of encoding a 50,000-endpoint cluster set.
fn push_ip(out: &mut String, ip: IpAddr) {
    let IpAddr::V4(v4) = ip else {
        let _ = write!(out, "{ip}");
        return;
    };
    for (i, o) in v4.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        if o >= 100 {
            out.push(char::from(b'0' + o / 100));
        }
        if o >= 10 {
            out.push(char::from(b'0' + o / 10 % 10));
        }
        out.push(char::from(b'0' + o % 10));
    }
}

pub fn build_secret(s: &TlsSecret) -> Secret {
    let inline = |v: &str| DataSource {
        specifier: Some(Specifier::InlineString(v.to_string())),
        ..Default::default()
    };
    Secret {
        name: s.name.clone(),
        r#type: Some(secret::Type::TlsCertificate(TlsCertificate {
            certificate_chain: Some(inline(&s.cert_pem)),
            private_key: Some(inline(&s.key_pem)),
            ..Default::default()
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::push_ip;
    use std::net::{IpAddr, Ipv4Addr};

    #[test]
    fn addresses_are_written_as_display_writes_them() {
        let mut out = String::new();
        for o in 0..=255u8 {
            for ip in [
                Ipv4Addr::new(o, 0, 9, 10),
                Ipv4Addr::new(99, o, 100, 255),
                Ipv4Addr::new(1, 2, o, o),
            ] {
                out.clear();
                push_ip(&mut out, IpAddr::V4(ip));
                assert_eq!(out, ip.to_string());
            }
        }
        for v6 in ["::1", "fd00::a:1", "2001:db8::", "::ffff:10.0.0.1"] {
            let ip: IpAddr = v6.parse().unwrap();
            out.clear();
            push_ip(&mut out, ip);
            assert_eq!(out, v6);
        }
    }
}
