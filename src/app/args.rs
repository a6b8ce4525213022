//! The flags of `sluice serve`: what each role runs with, and the webhook's configuration they
//! select.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

use crate::webhook::{AdmissionSettings, Limits, Metrics, PathType, WebhookConfig};

/// What a `sluice serve` process does (`--role`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Role {
    /// Everything: watch every kind (TLS Secrets included), feed Envoy over xDS, write status
    /// (the leader), and serve the webhook with --webhook-address.
    All,
    /// The admission webhook alone (cluster mode): watch only what the webhook's index reads
    /// (IngressRoutes, Routes, IngressClasses, GatewayClasses, Gateways; no Secrets), serve the
    /// webhook, its health port and /metrics. No xDS, no status writes, no leader election.
    Webhook,
}

/// Flags of `sluice serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
    /// `all`: the whole control plane; `webhook`: the admission webhook alone, in a process that
    /// watches no Secrets and so can run under a ServiceAccount that cannot read them
    /// (docs/webhook.md, "Two layouts"). Needs --webhook-address; cluster mode only.
    #[arg(long, value_enum, default_value_t = Role::All)]
    pub role: Role,

    /// Standalone mode: read objects from this directory (reloaded on change) instead of a cluster.
    #[arg(long, value_name = "DIR")]
    pub manifests: Option<PathBuf>,

    /// Address of the xDS (ADS) gRPC server.
    #[arg(long, default_value = "127.0.0.1:8001")]
    pub xds_address: SocketAddr,
    /// CA that signs Envoy client certificates; with --xds-cert/--xds-key, xDS requires mTLS.
    #[arg(long, value_name = "FILE", requires_all = ["xds_cert", "xds_key"])]
    pub xds_ca: Option<PathBuf>,
    /// xDS server certificate (PEM).
    #[arg(long, value_name = "FILE", requires = "xds_key")]
    pub xds_cert: Option<PathBuf>,
    /// xDS server private key (PEM).
    #[arg(long, value_name = "FILE", requires = "xds_cert")]
    pub xds_key: Option<PathBuf>,
    /// Serve xDS over TLS without client authentication (--xds-cert without --xds-ca): every
    /// client that reaches --xds-address is served every route and every TLS private key Envoy
    /// gets. Refused unless this flag says it is meant.
    #[arg(long, requires = "xds_cert", conflicts_with = "xds_ca")]
    pub xds_allow_unauthenticated_clients: bool,

    /// Address Envoy's HTTP and HTTPS listeners bind.
    #[arg(long, default_value = "0.0.0.0")]
    pub listen_address: String,
    /// Port of Envoy's HTTP listener.
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Port of Envoy's HTTPS listener.
    #[arg(long, default_value_t = 8443)]
    pub https_port: u16,
    /// Other ports Envoy listens on (its statistics and readiness port, an admin port),
    /// comma-separated: a Gateway's TCP listener cannot have them.
    #[arg(long, value_delimiter = ',', value_name = "PORTS")]
    pub envoy_reserved_ports: Vec<u16>,
    /// Give every Gateway of sluice's class an address of its own from this pool (networks in
    /// CIDR notation or addresses, comma-separated, e.g. 127.0.1.0/24): Envoy listens on each
    /// listener's port at its Gateway's address, and the Gateway's status.addresses carries it.
    /// Without it, every Gateway's HTTP and HTTPS listeners share Envoy's HTTP and HTTPS
    /// listeners (docs/gateway-api.md, "Addresses").
    #[arg(long, value_name = "CIDRS")]
    pub gateway_addresses: Option<crate::dag::addresses::AddressPool>,
    /// Format of Envoy's access log, a line per request on every listener: json (one JSON
    /// object per line), envoy (Envoy's default text format) or off.
    #[arg(long, value_enum, default_value_t = crate::translate::access_log::AccessLogFormat::Json)]
    pub access_log_format: crate::translate::access_log::AccessLogFormat,
    /// Where Envoy writes its access log: an absolute path on Envoy's machine; /dev/stdout and
    /// /dev/stderr are Envoy's own streams.
    #[arg(long, default_value = crate::translate::access_log::DEFAULT_ACCESS_LOG_PATH,
          value_parser = crate::translate::access_log::parse_access_log_path)]
    pub access_log_path: String,
    /// Every connection to Envoy's listeners starts with a PROXY protocol header (v1 or v2), as
    /// a load balancer in front of Envoy sends it: the client's address comes from it. A
    /// connection without one is closed.
    #[arg(long)]
    pub use_proxy_protocol: bool,
    /// Proxies in front of Envoy that append to X-Forwarded-For and are trusted to: the client
    /// is the address that many places from the header's right end (0: the connection's peer).
    #[arg(long, default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=32))]
    pub num_trusted_hops: u32,
    /// Spread the plain-HTTP hosts over this many route configurations, chosen per request by a
    /// hash of its host: a change of one host makes Envoy rebuild 1/N of its route table, for a
    /// few microseconds of Envoy's CPU on every plain-HTTP request (docs/xds.md, "Route
    /// shards"). 1 keeps one route configuration; `auto` uses 16 from 2,000 hosts on and goes
    /// back to one below 1,000.
    #[arg(long, default_value = "auto", value_name = "auto|N",
          value_parser = clap::value_parser!(crate::translate::RouteShards))]
    pub http_route_shards: crate::translate::RouteShards,
    /// Trace requests: Envoy sends its spans over OTLP/gRPC (plain text) to the collector at
    /// HOST:PORT, as Envoy reaches it.
    #[arg(long, value_name = "HOST:PORT", value_parser = crate::translate::trace::parse_collector)]
    pub tracing_otlp_address: Option<String>,
    /// service.name of Envoy's spans.
    #[arg(long, default_value = crate::translate::trace::DEFAULT_SERVICE_NAME,
          requires = "tracing_otlp_address")]
    pub tracing_service_name: String,
    /// Percentage of requests that start a trace when the client sent no sampling decision (a
    /// `traceparent`); 0 to 100.
    #[arg(long, default_value = "100", value_parser = crate::translate::trace::parse_sampling_percent,
          requires = "tracing_otlp_address")]
    pub tracing_sampling_percent: u32,

    /// Serve the admission webhook (HTTPS) on this address.
    #[arg(long, requires_all = ["webhook_cert", "webhook_key"])]
    pub webhook_address: Option<SocketAddr>,
    /// Webhook serving certificate (PEM); reloaded when the file changes.
    #[arg(long, value_name = "FILE")]
    pub webhook_cert: Option<PathBuf>,
    /// Webhook private key (PEM); reloaded when the file changes.
    #[arg(long, value_name = "FILE")]
    pub webhook_key: Option<PathBuf>,
    /// Serve the webhook's /healthz and /readyz over plain HTTP on this address too (the
    /// kubelet's probes), apart from the HTTPS port's clients.
    #[arg(long, requires = "webhook_address")]
    pub webhook_health_address: Option<SocketAddr>,
    /// Time a webhook request has from its headers to its answer (reading its body, waiting for
    /// room, rechecks included); also bounds the TLS handshake and HTTP/1 header read. At most
    /// the webhook configuration's timeoutSeconds (1s to 30s), e.g. 5s.
    #[arg(long, default_value = "5s", value_name = "DURATION",
          value_parser = parse_request_timeout)]
    pub webhook_request_timeout: humantime::Duration,
    /// Request bodies the webhook holds in memory at once, all requests together, in MiB (one
    /// client address may hold a quarter, at least 8 MiB); a request finding no room waits
    /// within its timeout, then gets 503.
    #[arg(long, default_value_t = 32, value_name = "MIB",
          value_parser = clap::value_parser!(u32).range(8..=4095))]
    pub webhook_max_buffered_mib: u32,
    /// Admission reviews decoded and checked at once; more wait within their timeout, then get
    /// 503.
    #[arg(long, default_value_t = 16, value_name = "N",
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub webhook_max_concurrent_reviews: u32,
    /// HTTP/2 streams one webhook connection may have open; more are refused (REFUSED_STREAM).
    #[arg(long, default_value_t = crate::webhook::limits::DEFAULT_HTTP2_MAX_STREAMS,
          value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub webhook_http2_max_streams: u32,
    /// pathType the mutating webhook gives Ingress paths that have none.
    #[arg(long, default_value = "ImplementationSpecific", value_parser = ["Exact", "Prefix", "ImplementationSpecific"])]
    pub default_path_type: String,
    /// ingressClassName the mutating webhook gives Ingresses that have none, when no IngressClass is
    /// marked default.
    #[arg(long)]
    pub default_ingress_class: Option<String>,
    /// The Gateway API controllerName that is sluice's: GatewayClasses naming it, their Gateways
    /// and the HTTPRoutes attached to those are routed and get status; the validating webhook
    /// leaves alone a GatewayClass naming another controller, the Gateways of such a class and
    /// the routes whose every parent is one of those Gateways (another implementation may accept
    /// what sluice would refuse).
    #[arg(long, default_value = crate::webhook::DEFAULT_GATEWAY_CONTROLLER_NAME)]
    pub gateway_controller_name: String,

    /// Namespaces where root IngressRoutes and Routes may live (comma-separated); all when empty.
    #[arg(long, value_delimiter = ',')]
    pub root_namespaces: Vec<String>,
    /// The ingress class this sluice serves.
    #[arg(long, default_value = crate::dag::DEFAULT_INGRESS_CLASS)]
    pub ingress_class_name: String,

    /// Namespace sluice runs in (its Lease lives here; its webhooks skip it).
    #[arg(long, env = "POD_NAMESPACE", default_value = "sluice-system")]
    pub namespace: String,
    /// Identity of this replica in leader election.
    #[arg(long, env = "POD_NAME")]
    pub identity: Option<String>,
    /// Name of the coordination.k8s.io Lease used for leader election.
    #[arg(long, default_value = "sluice-leader")]
    pub lease_name: String,
    /// Address written to Ingress status.loadBalancer (IP or host name).
    #[arg(long)]
    pub ingress_status_address: Option<String>,
    /// Envoy's Service (namespace/name) whose load-balancer address goes to Ingress status.
    #[arg(long)]
    pub envoy_service: Option<String>,
    /// Keep a headless Service `sluice-<gateway>` per accepted Gateway in its namespace,
    /// labelled with the Gateway's name and its spec.infrastructure labels and annotations, with
    /// an EndpointSlice of the Gateway's own address (cluster mode, leader only; needs the RBAC
    /// of config/rbac.yaml to write Services and EndpointSlices; docs/gateway-api.md).
    #[arg(long)]
    pub gateway_services: bool,

    /// Status writes per second on average (cluster mode).
    #[arg(long, default_value_t = crate::k8s::DEFAULT_STATUS_QPS)]
    pub status_write_qps: f64,
    /// Status writes allowed at once above the average (cluster mode).
    #[arg(long, default_value_t = crate::k8s::DEFAULT_STATUS_BURST)]
    pub status_write_burst: u32,
    /// Status writes in flight at once (cluster mode).
    #[arg(long, default_value_t = crate::k8s::DEFAULT_STATUS_CONCURRENCY,
          value_parser = clap::value_parser!(u32).range(1..=256))]
    pub status_write_concurrency: u32,

    /// Serve Prometheus metrics on this address.
    #[arg(long)]
    pub metrics_address: Option<SocketAddr>,
}

