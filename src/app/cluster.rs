//! Cluster mode of `sluice serve` (no `--manifests`): connects with the kubeconfig (`KUBECONFIG`,
//! `~/.kube/config`) or the in-cluster service account, runs [`crate::k8s::Cluster`] and stops it
//! cleanly on SIGTERM/SIGINT (the leader releases its Lease, so a successor takes over at once).
//!
//! The caller supplies the [`Publisher`] (the app's pipeline: DAG → translate → xDS cache) and,
//! for the webhook's index, reads [`Cluster::built`].

use std::future::Future;
use std::sync::Arc;

use anyhow::Context;
use prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::args::ServeArgs;
use crate::k8s::{self, Cluster, LoadBalancerSource, Publisher};
use crate::webhook::index::IndexHandle;

/// Cluster-mode settings from the `serve` flags.
pub fn config_from_args(args: &ServeArgs) -> anyhow::Result<k8s::Config> {
    let identity = match &args.identity {
        Some(id) if !id.is_empty() => id.clone(),
        _ => default_identity(),
    };
    let mut config = k8s::Config::new(&args.namespace, &identity);
    config.lease_name = args.lease_name.clone();
    anyhow::ensure!(
        args.status_write_qps.is_finite() && args.status_write_qps > 0.0,
        "--status-write-qps must be a positive number, not {}",
        args.status_write_qps
    );
    config.status_qps = args.status_write_qps;
    config.status_burst = args.status_write_burst.max(1);
    config.status_concurrency = args.status_write_concurrency as usize;
    config.gateway_services = args.gateway_services;
    config.load_balancer = match (&args.ingress_status_address, &args.envoy_service) {
        (Some(_), Some(_)) => {
            anyhow::bail!("--ingress-status-address and --envoy-service exclude each other")
        }
        (Some(a), None) => LoadBalancerSource::Address(a.clone()),
        (None, Some(s)) => LoadBalancerSource::EnvoyService(k8s::parse_service_ref(s)?),
        (None, None) => LoadBalancerSource::None,
    };
    Ok(config)
}

/// `HOSTNAME` (a Pod's name) or the kernel host name, plus the process id: unique per replica.
fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
        .unwrap_or_else(|| "sluice".to_string());
    format!("{host}-{}", std::process::id())
}

/// The Kubernetes configuration: the kubeconfig or the in-cluster environment.
async fn kube_config() -> anyhow::Result<kube::Config> {
    kube::Config::infer()
        .await
        .context("no Kubernetes configuration (KUBECONFIG, ~/.kube/config or in-cluster)")
}

/// A client for requests that are not watches (`sluice certgen`), from the kubeconfig or the
/// in-cluster environment: its reads time out ([`k8s::REQUEST_READ_TIMEOUT`]).
pub async fn connect() -> anyhow::Result<kube::Client> {
    let clients = k8s::ApiClients::from_config(kube_config().await?)
        .context("building the Kubernetes client")?;
    Ok(clients.requests)
}

/// Cluster mode's clients (see [`k8s::ApiClients`]): one whose requests time out, one for
/// lists and watches.
pub async fn connect_cluster() -> anyhow::Result<k8s::ApiClients> {
    k8s::ApiClients::from_config(kube_config().await?).context("building the Kubernetes client")
}

/// Runs cluster mode until `shutdown` resolves. `/metrics` (with `--metrics-address`) serves the
/// cluster metrics plus whatever `register` adds.
pub async fn run(
    args: &ServeArgs,
    publish: Publisher,
    on_start: impl FnOnce(&Cluster),
    register: impl FnOnce(&mut Registry),
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let config = config_from_args(args)?;
    let clients = connect_cluster().await?;
    tracing::info!(
        identity = %config.identity,
        namespace = %config.namespace,
        lease = %config.lease_name,
        "starting cluster mode"
    );
    let cluster = Cluster::start(clients, config, publish).await?;
    on_start(&cluster);
    let metrics_task = args.metrics_address.map(|addr| {
        let mut registry = Registry::default();
        cluster.metrics().register(&mut registry);
        register(&mut registry);
        tokio::spawn(super::serving::serve_metrics(addr, registry))
    });
    shutdown.await;
    tracing::info!("shutting down");
    cluster.shutdown().await;
    if let Some(t) = metrics_task {
        t.abort();
    }
    Ok(())
}

