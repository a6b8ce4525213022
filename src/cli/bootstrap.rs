//! `sluice bootstrap`: writes an Envoy bootstrap pointing at sluice's xDS server.
//!
//! The bootstrap holds one static cluster (`sluice_xds`, HTTP/2 to the xDS address, optionally
//! mTLS) and takes listeners and clusters over ADS; routes, endpoints and secrets follow from
//! them. Envoy's admin interface listens on a unix socket (default) or on 127.0.0.1 only.

use std::path::{Path, PathBuf};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};

/// Name of the static cluster that reaches sluice.
pub const XDS_CLUSTER: &str = "sluice_xds";
/// The largest HTTP/2 frame Envoy takes from sluice's xDS server (SETTINGS_MAX_FRAME_SIZE,
/// which Envoy sets only through `custom_settings_parameters`; HTTP/2's default is 16 KiB). The
/// server writes each DATA frame with a system call of its own, so at 16 KiB a route
/// configuration of 630 KB (6,000 hosts) took some 40 per push and connected Envoy; at 1 MiB it
/// takes one. A frame holds up the connection's other frames (keepalive PINGs) while it is
/// written: 1 MiB is a few milliseconds even at 1 Gbit/s.
pub const XDS_MAX_FRAME_SIZE: u32 = 1 << 20;
/// HTTP/2's identifier of SETTINGS_MAX_FRAME_SIZE (RFC 9113, 6.5.2).
const SETTINGS_MAX_FRAME_SIZE: u32 = 0x5;
/// Admin socket when neither --admin-port nor --admin-socket is given.
pub const DEFAULT_ADMIN_SOCKET: &str = "/tmp/envoy-admin.sock";

/// Flavour of the ADS stream. Delta is the default: a change sends only what changed, and Envoy
/// applied a new route sooner with it than with state of the world (docs/xds.md, "Bootstrap").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum XdsProtocol {
    /// State of the world: listener and cluster responses carry the full set of their type.
    Sotw,
    /// Incremental: only changed and removed resources are sent.
    #[default]
    Delta,
}

#[derive(Debug, Clone, Args)]
pub struct BootstrapArgs {
    /// sluice's xDS server, HOST:PORT.
    #[arg(long)]
    pub xds_address: String,
    /// Where to write the bootstrap (JSON).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// CA that signs the xDS server certificate; with --xds-cert/--xds-key Envoy uses mTLS.
    #[arg(long, value_name = "FILE", requires_all = ["xds_cert", "xds_key"])]
    pub xds_ca: Option<PathBuf>,
    /// Envoy's client certificate for xDS.
    #[arg(long, value_name = "FILE", requires_all = ["xds_ca", "xds_key"])]
    pub xds_cert: Option<PathBuf>,
    /// Envoy's client key for xDS.
    #[arg(long, value_name = "FILE", requires_all = ["xds_ca", "xds_cert"])]
    pub xds_key: Option<PathBuf>,
    /// Envoy admin on loopback at this port (default: a unix socket, see --admin-socket).
    #[arg(long, conflicts_with = "admin_socket")]
    pub admin_port: Option<u16>,
    /// Envoy admin on this unix socket path (default /tmp/envoy-admin.sock).
    #[arg(long, value_name = "PATH")]
    pub admin_socket: Option<PathBuf>,
    /// Envoy node id.
    #[arg(long, default_value = "envoy")]
    pub node_id: String,
    /// Envoy node cluster.
    #[arg(long, default_value = "sluice")]
    pub node_cluster: String,
    /// xDS flavour Envoy speaks to sluice.
    #[arg(long, value_enum, default_value_t = XdsProtocol::Delta)]
    pub xds_protocol: XdsProtocol,
}

/// Why a bootstrap could not be written.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum BootstrapError {
    #[error(
        "--xds-address: {0:?} must be HOST:PORT (a host name, an IPv4 address or a bracketed IPv6 address, and a port 1-65535)"
    )]
    Address(String),
}

/// Splits `HOST:PORT` (`[v6]:PORT` for IPv6) into host and port.
pub fn parse_host_port(s: &str) -> Result<(String, u16), BootstrapError> {
    let err = || BootstrapError::Address(s.to_string());
    let (host, port) = s.rsplit_once(':').ok_or_else(err)?;
    let host = match host.strip_prefix('[') {
        Some(h) => h.strip_suffix(']').ok_or_else(err)?,
        None if host.contains(':') => return Err(err()),
        None => host,
    };
    let port: u16 = port.parse().map_err(|_| err())?;
    if host.is_empty() || port == 0 || host.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(err());
    }
    Ok((host.to_string(), port))
}

