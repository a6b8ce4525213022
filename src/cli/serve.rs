//! `sluice serve`: cluster mode (kubeconfig or in-cluster) or standalone mode (`--manifests DIR`).

pub use crate::app::args::{Role, ServeArgs};

/// A future that resolves on SIGTERM or SIGINT. The handlers are installed when this is called
/// (inside a runtime), so a signal that arrives during start-up is not lost.
pub fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let term = signal(SignalKind::terminate());
        let int = signal(SignalKind::interrupt());
        async move {
            match (term, int) {
                (Ok(mut term), Ok(mut int)) => {
                    tokio::select! {
                        _ = term.recv() => {},
                        _ = int.recv() => {},
                    }
                }
                _ => {
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    async {
        let _ = tokio::signal::ctrl_c().await;
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
    if let Err(e) = args.check_xds_client_auth() {
        eprintln!("sluice serve: {e}");
        return 2;
    }
    if args.role == Role::Webhook {
        if args.manifests.is_some() {
            eprintln!(
                "sluice serve: --role webhook is cluster mode only; standalone mode (--manifests) \
                 serves the webhook itself with --webhook-address"
            );
            return 2;
        }
        if args.webhook_address.is_none() {
            eprintln!("sluice serve: --role webhook needs --webhook-address");
            return 2;
        }
    }
    if args.gateway_services && args.manifests.is_some() {
        eprintln!(
            "sluice serve: --gateway-services writes Services to the cluster; standalone mode \
             (--manifests) has none"
        );
        return 2;
    }
    let Some(manifests) = args.manifests.clone() else {
        return run_cluster(args);
    };
    let xds_tls = match crate::app::serving::build_xds_tls(
        args.xds_ca.as_deref(),
        args.xds_cert.as_deref(),
        args.xds_key.as_deref(),
    ) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("sluice serve: {e:#}");
            return 2;
        }
    };
    let config = crate::app::standalone::StandaloneConfig {
        manifests,
        xds_address: args.xds_address,
        xds_tls,
        dag_options: args.dag_options(),
        translate_options: args.translate_options(),
        debounce: std::time::Duration::from_millis(200),
        webhook: crate::app::args::webhook_config(&args, crate::webhook::Metrics::new()),
        metrics_address: args.metrics_address,
    };
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
    match runtime.block_on(async {
        let signal = shutdown_signal();
        crate::app::standalone::run(config, signal).await
    }) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice serve: {e:#}");
            1
        }
    }
}

/// Cluster mode: no --manifests.
fn run_cluster(args: ServeArgs) -> u8 {
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
    match runtime.block_on(async {
        // Signal handlers are installed inside the runtime, before start-up work.
        let signal = shutdown_signal();
        match args.role {
            Role::All => crate::app::cluster::serve(&args, signal).await,
            Role::Webhook => crate::app::webhook_role::serve(&args, signal).await,
        }
    }) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("sluice serve: {e:#}");
            1
        }
    }
}
