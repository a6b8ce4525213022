//! Watch tasks: one kube-runtime watcher per kind, feeding the live [`ClusterState`].
//!
//! Objects are watched as `DynamicObject` (raw JSON) and decoded by sluice itself with
//! [`sluice_core::manifest::decode_value`] — the same decoder standalone mode and the CLI use. A typed
//! watcher fails the whole list or watch when one object does not deserialize, which would wedge
//! every object of that kind behind one malformed object; here that object is logged, counted and
//! kept aside (its status says why), and the watch goes on.

use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::ApiResource;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use tokio::sync::watch;

use sluice_core::api::Kind;

use super::kinds;
use super::metrics::{KindLabel, Metrics};
use super::state::{ClusterState, Prepared, prepare};

/// Everything a watch task needs.
#[derive(Clone)]
pub struct WatchContext {
    /// The client for lists and watches (no read timeout: see [`super::ApiClients`]).
    pub client: Client,
    /// The client for discovery (kinds missing at start are looked for again).
    pub discovery: Client,
    pub state: Arc<Mutex<ClusterState>>,
    /// Signalled whenever routing input changed (or a kind finished its initial list).
    pub changed: watch::Sender<u64>,
    pub metrics: Metrics,
}

/// Watches one kind until the task is aborted. Errors are retried with kube-runtime's default
/// backoff (exponential, capped), so a transient apiserver failure never ends the watch.
pub async fn watch_kind(ctx: WatchContext, kind: Kind, ar: ApiResource) {
    let api: Api<DynamicObject> = Api::all_with(ctx.client.clone(), &ar);
    let mut config = watcher::Config::default();
    if let Some(fields) = kinds::field_selector(kind) {
        config = config.fields(fields);
    }
    let label = KindLabel {
        kind: kind.kind().to_string(),
    };
    let mut stream = watcher::watcher(api, config).default_backoff().boxed();
    let mut buffer: Vec<Prepared> = Vec::new();
    tracing::info!(kind = %kind, version = %ar.api_version, "watching");
    while let Some(event) = stream.next().await {
        let event = match event {
            Ok(e) => e,
            Err(e) => {
                tracing::warn!(kind = %kind, error = %e, "watch failed; retrying");
                continue;
            }
        };
        let changed = match event {
            Event::Init => {
                buffer.clear();
                false
            }
            Event::InitApply(obj) => {
                if let Some(p) = prepare_logged(kind, obj, &ctx.metrics) {
                    buffer.push(p);
                }
                false
            }
            Event::InitDone => {
                let items = std::mem::take(&mut buffer);
                let n = items.len();
                let changed = lock(&ctx.state).replace_kind(kind, items);
                tracing::info!(kind = %kind, objects = n, "initial list complete");
                changed
            }
            Event::Apply(obj) => match prepare_logged(kind, obj, &ctx.metrics) {
                Some(p) => lock(&ctx.state).apply(p),
                None => false,
            },
            Event::Delete(obj) => {
                let name = obj.metadata.name.clone().unwrap_or_default();
                let namespace = if kind.is_cluster_scoped() {
                    String::new()
                } else {
                    obj.metadata.namespace.clone().unwrap_or_default()
                };
                lock(&ctx.state).delete(&sluice_core::api::ObjectRef::new(kind, namespace, name))
            }
        };
        ctx.metrics.watch_events.get_or_create(&label).inc();
        if changed {
            ctx.changed.send_modify(|n| *n = n.wrapping_add(1));
        }
    }
}

fn prepare_logged(kind: Kind, obj: DynamicObject, metrics: &Metrics) -> Option<Prepared> {
    let name = format!(
        "{}/{}",
        obj.metadata.namespace.as_deref().unwrap_or(""),
        obj.metadata.name.as_deref().unwrap_or("")
    );
    let value = match serde_json::to_value(obj) {
        Ok(v) => v,
        Err(e) => {
            tracing::warn!(kind = %kind, object = %name, error = %e, "skipping object that does not serialize");
            return None;
        }
    };
    match prepare(kind, value) {
        Ok(p) => {
            if let Err(e) = &p.decoded {
                metrics
                    .rejected_objects
                    .get_or_create(&KindLabel {
                        kind: kind.kind().to_string(),
                    })
                    .inc();
                tracing::warn!(kind = %kind, object = %p.object.key, error = %e, "object does not decode; skipped (its status says why)");
            }
            Some(p)
        }
        Err(e) => {
            tracing::warn!(kind = %kind, object = %name, error = %e, "skipping malformed object");
            None
        }
    }
}

/// Locks the state; a poisoned lock (a panic elsewhere) still holds consistent data, because every
/// mutation is a single insert/remove.
pub fn lock(state: &Mutex<ClusterState>) -> std::sync::MutexGuard<'_, ClusterState> {
    state.lock().unwrap_or_else(|p| p.into_inner())
}
