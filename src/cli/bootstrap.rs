//! `sluice bootstrap`: writes an Envoy bootstrap pointing at sluice's xDS server.
//!
//! The bootstrap holds one static cluster (`sluice_xds`, HTTP/2 to the xDS address, optionally
//! mTLS) and takes listeners and clusters over ADS; routes, endpoints and secrets follow from
//! them. With mTLS, Envoy's client certificate and the CA it trusts come from two files of
//! secrets (file-based SDS) written beside the bootstrap, so that Envoy takes renewed
//! certificates without a restart ([`sds_files`]). Envoy's admin interface listens on a unix socket (default) or on 127.0.0.1 only.
//! Envoy's overload manager bounds its downstream connections and, when given a heap limit, sheds
//! requests before it runs out of memory ([`OverloadArgs`]).

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
    /// Serve Envoy's statistics (`/stats`, `/stats/prometheus`) and readiness (`/ready`) on this
    /// IP:PORT: a listener of their own in front of the admin interface, whose other pages it
    /// does not serve (off by default).
    #[arg(long, value_name = "IP:PORT")]
    pub stats_address: Option<std::net::SocketAddr>,
    #[command(flatten)]
    pub overload: OverloadArgs,
}

/// The connection limit of [`OverloadArgs`] when none is given.
pub const DEFAULT_MAX_CONNECTIONS: u64 = 50_000;
/// Share of the heap limit at which Envoy starts returning free memory to the system.
pub const SHRINK_HEAP_AT: f64 = 0.95;
/// Share of the heap limit from which Envoy answers new requests 503.
pub const STOP_ACCEPTING_REQUESTS_AT: f64 = 0.98;

/// Envoy's overload manager: what Envoy does before it runs out of memory or of connections
/// (docs/xds.md, "Envoy hardening").
#[derive(Debug, Clone, PartialEq, Eq, Args)]
pub struct OverloadArgs {
    /// Envoy's heap limit in bytes (the fixed_heap resource monitor): from 95% of it Envoy returns
    /// free memory to the system, from 98% it answers new requests 503 until the heap is back
    /// under. Set it somewhat below the memory limit of Envoy's container. 0: no heap limit.
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    pub overload_max_heap_bytes: u64,
    /// The most downstream connections Envoy holds at once over all its listeners but the
    /// statistics listener; one beyond it is closed as soon as it is accepted. 0: no limit.
    #[arg(long, value_name = "N", default_value_t = DEFAULT_MAX_CONNECTIONS)]
    pub overload_max_connections: u64,
}

impl Default for OverloadArgs {
    fn default() -> OverloadArgs {
        OverloadArgs {
            overload_max_heap_bytes: 0,
            overload_max_connections: DEFAULT_MAX_CONNECTIONS,
        }
    }
}

/// The name of the heap's resource monitor.
pub const FIXED_HEAP_MONITOR: &str = "envoy.resource_monitors.fixed_heap";
/// The name of the connection limit's resource monitor.
pub const CONNECTIONS_MONITOR: &str = "envoy.resource_monitors.global_downstream_max_connections";

/// The bootstrap's `overload_manager`, None when it has nothing to watch.
fn overload_manager(o: &OverloadArgs) -> Option<Value> {
    let mut monitors = Vec::new();
    let mut actions = Vec::new();
    if o.overload_max_heap_bytes > 0 {
        monitors.push(json!({
            "name": FIXED_HEAP_MONITOR,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig",
                "max_heap_size_bytes": o.overload_max_heap_bytes
            }
        }));
        let action = |name: &str, at: f64| {
            json!({
                "name": name,
                "triggers": [{ "name": FIXED_HEAP_MONITOR, "threshold": { "value": at } }]
            })
        };
        actions.push(action("envoy.overload_actions.shrink_heap", SHRINK_HEAP_AT));
        actions.push(action(
            "envoy.overload_actions.stop_accepting_requests",
            STOP_ACCEPTING_REQUESTS_AT,
        ));
    }
    if o.overload_max_connections > 0 {
        // A monitor that acts by itself: a connection over the limit is closed at accept.
        monitors.push(json!({
            "name": CONNECTIONS_MONITOR,
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig",
                "max_active_downstream_connections": o.overload_max_connections
            }
        }));
    }
    (!monitors.is_empty()).then(|| {
        json!({
            "refresh_interval": "0.25s",
            "resource_monitors": monitors,
            "actions": actions
        })
    })
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

