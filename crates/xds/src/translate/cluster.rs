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
    CertificateValidationContext, CommonTlsContext, SdsSecretConfig, Secret, SubjectAltNameMatcher,
    TlsCertificate, UpstreamTlsContext,
    common_tls_context::{CombinedCertificateValidationContext, ValidationContextType},
    secret,
    subject_alt_name_matcher::SanType,
};
use envoy_types::pb::envoy::extensions::upstreams::http::v3::{
    HttpProtocolOptions,
    http_protocol_options::{
        ExplicitHttpConfig, UpstreamProtocolOptions, explicit_http_config::ProtocolConfig,
    },
};
use envoy_types::pb::envoy::r#type::matcher::v3::{StringMatcher, string_matcher::MatchPattern};
use envoy_types::pb::envoy::r#type::v3::CodecClientType;

use prost::Message;

use super::wire_encode;
use super::{ads_config_source, any, duration, u32v};
use sluice_core::api::LbStrategy;
use sluice_core::dag::{
    Cluster, HealthCheckPolicy, OutlierDetection, SecretKind, SubjectAltName, TlsSecret,
    UpstreamProtocol, UpstreamTls,
};

/// How long Envoy waits for a TCP connection to an upstream host.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// The largest share of a cluster's hosts (percent) passive health checking may eject at once.
pub const MAX_EJECTION_PERCENT: u32 = 50;

const HTTP_PROTOCOL_OPTIONS: &str = "envoy.extensions.upstreams.http.v3.HttpProtocolOptions";

pub fn build_cluster(c: &Cluster) -> EnvoyCluster {
    EnvoyCluster {
        name: String::from(&*c.name),
        ..build_cluster_settings(&ClusterSettings::of(c))
    }
}

/// What of a model's [`Cluster`] its Envoy cluster is made of, besides its name: the Envoy
/// cluster does not depend on anything else (its load assignment is named after it, over EDS).
/// Clusters of one cluster set differ in their names and share a few settings, so
/// [`ClusterBytes`] encodes each settings' part once.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct ClusterSettings {
    lb: LbStrategy,
    protocol: UpstreamProtocol,
    health_check: Option<Box<HealthCheckPolicy>>,
    outlier_detection: Option<OutlierDetection>,
    /// Shared with the cluster.
    upstream_tls: Option<std::sync::Arc<UpstreamTls>>,
}

impl ClusterSettings {
    fn of(c: &Cluster) -> ClusterSettings {
        ClusterSettings {
            lb: c.lb,
            protocol: c.protocol,
            health_check: c.health_check.clone(),
            outlier_detection: c.outlier_detection.clone(),
            upstream_tls: c.upstream_tls.clone(),
        }
    }

    /// Whether `c` has these settings (without copying its health check).
    fn are_those_of(&self, c: &Cluster) -> bool {
        self.lb == c.lb
            && self.protocol == c.protocol
            && self.health_check == c.health_check
            && self.outlier_detection == c.outlier_detection
            && self.upstream_tls == c.upstream_tls
    }
}

/// Encodes Envoy clusters as `build_cluster(c).encode_to_vec()` does, byte for byte, building
/// and encoding the message of each [`ClusterSettings`] once while it is among the last
/// [`ClusterBytes::HELD`] used: a cluster's encoding is its name's field followed by the
/// encoding of the same cluster without a name ([`wire_encode::named_cluster`]).
#[derive(Default)]
pub struct ClusterBytes {
    /// Settings with their cluster's encoding without a name, the most recently used first.
    encoded: Vec<(ClusterSettings, Vec<u8>)>,
}

impl ClusterBytes {
    /// How many settings are held. A cluster set has a handful (most clusters take the
    /// defaults); one whose clusters nearly all differ (a health check path of their own each)
    /// costs a look through these and one settings' encoding per cluster, as without them.
    const HELD: usize = 16;

    pub fn encode(&mut self, c: &Cluster) -> Vec<u8> {
        match self.encoded.iter().position(|(s, _)| s.are_those_of(c)) {
            Some(i) => self.encoded[..=i].rotate_right(1),
            None => {
                let settings = ClusterSettings::of(c);
                let rest = build_cluster_settings(&settings).encode_to_vec();
                self.encoded.truncate(Self::HELD - 1);
                self.encoded.insert(0, (settings, rest));
            }
        }
        wire_encode::named_cluster(&c.name, &self.encoded[0].1)
    }
}

