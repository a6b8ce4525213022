//! Standalone mode: every YAML/JSON object under a directory is the whole world. sluice serves xDS
//! from it and reloads when files change (debounced). A reload that cannot read every file, or
//! finds a document that does not fit its schema, is reported (file and document named) and the
//! last good state keeps serving.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use notify::{EventKind, RecursiveMode, Watcher};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use super::{Pipeline, log_statuses};
use crate::manifest::{Document, load_paths};
use crate::store::Snapshot;
use crate::webhook::IndexHandle;
use crate::xds::XdsTls;
use crate::{dag, translate, validate, xds};

/// Everything standalone mode needs.
#[derive(Clone, Debug)]
pub struct StandaloneConfig {
    pub manifests: PathBuf,
    pub xds_address: SocketAddr,
    pub xds_tls: Option<XdsTls>,
    pub dag_options: dag::Options,
    pub translate_options: translate::Options,
    /// Quiet time after a file change before reloading.
    pub debounce: Duration,
    /// The admission webhook (`--webhook-address`); its index is the manifest directory.
    pub webhook: Option<crate::webhook::WebhookConfig>,
    /// Where `/metrics` is served (`--metrics-address`): xDS counters, and the webhook's metrics
    /// when it runs.
    pub metrics_address: Option<SocketAddr>,
}

/// Reads every manifest under `dir`. Err lists every problem that makes the set unusable.
/// Objects that fail admission rules are kept (the routing model marks them invalid) and
/// reported as warnings.
pub fn load_manifests(dir: &Path, ingress_class: &str) -> Result<Snapshot, Vec<String>> {
    let docs = load_paths(&[dir.display().to_string()]).map_err(|e| vec![e.to_string()])?;
    for u in &docs.unknown_fields {
        tracing::warn!(at = %u.at, object = %u.object, "{}", u.message());
    }
    let mut errors = Vec::new();
    let mut objects = Vec::new();
    for (source, doc) in docs.documents {
        match doc {
            Document::Object(obj) => {
                let verdict = validate::validate_object_for_class(&obj, ingress_class);
                for e in &verdict.errors {
                    tracing::warn!(at = %source, object = %obj.object_ref(), "{e}");
                }
                objects.push(obj);
            }
            Document::Skipped { .. } => {}
            Document::Rejected { object, error } => {
                errors.push(format!("{source}: {object}: {error}"));
            }
        }
    }
    if errors.is_empty() {
        Ok(Snapshot::from_objects(objects))
    } else {
        Err(errors)
    }
}

/// Loads, publishes (to Envoy first, then to the webhook's index) and reports; keeps the last
/// good state on failure. Returns whether it published.
fn reload(pipeline: &Pipeline, index: &IndexHandle, cfg: &StandaloneConfig) -> bool {
    match load_manifests(&cfg.manifests, &cfg.dag_options.ingress_class_name) {
        Ok(snapshot) => {
            let dag = pipeline.publish(&snapshot);
            index.replace(&snapshot);
            log_statuses(&dag);
            true
        }
        Err(errors) => {
            for e in &errors {
                tracing::error!("{e}");
            }
            tracing::error!(
                problems = errors.len(),
                dir = %cfg.manifests.display(),
                "manifests not loaded; the last good configuration keeps serving"
            );
            false
        }
    }
}