/// Name of the SDS secret of Envoy's client certificate for xDS.
pub const SDS_CLIENT_CERTIFICATE: &str = "sluice_xds_client_certificate";
/// Name of the SDS secret of the CA Envoy trusts for sluice's xDS server.
pub const SDS_TRUSTED_CA: &str = "sluice_xds_trusted_ca";

/// The two files of secrets (file-based SDS) an mTLS bootstrap points at, each a path and its
/// content, written beside the bootstrap.
#[derive(Debug, Clone, PartialEq)]
pub struct SdsFiles {
    pub certificate: (PathBuf, Value),
    pub trusted_ca: (PathBuf, Value),
}

/// An absolute form of `p` (relative to the working directory), so that Envoy, whatever its
/// own working directory, reads the same file.
fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}

/// The folder of `p`, watched for the atomic renames that replace its files.
fn folder(p: &Path) -> Value {
    let dir = absolute(p)
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("/"));
    json!({ "path": dir.display().to_string() })
}

/// With mTLS (--xds-ca, --xds-cert, --xds-key), the files of secrets Envoy reads its client
/// certificate and its trusted CA from, beside `--out`. Envoy takes a certificate given inline
/// in the bootstrap once, at its start; a secret given by a file it reads again whenever a file
/// of the certificate's folder is renamed into place, which is how Kubernetes updates a mounted
/// Secret (and cert-manager renews one). A renewed client certificate or CA is then Envoy's
/// without a restart.
pub fn sds_files(args: &BootstrapArgs) -> Option<SdsFiles> {
    let (Some(ca), Some(cert), Some(key)) = (&args.xds_ca, &args.xds_cert, &args.xds_key) else {
        return None;
    };
    let secret = "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.Secret";
    let out = absolute(&args.out);
    let beside = |name: &str| out.with_file_name(name);
    let stem = out
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    Some(SdsFiles {
        certificate: (
            beside(&format!("{stem}-sds-client-certificate.json")),
            json!({ "resources": [{
                "@type": secret,
                "name": SDS_CLIENT_CERTIFICATE,
                "tls_certificate": {
                    "certificate_chain": file(&absolute(cert)),
                    "private_key": file(&absolute(key)),
                    "watched_directory": folder(cert)
                }
            }] }),
        ),
        trusted_ca: (
            beside(&format!("{stem}-sds-trusted-ca.json")),
            json!({ "resources": [{
                "@type": secret,
                "name": SDS_TRUSTED_CA,
                "validation_context": {
                    "trusted_ca": file(&absolute(ca)),
                    "watched_directory": folder(ca)
                }
            }] }),
        ),
    })
}

