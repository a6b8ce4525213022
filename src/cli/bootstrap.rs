//! `sluice bootstrap`: writes an Envoy bootstrap pointing at sluice's xDS server.

use std::path::PathBuf;

use clap::Args;

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
    #[arg(long, value_name = "FILE")]
    pub xds_cert: Option<PathBuf>,
    /// Envoy's client key for xDS.
    #[arg(long, value_name = "FILE")]
    pub xds_key: Option<PathBuf>,
    /// Envoy admin on loopback at this port (default: a unix socket, see --admin-socket).
    #[arg(long, conflicts_with = "admin_socket")]
    pub admin_port: Option<u16>,
    /// Envoy admin on this unix socket path.
    #[arg(long, value_name = "PATH")]
    pub admin_socket: Option<PathBuf>,
    /// Envoy node id.
    #[arg(long, default_value = "envoy")]
    pub node_id: String,
    /// Envoy node cluster.
    #[arg(long, default_value = "sluice")]
    pub node_cluster: String,
}

pub fn run(args: BootstrapArgs) -> u8 {
    eprintln!(
        "sluice bootstrap: not available in this build yet ({})",
        args.out.display()
    );
    2
}