/// The Envoy cluster of `settings`, without a name.
fn build_cluster_settings(c: &ClusterSettings) -> EnvoyCluster {
    let lb_policy = match c.lb {
        LbStrategy::RoundRobin => LbPolicy::RoundRobin,
        LbStrategy::WeightedLeastRequest => LbPolicy::LeastRequest,
        LbStrategy::Random => LbPolicy::Random,
    };
    let h2 = matches!(c.protocol, UpstreamProtocol::H2 | UpstreamProtocol::H2c);
    EnvoyCluster {
        cluster_discovery_type: Some(ClusterDiscoveryType::Type(DiscoveryType::Eds as i32)),
        eds_cluster_config: Some(EdsClusterConfig {
            eds_config: Some(ads_config_source()),
            service_name: String::new(),
        }),
        connect_timeout: Some(duration(CONNECT_TIMEOUT)),
        lb_policy: lb_policy as i32,
        health_checks: (c.health_check.iter())
            .map(|h| build_health_check(h, h2))
            .collect(),
        outlier_detection: c.outlier_detection.as_ref().map(build_outlier_detection),
        transport_socket: upstream_transport_socket(c),
        typed_extension_protocol_options: protocol_options(h2),
        ..Default::default()
    }
}

/// The active health check of a cluster: HTTP, over HTTP/2 when the cluster speaks it.
fn build_health_check(h: &HealthCheckPolicy, h2: bool) -> HealthCheck {
    HealthCheck {
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
    }
}

/// Passive health checking is exactly "eject after this many consecutive 5xx": Envoy's
/// success-rate ejection (on by default) is turned off, and up to half the hosts may be
/// ejected (Envoy's default of 10% ejects none in a cluster of fewer than 10 hosts; past half,
/// its panic threshold of 50% would send traffic to every host anyway).
fn build_outlier_detection(o: &OutlierDetection) -> EnvoyOutlier {
    EnvoyOutlier {
        consecutive_5xx: Some(u32v(o.consecutive_5xx)),
        max_ejection_percent: Some(u32v(MAX_EJECTION_PERCENT)),
        enforcing_success_rate: Some(u32v(0)),
        ..Default::default()
    }
}

/// The TLS transport socket of a cluster whose protocol is HTTPS or HTTP/2 over TLS; None for
/// the others.
fn upstream_transport_socket(c: &ClusterSettings) -> Option<TransportSocket> {
    let alpn = match c.protocol {
        UpstreamProtocol::H2 => "h2",
        UpstreamProtocol::Https => "http/1.1",
        _ => return None,
    };
    let tls = upstream_tls_context(alpn, c.upstream_tls.as_deref());
    Some(TransportSocket {
        name: "envoy.transport_sockets.tls".to_string(),
        config_type: Some(transport_socket::ConfigType::TypedConfig(any(&tls))),
    })
}

/// The protocol options of a cluster: HTTP/2 upstream when it speaks HTTP/2, none otherwise.
/// A single entry: HashMap iteration order cannot make the encoding differ.
fn protocol_options(h2: bool) -> HashMap<String, super::Any> {
    let mut options = HashMap::new();
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
        options.insert(HTTP_PROTOCOL_OPTIONS.to_string(), any(&opts));
    }
    options
}