/// Runs standalone mode until `shutdown` completes.
pub async fn run(
    cfg: StandaloneConfig,
    shutdown: impl std::future::Future<Output = ()> + Send,
) -> anyhow::Result<()> {
    let meta = std::fs::metadata(&cfg.manifests)
        .with_context(|| format!("--manifests {}", cfg.manifests.display()))?;
    anyhow::ensure!(
        meta.is_dir(),
        "--manifests {}: not a directory",
        cfg.manifests.display()
    );
    let pipeline = Pipeline::new(cfg.dag_options.clone(), cfg.translate_options.clone());
    // The webhook's index: what the manifest directory holds (the last good load); not ready
    // (/readyz 503) until a load succeeds.
    let index = IndexHandle::new(cfg.dag_options.clone());
    // xDS streams answer once a load of the manifests has succeeded, never with the pipeline's
    // empty start (a directory that does not load yet keeps Envoys waiting, not emptied).
    let (loaded_tx, loaded) = watch::channel(false);
    let mark_loaded = |ok: bool| {
        loaded_tx.send_if_modified(|done| ok && !std::mem::replace(done, true));
    };
    mark_loaded(reload(&pipeline, &index, &cfg));
    let (watcher, changes) = watch_manifests(&cfg.manifests)?;

    let listener = tokio::net::TcpListener::bind(cfg.xds_address)
        .await
        .with_context(|| format!("binding the xDS server to {}", cfg.xds_address))?;
    tracing::info!(
        address = %cfg.xds_address,
        tls = cfg.xds_tls.is_some(),
        manifests = %cfg.manifests.display(),
        "serving xDS (standalone mode)"
    );
    let (stop_tx, stop_rx) = watch::channel(false);
    let webhook = match cfg.webhook.clone() {
        Some(w) => Some(
            crate::webhook::start(w, index.clone(), stopped(stop_rx.clone()))
                .await
                .context("admission webhook")?,
        ),
        None => None,
    };
    let server = xds::AdsServer::new(pipeline.xds(), stop_rx.clone()).after(loaded);
    let metrics_task = cfg.metrics_address.map(|addr| {
        let mut registry = prometheus_client::registry::Registry::default();
        if let Some(w) = &cfg.webhook {
            w.metrics.register(&mut registry);
        }
        xds::stream::register_stats(&mut registry, server.stats());
        pipeline.register_metrics(&mut registry);
        tokio::spawn(super::serving::serve_metrics(addr, registry))
    });
    let server_task = tokio::spawn(xds::serve(
        listener,
        server,
        cfg.xds_tls.clone(),
        stopped(stop_rx),
    ));

    reload_on_changes(changes, cfg.debounce, shutdown, || {
        mark_loaded(reload(&pipeline, &index, &cfg));
    })
    .await;
    tracing::info!("shutting down");
    drop(watcher);
    if let Some(t) = metrics_task {
        t.abort();
    }
    let _ = stop_tx.send(true);
    wait_stopped(webhook, server_task).await
}

/// Resolves once `rx` turns true.
async fn stopped(mut rx: watch::Receiver<bool>) {
    let _ = rx.wait_for(|s| *s).await;
}

/// Watches `dir` (recursively): a message per change of a file under it. The watch lasts as long
/// as the watcher returned.
fn watch_manifests(
    dir: &Path,
) -> anyhow::Result<(notify::RecommendedWatcher, mpsc::UnboundedReceiver<()>)> {
    let (changes_tx, changes) = mpsc::unbounded_channel::<()>();
    let mut watcher =
        notify::recommended_watcher(move |res: notify::Result<notify::Event>| match res {
            Ok(ev) if matches!(ev.kind, EventKind::Access(_)) => {}
            Ok(_) => _ = changes_tx.send(()),
            Err(e) => tracing::warn!(error = %e, "file watch error"),
        })
        .context("starting the file watcher")?;
    watcher
        .watch(dir, RecursiveMode::Recursive)
        .with_context(|| format!("watching {}", dir.display()))?;
    Ok((watcher, changes))
}

/// Calls `reload` after each burst of `changes`, once they have been quiet for `debounce`,
/// until `shutdown` completes or the changes end.
async fn reload_on_changes(
    mut changes: mpsc::UnboundedReceiver<()>,
    debounce: Duration,
    shutdown: impl std::future::Future<Output = ()>,
    mut reload: impl FnMut(),
) {
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            _ = &mut shutdown => break,
            got = changes.recv() => {
                if got.is_none() {
                    break;
                }
                // Debounce: wait until the directory has been quiet for a while.
                loop {
                    tokio::select! {
                        _ = tokio::time::sleep(debounce) => break,
                        more = changes.recv() => if more.is_none() { break },
                    }
                }
                tracing::info!("manifests changed, reloading");
                reload();
            }
        }
    }
}