impl ServeArgs {
    /// Refuses TLS without client authentication on the xDS server unless asked for: a server
    /// certificate without a CA for client certificates authenticates sluice to Envoy, but
    /// serves any client — and Envoy's configuration holds the private keys of every TLS host.
    pub fn check_xds_client_auth(&self) -> Result<(), String> {
        if self.xds_cert.is_some()
            && self.xds_ca.is_none()
            && !self.xds_allow_unauthenticated_clients
        {
            return Err(
                "--xds-cert without --xds-ca serves xDS to any client that connects, and \
                 xDS carries every TLS private key Envoy terminates with: add --xds-ca FILE (the \
                 CA that signs Envoy's client certificates) so that only Envoys are served, or \
                 pass --xds-allow-unauthenticated-clients to serve without client \
                 authentication on purpose"
                    .to_string(),
            );
        }
        Ok(())
    }

    /// The DAG options these flags select.
    pub fn dag_options(&self) -> crate::dag::Options {
        crate::dag::Options {
            root_namespaces: split_list(&self.root_namespaces),
            ingress_class_name: self.ingress_class_name.clone(),
            gateway_controller_name: self.gateway_controller_name.clone(),
            reserved_ports: reserved_ports(
                &self.listen_address,
                [self.http_port, self.https_port],
                &self.envoy_reserved_ports,
                self.gateway_addresses.is_some(),
            ),
            gateway_addresses: self.gateway_addresses.clone(),
            gateway_services: self.gateway_services && self.manifests.is_none(),
        }
    }
}