fn file(p: &Path) -> Value {
    json!({ "filename": p.display().to_string() })
}

/// The bootstrap as JSON.
pub fn build_bootstrap(args: &BootstrapArgs) -> Result<Value, BootstrapError> {
    let (host, port) = parse_host_port(&args.xds_address)?;
    let is_ip = host.parse::<std::net::IpAddr>().is_ok();
    let admin_address = match (args.admin_port, &args.admin_socket) {
        (Some(p), _) => json!({ "socket_address": { "address": "127.0.0.1", "port_value": p } }),
        (None, Some(path)) => json!({ "pipe": { "path": path.display().to_string() } }),
        (None, None) => json!({ "pipe": { "path": DEFAULT_ADMIN_SOCKET } }),
    };
    let mut xds_cluster = json!({
        "name": XDS_CLUSTER,
        "type": if is_ip { "STATIC" } else { "STRICT_DNS" },
        "connect_timeout": "1s",
        "typed_extension_protocol_options": {
            "envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicit_http_config": { "http2_protocol_options": {
                    "connection_keepalive": { "interval": "30s", "timeout": "5s" },
                    "custom_settings_parameters": [{
                        "identifier": SETTINGS_MAX_FRAME_SIZE,
                        "value": XDS_MAX_FRAME_SIZE
                    }]
                } }
            }
        },
        "load_assignment": {
            "cluster_name": XDS_CLUSTER,
            "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": {
                "socket_address": { "address": host, "port_value": port }
            } } }] }]
        }
    });
    if let (Some(ca), Some(cert), Some(key)) = (&args.xds_ca, &args.xds_cert, &args.xds_key) {
        let mut tls = json!({
            "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
            "common_tls_context": {
                "alpn_protocols": ["h2"],
                "tls_certificates": [{ "certificate_chain": file(cert), "private_key": file(key) }],
                "validation_context": { "trusted_ca": file(ca) }
            }
        });
        if !is_ip {
            tls["sni"] = json!(host);
        }
        xds_cluster["transport_socket"] = json!({
            "name": "envoy.transport_sockets.tls",
            "typed_config": tls
        });
    }
    let ads_source = json!({ "ads": {}, "resource_api_version": "V3" });
    Ok(json!({
        "node": { "id": args.node_id, "cluster": args.node_cluster },
        "admin": { "address": admin_address },
        "dynamic_resources": {
            "ads_config": {
                "api_type": match args.xds_protocol {
                    XdsProtocol::Sotw => "GRPC",
                    XdsProtocol::Delta => "DELTA_GRPC",
                },
                "transport_api_version": "V3",
                "grpc_services": [{ "envoy_grpc": { "cluster_name": XDS_CLUSTER } }],
                "set_node_on_first_message_only": true
            },
            "lds_config": ads_source,
            "cds_config": ads_source
        },
        "static_resources": { "clusters": [xds_cluster] },
        "layered_runtime": layered_runtime(),
        // No periodic flush of the statistics: with thousands of clusters it held Envoy's main
        // thread for tens of milliseconds every 5 s, and an xDS update arriving then waited for
        // it (docs/xds.md, "Bootstrap"). The admin interface flushes them when they are read.
        "stats_flush_on_admin": true
    }))
}

/// [`crate::translate::ENVOY_RUNTIME`] as a static runtime layer, then Envoy's admin layer.
fn layered_runtime() -> Value {
    let values: serde_json::Map<String, Value> = crate::translate::ENVOY_RUNTIME
        .iter()
        .map(|(key, value)| (key.to_string(), json!(value)))
        .collect();
    json!({ "layers": [
        { "name": "sluice", "static_layer": values },
        { "name": "admin", "admin_layer": {} }
    ] })
}