/// Waits (10 s at most each) for the webhook and the xDS server, told to stop, to end; their
/// errors are standalone mode's.
async fn wait_stopped<E, S>(
    webhook: Option<JoinHandle<Result<(), E>>>,
    server_task: JoinHandle<Result<(), S>>,
) -> anyhow::Result<()>
where
    E: std::error::Error + Send + Sync + 'static,
    S: std::error::Error + Send + Sync + 'static,
{
    if let Some(w) = webhook {
        match tokio::time::timeout(Duration::from_secs(10), w).await {
            Ok(Ok(r)) => r.context("admission webhook")?,
            Ok(Err(e)) => anyhow::bail!("admission webhook task: {e}"),
            Err(_) => tracing::warn!("admission webhook did not stop within 10s"),
        }
    }
    match tokio::time::timeout(Duration::from_secs(10), server_task).await {
        Ok(Ok(r)) => r.context("xDS server")?,
        Ok(Err(e)) => anyhow::bail!("xDS server task: {e}"),
        Err(_) => tracing::warn!("xDS server did not stop within 10s"),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SVC: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: ns}\nspec:\n  ports: [{port: 80}]\n";

    #[test]
    fn loads_objects_and_reports_rejected_documents() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("svc.yaml"), SVC).unwrap();
        let snap = load_manifests(dir.path(), "sluice").unwrap();
        assert_eq!(snap.services().len(), 1);
        std::fs::write(
            dir.path().join("bad.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata: {name: b}\nspec:\n  ports: 3\n",
        )
        .unwrap();
        let errs = load_manifests(dir.path(), "sluice").unwrap_err();
        assert_eq!(errs.len(), 1);
        let file = dir.path().join("bad.yaml").display().to_string();
        assert!(
            errs[0].starts_with(&format!(
                "{file} (document 0): Service default/b: spec.ports"
            )),
            "{}",
            errs[0]
        );
    }

    #[test]
    fn an_object_with_an_unknown_field_is_loaded_without_it() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("svc.yaml"),
            "apiVersion: v1\nkind: Service\nmetadata: {name: a}\nspec:\n  portz: 1\n  ports: [{port: 80}]\n",
        )
        .unwrap();
        let snap = load_manifests(dir.path(), "sluice").unwrap();
        assert_eq!(snap.services().len(), 1);
    }

    #[test]
    fn unreadable_yaml_names_the_file() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("broken.yaml"), "a: [").unwrap();
        let errs = load_manifests(dir.path(), "sluice").unwrap_err();
        assert!(errs[0].contains("broken.yaml"), "{}", errs[0]);
    }

    #[test]
    fn a_bad_reload_keeps_the_last_good_state() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("svc.yaml"), SVC).unwrap();
        let cfg = StandaloneConfig {
            manifests: dir.path().to_path_buf(),
            xds_address: "127.0.0.1:0".parse().unwrap(),
            xds_tls: None,
            dag_options: dag::Options::default(),
            translate_options: translate::Options::default(),
            debounce: Duration::from_millis(10),
            webhook: None,
            metrics_address: None,
        };
        let p = Pipeline::new(cfg.dag_options.clone(), cfg.translate_options.clone());
        let index = IndexHandle::new(cfg.dag_options.clone());
        assert!(reload(&p, &index, &cfg));
        assert!(index.is_ready());
        let before = p.xds().borrow().clone();
        let before_index = index.load();
        std::fs::write(dir.path().join("svc.yaml"), "a: [").unwrap();
        assert!(!reload(&p, &index, &cfg));
        assert_eq!(*p.xds().borrow().clone(), *before);
        assert!(std::sync::Arc::ptr_eq(&index.load(), &before_index));
    }
}