/// The whole of `sluice serve` in cluster mode: the app pipeline (DAG → translate → xDS cache)
/// fed by the cluster watches, the ADS server, the admission webhook (with `--webhook-address`)
/// whose index is refreshed with every build, and the status writer.
pub async fn serve(
    args: &ServeArgs,
    shutdown: impl Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let xds_tls = super::serving::build_xds_tls(
        args.xds_ca.as_deref(),
        args.xds_cert.as_deref(),
        args.xds_key.as_deref(),
    )?;
    let pipeline = Arc::new(super::Pipeline::new(
        args.dag_options(),
        args.translate_options(),
    ));
    let index = IndexHandle::new(args.dag_options());
    let (stop_tx, stop_rx) = watch::channel(false);

    let webhook_metrics = crate::webhook::Metrics::new();
    let webhook = match super::args::webhook_config(args, webhook_metrics.clone()) {
        Some(cfg) => Some(
            crate::webhook::start(cfg, index.clone(), stopped(stop_rx.clone()))
                .await
                .context("admission webhook")?,
        ),
        None => None,
    };

    let listener = tokio::net::TcpListener::bind(args.xds_address)
        .await
        .with_context(|| format!("binding the xDS server to {}", args.xds_address))?;
    tracing::info!(address = %args.xds_address, tls = xds_tls.is_some(), "serving xDS (cluster mode)");
    // Envoys that connect (or reconnect to this restarted sluice) are answered once the first
    // complete build is published, never with the pipeline's empty start.
    let (first_build_tx, first_build) = watch::channel(false);
    let server = crate::xds::AdsServer::new(pipeline.xds(), stop_rx.clone()).after(first_build);
    let xds_stats = server.stats();
    let xds_task = tokio::spawn(crate::xds::serve(
        listener,
        server,
        xds_tls,
        stopped(stop_rx.clone()),
    ));

    let publish = publisher(pipeline.clone(), index, first_build_tx);
    let with_webhook = webhook.is_some();
    let register = move |registry: &mut Registry| {
        pipeline.register_metrics(registry);
        if with_webhook {
            webhook_metrics.register(registry);
        }
        crate::xds::stream::register_stats(registry, xds_stats);
    };
    let result = run(args, publish, |_| {}, register, shutdown).await;
    let _ = stop_tx.send(true);
    wait_stopped(webhook, xds_task).await;
    result
}

/// Resolves once `rx` turns true.
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// The cluster's [`Publisher`]: each snapshot goes through the pipeline (Envoy's update first),
/// then into the webhook's `index`, and opens `first_build`; the statuses of each rebuilt model
/// are logged (what changed since the last one).
fn publisher(
    pipeline: Arc<super::Pipeline>,
    index: IndexHandle,
    first_build: watch::Sender<bool>,
) -> Publisher {
    // The model whose statuses were last logged.
    let logged: std::sync::Mutex<Option<Arc<crate::dag::Dag>>> = Default::default();
    Arc::new(move |snapshot: &crate::store::Snapshot| {
        // Envoy's update first; the webhook's index follows right after (EndpointSlices are
        // not in it, so an endpoint-only change leaves it alone).
        let (dag, path) = pipeline.publish_counted(snapshot);
        first_build.send_if_modified(|built| !std::mem::replace(built, true));
        if path.rebuilt() {
            index.replace(snapshot);
            let mut logged = logged.lock().unwrap_or_else(|p| p.into_inner());
            match logged.as_ref() {
                Some(prev) => super::log_status_changes(prev, &dag),
                None => super::log_statuses(&dag),
            }
            *logged = Some(dag.clone());
        }
        dag
    })
}

/// Waits (10 s at most each) for the webhook and the xDS server, told to stop, to end.
async fn wait_stopped<E: std::fmt::Display, X>(
    webhook: Option<JoinHandle<Result<(), E>>>,
    xds_task: JoinHandle<X>,
) {
    if let Some(w) = webhook {
        match tokio::time::timeout(std::time::Duration::from_secs(10), w).await {
            Ok(Ok(Err(e))) => tracing::warn!(error = %e, "webhook stopped with an error"),
            Ok(_) => {}
            Err(_) => tracing::warn!("webhook did not stop within 10s"),
        }
    }
    let _ = tokio::time::timeout(std::time::Duration::from_secs(10), xds_task).await;
}

/// Resolves on SIGTERM or SIGINT.
pub async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = term => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}