/// The TLS context of a connection to a TLS backend: ALPN `alpn`, the SNI of `tls` and, when it
/// asks for validation, the backend's certificate verified against the CA certificates of its
/// secret (by SDS: a CA Secret changed is a secret update, not a new cluster) and a DNS subject
/// alternative name equal to the subject name, or one of the validation's subject alternative
/// names when it lists some; when `tls` names a client certificate, Envoy presents it (by SDS).
fn upstream_tls_context(alpn: &str, tls: Option<&UpstreamTls>) -> UpstreamTlsContext {
    let matcher = |san_type: SanType, value: &str| SubjectAltNameMatcher {
        san_type: san_type as i32,
        matcher: Some(StringMatcher {
            match_pattern: Some(MatchPattern::Exact(value.to_string())),
            ..Default::default()
        }),
        ..Default::default()
    };
    let validation = tls.and_then(|t| t.validation.as_ref()).map(|v| {
        let sans = match v.subject_alt_names.is_empty() {
            true => vec![matcher(SanType::Dns, &v.subject_name)],
            false => (v.subject_alt_names.iter())
                .map(|san| match san {
                    SubjectAltName::Dns(h) => matcher(SanType::Dns, h),
                    SubjectAltName::Uri(u) => matcher(SanType::Uri, u),
                })
                .collect(),
        };
        ValidationContextType::CombinedValidationContext(CombinedCertificateValidationContext {
            default_validation_context: Some(CertificateValidationContext {
                match_typed_subject_alt_names: sans,
                ..Default::default()
            }),
            validation_context_sds_secret_config: Some(SdsSecretConfig {
                name: v.ca_secret.clone(),
                sds_config: Some(ads_config_source()),
            }),
            ..Default::default()
        })
    });
    UpstreamTlsContext {
        common_tls_context: Some(CommonTlsContext {
            alpn_protocols: vec![alpn.to_string()],
            validation_context_type: validation,
            tls_certificate_sds_secret_configs: (tls.and_then(|t| t.client_secret.as_ref()))
                .map(|name| SdsSecretConfig {
                    name: name.clone(),
                    sds_config: Some(ads_config_source()),
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }),
        sni: tls.map(|t| t.sni.clone()).unwrap_or_default(),
        ..Default::default()
    }
}

pub fn build_load_assignment(c: &Cluster) -> ClusterLoadAssignment {
    ClusterLoadAssignment {
        cluster_name: String::from(&*c.name),
        endpoints: if c.endpoints.is_empty() {
            Vec::new()
        } else {
            vec![LocalityLbEndpoints {
                lb_endpoints: c
                    .endpoints
                    .iter()
                    .map(|e| lb_endpoint(e.address, e.port))
                    .collect(),
                ..Default::default()
            }]
        },
        ..Default::default()
    }
}

/// One upstream address of a load assignment.
fn lb_endpoint(ip: IpAddr, port: u16) -> LbEndpoint {
    LbEndpoint {
        host_identifier: Some(HostIdentifier::Endpoint(EnvoyEndpoint {
            address: Some(Address {
                address: Some(address::Address::SocketAddress(SocketAddress {
                    address: {
                        let mut a = String::with_capacity(15);
                        push_ip(&mut a, ip);
                        a
                    },
                    port_specifier: Some(PortSpecifier::PortValue(u32::from(port))),
                    ..Default::default()
                })),
            }),
            ..Default::default()
        })),
        ..Default::default()
    }
}

/// Encodes load assignments as `build_load_assignment(c).encode_to_vec()` does, byte for byte,
/// without the message: each endpoint's nested messages (lb endpoint, endpoint, address, socket
/// address) are measured once, innermost first, and written in one pass, where prost measures
/// each level once per level above it ([`wire_encode::put_lb_endpoint`]). An endpoint of a
/// Service sets two fields only, its address and port. The load assignment is the cluster's
/// name and the one locality, which holds nothing but its endpoints
/// ([`wire_encode::load_assignment`]).
#[derive(Default)]
pub struct LoadAssignmentBytes {
    /// The address text of the endpoint being written (IPv6; IPv4 texts are written on the
    /// stack).
    ip: String,
    /// The locality's encoding: its endpoints, each as a field.
    locality: Vec<u8>,
}

impl LoadAssignmentBytes {
    pub fn encode(&mut self, c: &Cluster) -> Vec<u8> {
        self.locality.clear();
        // Room for every endpoint of IPv4 (ten bytes before the address, at most fifteen of
        // address, at most four of port), so the endpoints are written without growing it.
        self.locality.reserve(c.endpoints.len() * 29);
        for e in &c.endpoints {
            match e.address {
                IpAddr::V4(v4) => {
                    let mut text = [0; 15];
                    let len = ipv4_text(v4, &mut text);
                    wire_encode::put_lb_endpoint(&text[..len], e.port, &mut self.locality);
                }
                ip => {
                    self.ip.clear();
                    push_ip(&mut self.ip, ip);
                    wire_encode::put_lb_endpoint(self.ip.as_bytes(), e.port, &mut self.locality);
                }
            }
        }
        // No endpoints, no locality; with endpoints its bytes are never empty.
        wire_encode::load_assignment(&c.name, &self.locality)
    }
}

/// Appends an address as `Display` writes it (IPv4 through [`ipv4_text`]).
fn push_ip(out: &mut String, ip: IpAddr) {
    match ip {
        IpAddr::V4(v4) => {
            let mut text = [0; 15];
            let len = ipv4_text(v4, &mut text);
            // Digits and dots only.
            out.extend(text[..len].iter().map(|&b| char::from(b)));
        }
        IpAddr::V6(_) => {
            let _ = write!(out, "{ip}");
        }
    }
}

/// Writes an IPv4 address as `Display` writes it into `text` and returns its length. Nearly
/// every endpoint is one, written digit by digit into bytes: the formatting machinery took a
/// tenth of encoding a 50,000-endpoint cluster set, and pushing the digits onto a `String` one
/// character at a time most of what was left of the address's cost.
fn ipv4_text(ip: std::net::Ipv4Addr, text: &mut [u8; 15]) -> usize {
    let mut len = 0;
    for (i, o) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            text[len] = b'.';
            len += 1;
        }
        if o >= 100 {
            text[len] = b'0' + o / 100;
            len += 1;
        }
        if o >= 10 {
            text[len] = b'0' + o / 10 % 10;
            len += 1;
        }
        text[len] = b'0' + o % 10;
        len += 1;
    }
    len
}

