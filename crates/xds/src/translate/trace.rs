//! Request tracing: Envoy's OpenTelemetry tracer on every HTTP connection manager, exporting spans
//! over OTLP/gRPC to a collector (`sluice serve --tracing-otlp-address`; docs/observability.md).

use envoy_types::pb::envoy::config::core::v3::{
    GrpcService,
    grpc_service::{GoogleGrpc, TargetSpecifier},
};
use envoy_types::pb::envoy::config::trace::v3::{OpenTelemetryConfig, tracing::Http, tracing::http};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::http_connection_manager::Tracing as HcmTracing;
use envoy_types::pb::envoy::r#type::v3::Percent;

use super::any;

/// The service name of Envoy's spans unless told otherwise.
pub const DEFAULT_SERVICE_NAME: &str = "sluice-envoy";
/// The statistics prefix of Envoy's gRPC client to the collector (`cluster.<prefix>.*` is not
/// used: the client is Envoy's Google gRPC client, which needs no cluster).
pub const COLLECTOR_STAT_PREFIX: &str = "otel_collector";

/// Where and how Envoy sends its spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tracing {
    /// `host:port` of an OTLP/gRPC collector, as Envoy reaches it (plain-text gRPC).
    pub collector: String,
    /// `service.name` of the spans.
    pub service_name: String,
    /// The share of requests without a sampling decision of their own that start a trace, in
    /// millionths (1,000,000 = every request).
    pub sampling_per_million: u32,
}

/// The `tracing` of an HTTP connection manager.
pub fn hcm_tracing(t: &Tracing) -> HcmTracing {
    let otel = OpenTelemetryConfig {
        grpc_service: Some(GrpcService {
            target_specifier: Some(TargetSpecifier::GoogleGrpc(GoogleGrpc {
                target_uri: t.collector.clone(),
                stat_prefix: COLLECTOR_STAT_PREFIX.to_string(),
                ..Default::default()
            })),
            ..Default::default()
        }),
        service_name: t.service_name.clone(),
        ..Default::default()
    };
    HcmTracing {
        random_sampling: Some(Percent {
            value: f64::from(t.sampling_per_million) / 10_000.0,
        }),
        provider: Some(Http {
            name: "envoy.tracers.opentelemetry".to_string(),
            config_type: Some(http::ConfigType::TypedConfig(any(&otel))),
        }),
        ..Default::default()
    }
}

/// Checks a `--tracing-otlp-address`: `host:port`, a name or an IP address (IPv6 in brackets) and
/// a port, without a scheme.
pub fn parse_collector(s: &str) -> Result<String, String> {
    let fix = "give the collector as HOST:PORT, such as otel-collector.observability:4317";
    if s.contains("://") {
        return Err(format!(
            "{s:?} has a scheme; {fix} (Envoy speaks plain-text gRPC to it)"
        ));
    }
    let Some((host, port)) = s.rsplit_once(':') else {
        return Err(format!("{s:?} has no port; {fix}"));
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 => {}
        _ => return Err(format!("{s:?}: port {port:?} is not 1-65535; {fix}")),
    }
    let bracketed = host.starts_with('[') && host.ends_with(']');
    let host_ok = if bracketed {
        host[1..host.len() - 1]
            .parse::<std::net::Ipv6Addr>()
            .is_ok()
    } else {
        !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    if !host_ok {
        return Err(format!(
            "{s:?}: {host:?} is not a host name or IP address; {fix}"
        ));
    }
    Ok(s.to_string())
}

/// Checks a `--tracing-sampling-percent` (0 to 100, steps of a ten-thousandth of a percent) and
/// gives it in millionths.
pub fn parse_sampling_percent(s: &str) -> Result<u32, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok((p * 10_000.0).round() as u32),
        _ => Err(format!(
            "{s:?} is not a percentage from 0 to 100; give e.g. 100 (every request) or 0.5"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn the_tracer_exports_to_the_collector_with_the_sampling_given() {
        let t = hcm_tracing(&Tracing {
            collector: "otel.observability:4317".into(),
            service_name: "edge".into(),
            sampling_per_million: 12_500,
        });
        assert_eq!(t.random_sampling, Some(Percent { value: 1.25 }));
        let provider = t.provider.expect("a provider");
        assert_eq!(provider.name, "envoy.tracers.opentelemetry");
        let Some(http::ConfigType::TypedConfig(any)) = provider.config_type else {
            panic!("typed config expected");
        };
        let otel = OpenTelemetryConfig::decode(any.value.as_slice()).expect("decodes");
        assert_eq!(otel.service_name, "edge");
        let Some(TargetSpecifier::GoogleGrpc(g)) =
            otel.grpc_service.and_then(|g| g.target_specifier)
        else {
            panic!("a Google gRPC target expected");
        };
        assert_eq!(g.target_uri, "otel.observability:4317");
        assert_eq!(g.stat_prefix, COLLECTOR_STAT_PREFIX);
    }

    #[test]
    fn collector_addresses() {
        for ok in [
            "otel:4317",
            "10.0.0.1:4317",
            "[fd00::1]:4317",
            "a.b-c.svc:1",
        ] {
            assert_eq!(parse_collector(ok).as_deref(), Ok(ok));
        }
        for (bad, says) in [
            ("http://otel:4317", "has a scheme"),
            ("otel", "has no port"),
            ("otel:0", "is not 1-65535"),
            ("otel:http", "is not 1-65535"),
            (":4317", "is not a host name"),
            ("[fd00::1:4317", "is not a host name"),
            ("ot el:4317", "is not a host name"),
        ] {
            let e = parse_collector(bad).unwrap_err();
            assert!(e.contains(says) && e.contains("HOST:PORT"), "{bad}: {e}");
        }
    }

    #[test]
    fn sampling_percentages() {
        assert_eq!(parse_sampling_percent("100"), Ok(1_000_000));
        assert_eq!(parse_sampling_percent("0"), Ok(0));
        assert_eq!(parse_sampling_percent("0.5"), Ok(5_000));
        assert_eq!(parse_sampling_percent("0.0001"), Ok(1));
        for bad in ["101", "-1", "ten", "NaN", ""] {
            let e = parse_sampling_percent(bad).unwrap_err();
            assert!(e.contains("from 0 to 100"), "{bad}: {e}");
        }
    }
}