impl ServeArgs {
    /// The Envoy listener settings these flags select.
    pub fn translate_options(&self) -> crate::translate::Options {
        crate::translate::Options {
            listen_address: self.listen_address.clone(),
            http_port: self.http_port,
            https_port: self.https_port,
            access_log: crate::translate::access_log::AccessLog {
                format: self.access_log_format,
                path: self.access_log_path.clone(),
            },
            proxy_protocol: self.use_proxy_protocol,
            num_trusted_hops: self.num_trusted_hops,
            route_shards: self.http_route_shards,
            tracing: self.tracing_otlp_address.as_ref().map(|collector| {
                crate::translate::trace::Tracing {
                    collector: collector.clone(),
                    service_name: self.tracing_service_name.clone(),
                    sampling_per_million: self.tracing_sampling_percent,
                }
            }),
        }
    }
}

/// `--webhook-request-timeout`: a duration from 1s to 30s (the range of a webhook's
/// timeoutSeconds).
fn parse_request_timeout(s: &str) -> Result<humantime::Duration, String> {
    let d: humantime::Duration = s.parse().map_err(|e| format!("{e}"))?;
    let max = crate::webhook::limits::MAX_REQUEST_TIMEOUT;
    if *d < std::time::Duration::from_secs(1) || *d > max {
        return Err(format!("must be between 1s and {}s", max.as_secs()));
    }
    Ok(d)
}