pub fn build_secret(s: &TlsSecret) -> Secret {
    let inline = |v: &str| DataSource {
        specifier: Some(Specifier::InlineString(v.to_string())),
        ..Default::default()
    };
    let secret = match s.kind {
        SecretKind::Certificate | SecretKind::ClientCertificate => {
            secret::Type::TlsCertificate(TlsCertificate {
                certificate_chain: Some(inline(&s.cert_pem)),
                private_key: Some(inline(&s.key_pem)),
                ..Default::default()
            })
        }
        SecretKind::TrustedCa => secret::Type::ValidationContext(CertificateValidationContext {
            trusted_ca: Some(inline(&s.cert_pem)),
            ..Default::default()
        }),
    };
    Secret {
        name: s.name.clone(),
        r#type: Some(secret),
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;
    use sluice_core::dag::Endpoint;

    #[test]
    fn endpoint_bytes_are_prosts_whatever_their_lengths() {
        // Addresses are at most 39 characters, so every length takes one byte; the general
        // path of `put_lb_endpoint` is checked with longer (and empty) address texts.
        let long = "a".repeat(200);
        for (ip, port) in [("10.1.2.3", 80), ("", 0), (long.as_str(), u16::MAX)] {
            let mut endpoint = lb_endpoint(IpAddr::V4(Ipv4Addr::UNSPECIFIED), port);
            if let Some(HostIdentifier::Endpoint(e)) = endpoint.host_identifier.as_mut()
                && let Some(address::Address::SocketAddress(s)) =
                    e.address.as_mut().and_then(|a| a.address.as_mut())
            {
                s.address = ip.to_string();
            }
            let want = LocalityLbEndpoints {
                lb_endpoints: vec![endpoint],
                ..Default::default()
            };
            let mut got = Vec::new();
            wire_encode::put_lb_endpoint(ip.as_bytes(), port, &mut got);
            assert_eq!(got, want.encode_to_vec(), "{ip:?}");
        }
    }

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

    /// Passive health checking ejects after the consecutive 5xx only (no success-rate
    /// ejection), and may eject one host of two (Envoy's default cap of 10% ejects none of
    /// fewer than 10 hosts).
    #[test]
    fn outlier_detection_is_consecutive_5xx_and_may_eject_half_the_hosts() {
        let mut c = crate::translate::tests::mk_cluster("svc", 80);
        c.outlier_detection = Some(OutlierDetection { consecutive_5xx: 3 });
        let o = build_cluster(&c).outlier_detection.unwrap();
        assert_eq!(o.consecutive_5xx.map(|v| v.value), Some(3));
        assert_eq!(o.max_ejection_percent.map(|v| v.value), Some(50));
        assert_eq!(o.enforcing_success_rate.map(|v| v.value), Some(0));
        // Envoy's defaults otherwise: every threshold reached ejects, for 30 s at first.
        assert_eq!(o.enforcing_consecutive_5xx, None);
        assert_eq!(o.base_ejection_time, None);
        c.outlier_detection = None;
        assert_eq!(build_cluster(&c).outlier_detection, None);
    }

    fn health_check(path: &str) -> HealthCheckPolicy {
        HealthCheckPolicy {
            path: path.into(),
            host: "probe.example".into(),
            interval: Duration::from_secs(5),
            timeout: Duration::from_millis(1500),
            unhealthy_threshold: 3,
            healthy_threshold: 2,
        }
    }

    /// TLS backends' settings (SNI, a verified certificate) are settings like the others: the
    /// clusters of a Service with and without them encode as prost encodes them.
    #[test]
    fn cluster_bytes_of_tls_backends_are_prosts_encoding() {
        use sluice_core::dag::{UpstreamTls, UpstreamValidation};
        let tls = |sni: &str, ca: Option<&str>| {
            Some(std::sync::Arc::new(UpstreamTls {
                sni: sni.into(),
                validation: ca.map(|ca| UpstreamValidation {
                    ca_secret: ca.into(),
                    subject_name: sni.into(),
                    subject_alt_names: Vec::new(),
                }),
                client_secret: None,
            }))
        };
        let mut clusters = Vec::new();
        for protocol in [UpstreamProtocol::Https, UpstreamProtocol::H2] {
            for upstream_tls in [
                None,
                tls("api.web.svc", None),
                tls("api.example.com", Some("web/ca/ca.crt")),
                tls("api.example.com", Some("web/other/ca.crt")),
            ] {
                clusters.push(Cluster {
                    name: "web/api/443".into(),
                    service: sluice_core::dag::ServiceSpan::new("web", "api"),
                    port: 443,
                    protocol,
                    lb: LbStrategy::RoundRobin,
                    health_check: None,
                    outlier_detection: None,
                    upstream_tls,
                    endpoints: Default::default(),
                });
            }
        }
        let mut bytes = ClusterBytes::default();
        for c in clusters.iter().chain(clusters.iter().rev()) {
            assert_eq!(bytes.encode(c), build_cluster(c).encode_to_vec(), "{c:?}");
        }
        assert_eq!(bytes.encoded.len(), clusters.len(), "one encoding each");
    }

    /// Every combination of settings, under names whose length takes one or two bytes (and the
    /// empty name, which prost leaves out), encoded by one `ClusterBytes` in two orders: the
    /// bytes are prost's own encoding of `build_cluster`'s message each time.
    #[test]
    fn cluster_bytes_are_prosts_encoding_of_the_cluster() {
        let mut clusters = Vec::new();
        let long = "n".repeat(200);
        for lb in [
            LbStrategy::RoundRobin,
            LbStrategy::WeightedLeastRequest,
            LbStrategy::Random,
        ] {
            for protocol in [
                UpstreamProtocol::Http,
                UpstreamProtocol::Https,
                UpstreamProtocol::H2c,
                UpstreamProtocol::H2,
                UpstreamProtocol::Tcp,
            ] {
                for health_check in [None, Some(health_check("/a")), Some(health_check("/b"))] {
                    for outlier_detection in [None, Some(OutlierDetection { consecutive_5xx: 7 })] {
                        for name in ["web/app/80", long.as_str(), ""] {
                            clusters.push(Cluster {
                                name: name.into(),
                                service: sluice_core::dag::ServiceSpan::new("web", "app"),
                                port: 80,
                                protocol,
                                lb,
                                health_check: health_check.clone().map(Box::new),
                                outlier_detection: outlier_detection.clone(),
                                upstream_tls: None,
                                endpoints: vec![Endpoint {
                                    address: "10.0.0.1".parse().unwrap(),
                                    port: 8080,
                                }]
                                .into(),
                            });
                        }
                    }
                }
            }
        }
        // More settings (90) than are held: each is encoded again once it has been let go.
        let mut bytes = ClusterBytes::default();
        let backwards = clusters.iter().rev();
        for c in clusters.iter().chain(backwards) {
            let want = build_cluster(c).encode_to_vec();
            assert_eq!(bytes.encode(c), want, "{c:?}");
            assert!(bytes.encoded.len() <= ClusterBytes::HELD);
        }
        let decoded = EnvoyCluster::decode(&bytes.encode(&clusters[1])[..]).unwrap();
        assert_eq!(decoded.name, long);

        // Clusters of one settings, then of a few alternating: one encoding each.
        let mut bytes = ClusterBytes::default();
        let of = |i: usize| &clusters[i * 3 * 2 * 3];
        for i in [0, 0, 0, 1, 2, 1, 2, 0, 1] {
            assert_eq!(bytes.encode(of(i)), build_cluster(of(i)).encode_to_vec());
        }
        assert_eq!(bytes.encoded.len(), 3);
        assert!(
            bytes.encoded[0].0.are_those_of(of(1)),
            "the last used first"
        );
    }
}
