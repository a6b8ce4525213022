//! The `sluice` command line: one binary, one subcommand per job.

pub mod bootstrap;
pub mod certgen;
pub mod crds;
pub mod routes;
pub mod serve;
pub mod validate;

use clap::{Args, Parser, Subcommand};

/// sluice: a Kubernetes ingress control plane for Envoy.
#[derive(Debug, Parser)]
#[command(name = "sluice", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Serve xDS to Envoy (and optionally the admission webhook) from a cluster or a manifest directory.
    Serve(Box<serve::ServeArgs>),
    /// Check manifests: admission rules on every object, then routing over the whole set.
    Validate(validate::ValidateArgs),
    /// Print the route table computed from manifests.
    Routes(routes::RoutesArgs),
    /// Print sluice's CustomResourceDefinitions.
    Crds(crds::CrdsArgs),
    /// Write an Envoy bootstrap that points Envoy at sluice's xDS server.
    Bootstrap(bootstrap::BootstrapArgs),
    /// Create the chart's certificates as Secrets (kept once there) and set the webhooks' caBundle.
    Certgen(certgen::CertgenArgs),
}

/// Runs the command line; returns the process exit code.
pub fn main() -> std::process::ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            let _ = e.print();
            return std::process::ExitCode::from(code);
        }
    };
    let code = match cli.command {
        Command::Serve(a) => serve::run(*a),
        Command::Validate(a) => validate::run(a),
        Command::Routes(a) => routes::run(a),
        Command::Crds(a) => crds::run(a),
        Command::Bootstrap(a) => bootstrap::run(a),
        Command::Certgen(a) => certgen::run(a),
    };
    std::process::ExitCode::from(code)
}

/// The flags that choose how routing is computed, shared by the commands that build the DAG.
#[derive(Debug, Clone, Args)]
pub struct RoutingFlags {
    /// Namespaces where root IngressRoutes and Routes may live (comma-separated); all when empty.
    #[arg(long, value_delimiter = ',')]
    pub root_namespaces: Vec<String>,
    /// The ingress class sluice serves.
    #[arg(long, default_value = crate::dag::DEFAULT_INGRESS_CLASS)]
    pub ingress_class_name: String,
    /// The Gateway API controllerName sluice serves: GatewayClasses naming it, their Gateways
    /// and the routes attached to those are sluice's.
    #[arg(long, default_value = crate::dag::DEFAULT_GATEWAY_CONTROLLER_NAME)]
    pub gateway_controller_name: String,
    /// The ports Envoy listens on by itself (comma-separated: `sluice serve`'s --http-port,
    /// --https-port and --envoy-reserved-ports): a Gateway's TCP listener cannot have them.
    #[arg(long, value_delimiter = ',', value_name = "PORTS",
          default_values_t = crate::dag::DEFAULT_RESERVED_PORTS)]
    pub envoy_ports: Vec<u16>,
    /// `sluice serve`'s --gateway-addresses: every Gateway gets an address of its own from this
    /// pool, and its routes are served there only.
    #[arg(long, value_name = "CIDRS")]
    pub gateway_addresses: Option<crate::dag::addresses::AddressPool>,
}

impl RoutingFlags {
    /// The DAG options these flags select.
    pub fn dag_options(&self) -> crate::dag::Options {
        crate::dag::Options {
            root_namespaces: crate::app::args::split_list(&self.root_namespaces),
            ingress_class_name: self.ingress_class_name.clone(),
            gateway_controller_name: self.gateway_controller_name.clone(),
            reserved_ports: self.envoy_ports.clone(),
            gateway_addresses: self.gateway_addresses.clone(),
            gateway_services: false,
        }
    }
}