/// The webhook configuration `sluice serve` flags select; None without `--webhook-address`.
pub fn webhook_config(args: &ServeArgs, metrics: Metrics) -> Option<WebhookConfig> {
    let address = args.webhook_address?;
    Some(WebhookConfig {
        address,
        cert_path: args.webhook_cert.clone().unwrap_or_default(),
        key_path: args.webhook_key.clone().unwrap_or_default(),
        settings: AdmissionSettings {
            // clap restricts the flag to the three values; the fallback is the seed 001 default.
            default_path_type: PathType::parse(&args.default_path_type)
                .unwrap_or(PathType::ImplementationSpecific),
            default_ingress_class: args.default_ingress_class.clone(),
            gateway_controller_name: Some(args.gateway_controller_name.clone()),
        },
        metrics,
        reload_interval: Duration::from_secs(1),
        limits: Limits {
            request_timeout: args.webhook_request_timeout.into(),
            max_buffered_bytes: args.webhook_max_buffered_mib as usize * 1024 * 1024,
            max_concurrent_reviews: args.webhook_max_concurrent_reviews as usize,
            http2_max_streams: args.webhook_http2_max_streams,
            ..Limits::default()
        },
        health_address: args.webhook_health_address,
    })
}

/// Comma-separated list flag values, flattened and trimmed.
pub fn split_list(values: &[String]) -> Vec<String> {
    values
        .iter()
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(String::from)
        .collect()
}