/// Writes the bootstrap to `--out` and, with mTLS, its two files of secrets beside it (first, so
/// that a bootstrap never names a file that is not there).
pub fn write_bootstrap(args: &BootstrapArgs) -> Result<(), String> {
    let bootstrap = build_bootstrap(args).map_err(|e| e.to_string())?;
    let mut files = Vec::new();
    if let Some(sds) = sds_files(args) {
        files.push(sds.certificate);
        files.push(sds.trusted_ca);
    }
    files.push((args.out.clone(), bootstrap));
    for (path, content) in files {
        let text = serde_json::to_string_pretty(&content).map_err(|e| e.to_string())? + "\n";
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    Ok(())
}

/// The bootstrap as JSON.
pub fn build_bootstrap(args: &BootstrapArgs) -> Result<Value, BootstrapError> {
    let (host, port) = parse_host_port(&args.xds_address)?;
    let admin_address = match (args.admin_port, &args.admin_socket) {
        (Some(p), _) => json!({ "socket_address": { "address": "127.0.0.1", "port_value": p } }),
        (None, Some(path)) => json!({ "pipe": { "path": path.display().to_string() } }),
        (None, None) => json!({ "pipe": { "path": DEFAULT_ADMIN_SOCKET } }),
    };
    let mut static_clusters = vec![xds_cluster(args, &host, port)];
    let mut static_listeners = Vec::new();
    if let Some(stats) = args.stats_address {
        let (listener, cluster) = stats_listener(stats, &admin_address);
        static_listeners.push(listener);
        static_clusters.push(cluster);
    }
    let ads_source = json!({ "ads": {}, "resource_api_version": "V3" });
    let mut bootstrap = json!({
        "node": { "id": args.node_id, "cluster": args.node_cluster },
        // The admin interface (and the statistics listener) stay usable at the connection limit.
        "admin": { "address": admin_address, "ignore_global_conn_limit": true },
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
        "static_resources": { "clusters": static_clusters, "listeners": static_listeners },
        "layered_runtime": layered_runtime(),
        // No periodic flush of the statistics: with thousands of clusters it held Envoy's main
        // thread for tens of milliseconds every 5 s, and an xDS update arriving then waited for
        // it (docs/xds.md, "Bootstrap"). The admin interface flushes them when they are read.
        "stats_flush_on_admin": true
    });
    if let Some(overload) = overload_manager(&args.overload) {
        bootstrap["overload_manager"] = overload;
    }
    Ok(bootstrap)
}

/// The static cluster Envoy reaches sluice's xDS server through, at `host:port` (resolved by
/// DNS unless an IP address): HTTP/2 with keepalives and sluice's frame size, over TLS with the
/// SDS files when the arguments name a client certificate.
fn xds_cluster(args: &BootstrapArgs, host: &str, port: u16) -> Value {
    let is_ip = host.parse::<std::net::IpAddr>().is_ok();
    let mut cluster = json!({
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
    if let Some(sds) = sds_files(args) {
        cluster["transport_socket"] = xds_transport_socket(&sds, (!is_ip).then_some(host));
    }
    cluster
}

/// The xDS cluster's TLS: ALPN h2, the client certificate and trusted CA read from the SDS
/// files, and `sni` when the server is named by DNS.
fn xds_transport_socket(sds: &SdsFiles, sni: Option<&str>) -> Value {
    let source = |path: &Path| {
        json!({
            "path_config_source": { "path": path.display().to_string() },
            "resource_api_version": "V3"
        })
    };
    let mut tls = json!({
        "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
        "common_tls_context": {
            "alpn_protocols": ["h2"],
            "tls_certificate_sds_secret_configs": [{
                "name": SDS_CLIENT_CERTIFICATE,
                "sds_config": source(&sds.certificate.0)
            }],
            "validation_context_sds_secret_config": {
                "name": SDS_TRUSTED_CA,
                "sds_config": source(&sds.trusted_ca.0)
            }
        }
    });
    if let Some(host) = sni {
        tls["sni"] = json!(host);
    }
    json!({
        "name": "envoy.transport_sockets.tls",
        "typed_config": tls
    })
}

/// The pages of Envoy's admin interface the statistics listener serves (GET only; the query
/// string is free, e.g. `/stats/prometheus?usedonly`). Every other path is a 404 there: the
/// admin interface also dumps the configuration and stops the server.
pub const STATS_PATHS: [&str; 3] = ["/stats", "/stats/prometheus", "/ready"];
/// Name of the statistics listener and its route configuration.
pub const STATS_LISTENER: &str = "envoy_stats";
/// Name of the static cluster that reaches Envoy's own admin interface.
pub const ADMIN_CLUSTER: &str = "envoy_admin";

/// The statistics listener on `address` and the cluster to the admin interface at `admin`.
fn stats_listener(address: std::net::SocketAddr, admin: &Value) -> (Value, Value) {
    let routes: Vec<Value> = STATS_PATHS
        .iter()
        .map(|path| {
            json!({
                "match": {
                    "path": path,
                    "headers": [{ "name": ":method", "string_match": { "exact": "GET" } }]
                },
                "route": { "cluster": ADMIN_CLUSTER }
            })
        })
        .collect();
    let hcm = json!({
        "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
        "stat_prefix": STATS_LISTENER,
        "codec_type": "AUTO",
        "route_config": {
            "name": STATS_LISTENER,
            "virtual_hosts": [{ "name": STATS_LISTENER, "domains": ["*"], "routes": routes }]
        },
        "http_filters": [{
            "name": "envoy.filters.http.router",
            "typed_config": {
                "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router"
            }
        }]
    });
    let listener = json!({
        "name": STATS_LISTENER,
        "address": { "socket_address": {
            "address": address.ip().to_string(),
            "port_value": address.port()
        } },
        // Scrapes and readiness probes still answered when Envoy is at its connection limit.
        "ignore_global_conn_limit": true,
        "filter_chains": [{ "filters": [{
            "name": "envoy.filters.network.http_connection_manager",
            "typed_config": hcm
        }] }]
    });
    let cluster = json!({
        "name": ADMIN_CLUSTER,
        "type": "STATIC",
        "connect_timeout": "1s",
        "load_assignment": {
            "cluster_name": ADMIN_CLUSTER,
            "endpoints": [{ "lb_endpoints": [{ "endpoint": { "address": admin } }] }]
        }
    });
    (listener, cluster)
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
    if let Err(e) = build_bootstrap(&args) {
        eprintln!("sluice bootstrap: {e}");
        return 2;
    }
    match write_bootstrap(&args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice bootstrap: {e}");
            1
        }
    }
}

#[cfg(test)]
#[path = "bootstrap_tests.rs"]
mod tests;
