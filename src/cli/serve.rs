//! `sluice serve`: cluster mode (kubeconfig or in-cluster) or standalone mode (`--manifests DIR`).

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

/// Flags of `sluice serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeArgs {
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

    /// Port of Envoy's HTTP listener.
    #[arg(long, default_value_t = 8080)]
    pub http_port: u16,
    /// Port of Envoy's HTTPS listener.
    #[arg(long, default_value_t = 8443)]
    pub https_port: u16,

    /// Serve the admission webhook (HTTPS) on this address.
    #[arg(long, requires_all = ["webhook_cert", "webhook_key"])]
    pub webhook_address: Option<SocketAddr>,
    /// Webhook serving certificate (PEM); reloaded when the file changes.
    #[arg(long, value_name = "FILE")]
    pub webhook_cert: Option<PathBuf>,
    /// Webhook private key (PEM); reloaded when the file changes.
    #[arg(long, value_name = "FILE")]
    pub webhook_key: Option<PathBuf>,
    /// pathType the mutating webhook gives Ingress paths that have none.
    #[arg(long, default_value = "ImplementationSpecific", value_parser = ["Exact", "Prefix", "ImplementationSpecific"])]
    pub default_path_type: String,
    /// ingressClassName the mutating webhook gives Ingresses that have none, when no IngressClass is
    /// marked default.
    #[arg(long)]
    pub default_ingress_class: Option<String>,

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

    /// Serve Prometheus metrics on this address.
    #[arg(long)]
    pub metrics_address: Option<SocketAddr>,
}

impl ServeArgs {
    /// The DAG options these flags select.
    pub fn dag_options(&self) -> crate::dag::Options {
        crate::dag::Options {
            root_namespaces: super::split_list(&self.root_namespaces),
            ingress_class_name: self.ingress_class_name.clone(),
        }
    }
}

/// Runs `sluice serve` until SIGTERM/SIGINT; returns the exit code.
pub fn run(args: ServeArgs) -> u8 {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    if args.manifests.is_some() {
        eprintln!("sluice serve: standalone mode is not available in this build yet");
        return 2;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("sluice serve: starting the runtime: {e}");
            return 1;
        }
    };
    // Cluster mode without xDS/webhook wiring yet: DAG + status only.
    let publish = crate::k8s::build_only(args.dag_options());
    let result = runtime.block_on(crate::app::cluster::run(
        &args,
        publish,
        |_| {},
        crate::app::cluster::shutdown_signal(),
    ));
    match result {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice serve: {e:#}");
            1
        }
    }
}