/// The ports a Gateway's listener cannot have, as Envoy's own listeners bind them: the HTTP and
/// HTTPS listeners' (`shared`), unless Gateways have addresses of their own and those listeners
/// bind one address (not every address, which Gateways' addresses are among), and `others`.
pub fn reserved_ports(
    listen_address: &str,
    shared: [u16; 2],
    others: &[u16],
    own_addresses: bool,
) -> Vec<u16> {
    let everywhere = listen_address
        .parse::<std::net::IpAddr>()
        .is_ok_and(|ip| ip.is_unspecified());
    let shared = shared.into_iter().filter(|_| everywhere || !own_addresses);
    shared.chain(others.iter().copied()).collect()
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    #[derive(Parser)]
    struct Serve {
        #[command(flatten)]
        args: super::ServeArgs,
    }

    #[test]
    fn envoys_other_ports_are_reserved_beside_its_http_and_https_ports() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("serve").chain(args.iter().copied());
            Serve::try_parse_from(argv)
                .unwrap()
                .args
                .dag_options()
                .reserved_ports
        };
        assert_eq!(parse(&[]), [8080, 8443]);
        assert_eq!(
            parse(&["--http-port=80", "--envoy-reserved-ports=8002,9901"]),
            [80, 8443, 8002, 9901]
        );
        let argv = ["serve", "--envoy-reserved-ports=stats"];
        assert!(Serve::try_parse_from(argv).is_err());
    }

    #[test]
    fn the_role_is_all_unless_asked() {
        let parse = |args: &[&str]| {
            let argv = std::iter::once("serve").chain(args.iter().copied());
            Serve::try_parse_from(argv).map(|s| s.args.role)
        };
        assert_eq!(parse(&[]).unwrap(), super::Role::All);
        assert_eq!(parse(&["--role=webhook"]).unwrap(), super::Role::Webhook);
        assert!(parse(&["--role=xds"]).is_err());
    }
}

#[cfg(test)]
mod webhook_config_tests {
    use std::time::Duration;

    use super::*;
    use crate::webhook::{AdmissionSettings, Limits, Metrics, WebhookConfig};

    fn settings(extra: &[&str]) -> AdmissionSettings {
        config(extra).expect("a webhook address").settings
    }

    fn config(extra: &[&str]) -> Result<WebhookConfig, String> {
        use clap::Parser;
        let args = [
            "sluice",
            "serve",
            "--webhook-address",
            "127.0.0.1:8443",
            "--webhook-cert",
            "tls.crt",
            "--webhook-key",
            "tls.key",
        ];
        let cli =
            crate::cli::Cli::try_parse_from(args.iter().chain(extra)).map_err(|e| e.to_string())?;
        let crate::cli::Command::Serve(serve) = cli.command else {
            panic!("not serve");
        };
        webhook_config(&serve, Metrics::new()).ok_or_else(|| "no webhook".into())
    }

    #[test]
    fn serve_flags_set_the_limits() {
        let c = config(&[]).unwrap();
        assert_eq!(c.limits, Limits::default());
        assert_eq!(c.health_address, None);
        let c = config(&[
            "--webhook-request-timeout=7s",
            "--webhook-max-buffered-mib=64",
            "--webhook-max-concurrent-reviews=4",
            "--webhook-http2-max-streams=8",
            "--webhook-health-address=127.0.0.1:9444",
        ])
        .unwrap();
        assert_eq!(c.limits.request_timeout, Duration::from_secs(7));
        assert_eq!(c.limits.max_buffered_bytes, 64 << 20);
        assert_eq!(c.limits.max_buffered_bytes_per_peer(), 16 << 20);
        assert_eq!(c.limits.max_concurrent_reviews, 4);
        assert_eq!(c.limits.http2_max_streams, 8);
        assert_eq!(c.health_address, Some("127.0.0.1:9444".parse().unwrap()));
        for bad in [
            "--webhook-request-timeout=31s",
            "--webhook-request-timeout=500ms",
            "--webhook-max-buffered-mib=4",
            "--webhook-max-concurrent-reviews=0",
        ] {
            assert!(config(&[bad]).is_err(), "{bad}");
        }
    }

    #[test]
    fn serve_scopes_gateway_api_admission_to_its_controller_name() {
        assert_eq!(
            settings(&[]).gateway_controller_name.as_deref(),
            Some("sluice.dev/gateway-controller")
        );
        let flag = ["--gateway-controller-name", "example.com/gw"];
        assert_eq!(
            settings(&flag).gateway_controller_name.as_deref(),
            Some("example.com/gw")
        );
    }
}