pub fn run(args: BootstrapArgs) -> u8 {
    let bootstrap = match build_bootstrap(&args) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("sluice bootstrap: {e}");
            return 2;
        }
    };
    let text = match serde_json::to_string_pretty(&bootstrap) {
        Ok(t) => t + "\n",
        Err(e) => {
            eprintln!("sluice bootstrap: {e}");
            return 1;
        }
    };
    if let Err(e) = std::fs::write(&args.out, text) {
        eprintln!("sluice bootstrap: {}: {e}", args.out.display());
        return 1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn mk_args(addr: &str) -> BootstrapArgs {
        BootstrapArgs {
            xds_address: addr.to_string(),
            out: PathBuf::from("/dev/null"),
            xds_ca: None,
            xds_cert: None,
            xds_key: None,
            admin_port: None,
            admin_socket: None,
            node_id: "envoy".into(),
            node_cluster: "sluice".into(),
            xds_protocol: XdsProtocol::default(),
        }
    }

    #[test]
    fn addresses() {
        assert_eq!(
            parse_host_port("127.0.0.1:8001"),
            Ok(("127.0.0.1".into(), 8001))
        );
        assert_eq!(parse_host_port("[::1]:8001"), Ok(("::1".into(), 8001)));
        assert_eq!(
            parse_host_port("sluice.sluice-system.svc:8001"),
            Ok(("sluice.sluice-system.svc".into(), 8001))
        );
        assert_eq!(
            parse_host_port("::1:8001").unwrap_err().to_string(),
            "--xds-address: \"::1:8001\" must be HOST:PORT (a host name, an IPv4 address or a bracketed IPv6 address, and a port 1-65535)"
        );
        assert!(parse_host_port("host").is_err());
        assert!(parse_host_port("host:0").is_err());
        assert!(parse_host_port(":80").is_err());
        assert!(parse_host_port("host:99999").is_err());
    }

    #[test]
    fn plain_bootstrap_uses_ads_and_an_admin_socket() {
        let b = build_bootstrap(&mk_args("127.0.0.1:8001")).unwrap();
        assert_eq!(
            b["dynamic_resources"]["ads_config"]["api_type"],
            "DELTA_GRPC"
        );
        assert_eq!(b["dynamic_resources"]["lds_config"]["ads"], json!({}));
        assert_eq!(b["dynamic_resources"]["cds_config"]["ads"], json!({}));
        assert_eq!(b["admin"]["address"]["pipe"]["path"], DEFAULT_ADMIN_SOCKET);
        let c = &b["static_resources"]["clusters"][0];
        assert_eq!(c["type"], "STATIC");
        assert!(c.get("transport_socket").is_none());
        // Envoy takes xDS responses in frames of up to 1 MiB.
        let h2 = &c["typed_extension_protocol_options"]["envoy.extensions.upstreams.http.v3.HttpProtocolOptions"]
            ["explicit_http_config"]["http2_protocol_options"];
        assert_eq!(
            h2["custom_settings_parameters"],
            json!([{ "identifier": 5, "value": 1048576 }])
        );
        // Statistics flushed when read through the admin interface, not on a timer.
        assert_eq!(b["stats_flush_on_admin"], true);
        assert!(b.get("stats_flush_interval").is_none());
        // Envoy's RE2 limit raised to the one sluice's regexes are checked against, the admin
        // runtime layer kept.
        assert_eq!(
            b["layered_runtime"],
            json!({ "layers": [
                { "name": "sluice", "static_layer": {
                    "re2.max_program_size.error_level": crate::translate::RE2_MAX_PROGRAM_SIZE
                } },
                { "name": "admin", "admin_layer": {} }
            ] })
        );
    }

    #[test]
    fn the_command_line_defaults_to_delta_and_takes_sotw() {
        use clap::Parser;
        let parse = |extra: &[&str]| {
            let args = [
                "sluice",
                "bootstrap",
                "--xds-address",
                "127.0.0.1:8001",
                "--out",
                "b.json",
            ];
            let cli = crate::cli::Cli::try_parse_from(args.iter().chain(extra)).unwrap();
            match cli.command {
                crate::cli::Command::Bootstrap(a) => a.xds_protocol,
                other => panic!("{other:?}"),
            }
        };
        assert_eq!(parse(&[]), XdsProtocol::Delta);
        assert_eq!(parse(&["--xds-protocol", "sotw"]), XdsProtocol::Sotw);
    }

    #[test]
    fn admin_port_is_loopback_and_mtls_and_sotw_are_optional() {
        let mut a = mk_args("sluice.example:8001");
        a.admin_port = Some(9901);
        a.xds_protocol = XdsProtocol::Sotw;
        a.xds_ca = Some("/ca.pem".into());
        a.xds_cert = Some("/cert.pem".into());
        a.xds_key = Some("/key.pem".into());
        let b = build_bootstrap(&a).unwrap();
        assert_eq!(
            b["admin"]["address"]["socket_address"],
            json!({"address": "127.0.0.1", "port_value": 9901})
        );
        assert_eq!(b["dynamic_resources"]["ads_config"]["api_type"], "GRPC");
        let c = &b["static_resources"]["clusters"][0];
        assert_eq!(c["type"], "STRICT_DNS");
        let tls = &c["transport_socket"]["typed_config"];
        assert_eq!(tls["sni"], "sluice.example");
        assert_eq!(
            tls["common_tls_context"]["validation_context"]["trusted_ca"]["filename"],
            "/ca.pem"
        );
    }
}
