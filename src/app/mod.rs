//! Wiring: the [`Pipeline`] every source feeds (store snapshot → `dag::incremental` →
//! `translate::incremental::Encoder` → xDS cache), and [`standalone`] mode (a manifest directory as the source). Cluster mode and the
//! webhook plug into the same pipeline: they call [`Pipeline::publish`] and read
//! [`Pipeline::dag`].

pub mod args;
pub mod cluster;
pub mod object_metrics;
pub mod serving;
pub mod standalone;
pub mod webhook_role;

use std::sync::{Arc, Mutex, OnceLock, mpsc};

use tokio::sync::watch;

use crate::dag::{self, Dag, State};
use crate::store::Snapshot;
use crate::{translate, xds};

/// The pure core between sources and outputs, with the latest result of each stage on a watch.
///
/// Two paths: a rebuild for any change (the part of the model the change can affect, see
/// [`dag::incremental`], or all of it; then translation and encoding of what changed in the
/// model, see [`translate::incremental`]), and the endpoint fast path for a change in
/// EndpointSlices only (pods come and go far more often than routing changes): the load
/// assignments of the affected clusters are recomputed and swapped into the current xDS snapshot,
/// everything else shared. The routing model and every status are the
/// same after such a change, so the previous model is returned (its clusters' `endpoints` are
/// those of the last full build; the xDS snapshot holds the current ones).
pub struct Pipeline {
    dag_tx: watch::Sender<Arc<Dag>>,
    xds_tx: watch::Sender<Arc<xds::Snapshot>>,
    state: Mutex<PipelineState>,
    /// The route shards of the HTTP listener in the last snapshot (`sluice_http_route_shards`).
    route_shards: prometheus_client::metrics::gauge::Gauge,
    /// The routing objects of the last build, by status (`contour_ingressroute_*`,
    /// `sluice_routing_objects`).
    objects: object_metrics::ObjectMetrics,
}

/// What the next publication starts from.
struct PipelineState {
    /// The input and model of the last publication, where the fast path starts.
    last: Option<(Snapshot, Arc<Dag>)>,
    /// Builds the part of the model a change affects.
    builder: dag::incremental::Incremental,
    /// Translates and encodes what changed between successive models.
    encoder: translate::incremental::Encoder,
    /// The last full build's index for the partial builds after it, being made on a thread of its
    /// own once the build is published; the next publication takes it back first.
    indexing: Option<std::thread::JoinHandle<dag::incremental::Incremental>>,
}

/// Which path a publication took (see [`Pipeline::publish_counted`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishPath {
    /// The model was built again from the whole snapshot.
    Full,
    /// The model was built again where the change can affect it (this many routing objects).
    Partial { objects: usize },
    /// EndpointSlices only: the model is kept, the load assignments are replaced.
    Endpoints,
}

impl PublishPath {
    /// Whether the model (and the statuses) were built again.
    pub fn rebuilt(self) -> bool {
        self != PublishPath::Endpoints
    }
}

impl Pipeline {
    /// A pipeline serving an empty configuration until the first [`Pipeline::publish`].
    pub fn new(dag_options: dag::Options, translate_options: translate::Options) -> Pipeline {
        let empty = Dag::default();
        let resources = translate::build(&empty, &translate_options);
        let route_shards = prometheus_client::metrics::gauge::Gauge::default();
        route_shards.set(translate_options.route_shards.count(0, None).into());
        let (dag_tx, _) = watch::channel(Arc::new(empty));
        let (xds_tx, _) = watch::channel(Arc::new(xds::Snapshot::from_resources(&resources)));
        Pipeline {
            state: Mutex::new(PipelineState {
                last: None,
                builder: dag::incremental::Incremental::new(dag_options),
                encoder: translate::incremental::Encoder::new(translate_options.clone()),
                indexing: None,
            }),
            dag_tx,
            xds_tx,
            route_shards,
            objects: object_metrics::ObjectMetrics::default(),
        }
    }

    /// Registers the pipeline's metrics: `sluice_http_route_shards`, and the routing objects of
    /// the last build by status ([`object_metrics`]).
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        registry.register(
            "sluice_http_route_shards",
            "Route configurations the HTTP listener's hosts are spread over (--http-route-shards)",
            self.route_shards.clone(),
        );
        registry.register_collector(Box::new(self.objects.clone()));
    }

    /// The route shards of the HTTP listener in the last snapshot published.
    pub fn http_route_shards(&self) -> u16 {
        u16::try_from(self.route_shards.get()).unwrap_or(1).max(1)
    }

    /// Builds the routing model from a store snapshot and publishes it and its Envoy resources.
    /// Watchers are woken only when something changed. Returns the model.
    pub fn publish(&self, snapshot: &Snapshot) -> Arc<Dag> {
        self.publish_counted(snapshot).0
    }

    /// [`Pipeline::publish`], also telling which path it took.
    pub fn publish_counted(&self, snapshot: &Snapshot) -> (Arc<Dag>, PublishPath) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let PipelineState {
            last,
            builder,
            encoder,
            indexing,
        } = &mut *state;
        take_index(indexing, builder);
        if let Some((prev_snapshot, prev_dag)) = last.as_mut()
            && let Some(changes) = prev_snapshot.endpoint_only_changes(snapshot)
            && self.publish_endpoints(prev_dag, snapshot, &changes.services)
        {
            *prev_snapshot = snapshot.clone();
            builder.endpoints_changed(&changes.services);
            return (prev_dag.clone(), PublishPath::Endpoints);
        }
        let prev = last.as_ref().map(|(s, d)| (s, d.as_ref()));
        // A full build's index for the partial builds after it is made once the model and its
        // resources are published, on a thread of its own (below): neither the push to Envoy
        // nor the caller (cluster mode's status writer) waits for it, only the next change.
        let (dag, kind) = builder.build_model(prev, snapshot);
        let dag = Arc::new(dag);
        let path = match kind {
            dag::incremental::BuildKind::Full => PublishPath::Full,
            dag::incremental::BuildKind::Partial { objects } => PublishPath::Partial { objects },
        };
        let (xds_snapshot, retired) = encoder.encode(&dag);
        (self.route_shards).set(encoder.http_route_shards().unwrap_or(1).into());
        let xds_snapshot = Arc::new(xds_snapshot.sharing_types_of(&self.xds_tx.borrow()));
        // What is replaced is dropped on another thread: freeing a large model takes a while.
        let mut garbage = Garbage::default();
        // Envoy's resources first, so the push starts before the model is compared with the one
        // it replaces (after a full build, a walk of both whole models: 1–2 ms at 10k objects)
        // and before its watchers wake: the status writer sees a model whose resources are
        // already on the xDS server's watch.
        self.xds_tx.send_if_modified(|cur| {
            if cur.same_as(&xds_snapshot) {
                return false;
            }
            garbage.xds = Some(std::mem::replace(cur, xds_snapshot));
            true
        });
        self.dag_tx.send_if_modified(|cur| {
            if **cur == *dag {
                return false;
            }
            garbage.dag = Some(std::mem::replace(cur, dag.clone()));
            true
        });
        garbage.last = last.replace((snapshot.clone(), dag.clone()));
        // Counted when /metrics is next scraped, not here.
        garbage.objects = Some(self.objects.rebuilt(&dag, snapshot));
        garbage.retired = Some(retired);
        drop_later(garbage);
        if path == PublishPath::Full {
            let mut indexed = builder.take();
            let (snapshot, model) = (snapshot.clone(), dag.clone());
            let thread = std::thread::Builder::new().name("sluice-index".into());
            match thread.spawn(move || {
                indexed.index(&snapshot, &model);
                indexed
            }) {
                Ok(handle) => *indexing = Some(handle),
                // The builder left in place has no index: the next build is a full one.
                Err(e) => tracing::warn!(error = %e, "cannot start a thread to index a full build"),
            }
        }
        (dag, path)
    }

    /// Waits until the work the publications so far left behind is done: the index of the last
    /// full build is made, and the drop thread (the process's, shared by every pipeline) has freed
    /// what was handed to it before this call. A publication waits for neither (the next one waits
    /// for the index only); this is for a caller that wants the machine quiet, such as a benchmark
    /// before it times the next publication.
    pub fn settle(&self) {
        {
            let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
            let PipelineState {
                builder, indexing, ..
            } = &mut *state;
            take_index(indexing, builder);
        }
        // The drop thread frees in order: once this signal is dropped, so is all before it.
        struct Signal(mpsc::SyncSender<()>);
        impl Drop for Signal {
            fn drop(&mut self) {
                let _ = self.0.send(());
            }
        }
        let (tx, rx) = mpsc::sync_channel(1);
        drop_later(Signal(tx));
        let _ = rx.recv();
    }

    /// The endpoint fast path: recomputes the load assignments of the clusters of `services` and
    /// publishes them. False when it cannot tell (a cluster's Service or port is gone), and the
    /// caller rebuilds.
    fn publish_endpoints(
        &self,
        dag: &Dag,
        snapshot: &Snapshot,
        services: &std::collections::BTreeSet<crate::api::ObjKey>,
    ) -> bool {
        let current = self.xds_tx.borrow().clone();
        let held = current.of(translate::ResourceType::Endpoint);
        let mut changed = Vec::new();
        let mut load_assignments = translate::LoadAssignmentBytes::default();
        let clusters = services
            .iter()
            .flat_map(|s| dag::clusters_of_service(&dag.clusters, s));
        for (_, cluster) in clusters {
            let Some(endpoints) = dag::cluster_endpoints(snapshot, cluster) else {
                return false;
            };
            let updated = dag::Cluster {
                endpoints,
                ..(**cluster).clone()
            };
            let value = load_assignments.encode(&updated);
            if held.get(&*updated.name).map(|r| &r.body.value) == Some(&value) {
                continue;
            }
            changed.push((
                updated.name.to_string(),
                xds::cache::Body::new(translate::ResourceType::Endpoint, value),
            ));
        }
        if !changed.is_empty() {
            let next = current.with_replaced(translate::ResourceType::Endpoint, changed);
            let old = self.xds_tx.send_replace(Arc::new(next));
            drop_later(old);
        }
        true
    }

    /// The latest routing model (statuses included).
    pub fn dag(&self) -> watch::Receiver<Arc<Dag>> {
        self.dag_tx.subscribe()
    }

    /// The latest xDS resources.
    pub fn xds(&self) -> watch::Receiver<Arc<xds::Snapshot>> {
        self.xds_tx.subscribe()
    }
}

/// Waits for the index of the last full build, if one is being made, and puts it in `builder`.
fn take_index(
    indexing: &mut Option<std::thread::JoinHandle<dag::incremental::Incremental>>,
    builder: &mut dag::incremental::Incremental,
) {
    if let Some(handle) = indexing.take() {
        match handle.join() {
            Ok(indexed) => *builder = indexed,
            // The builder left in its place has no index: the next build is a full one.
            Err(_) => tracing::error!("indexing a full build panicked; building in full"),
        }
    }
}

/// What a full publication replaced.
#[derive(Default)]
struct Garbage {
    dag: Option<Arc<Dag>>,
    xds: Option<Arc<xds::Snapshot>>,
    last: Option<(Snapshot, Arc<Dag>)>,
    retired: Option<translate::incremental::Retired>,
    objects: Option<object_metrics::Replaced>,
}

/// How long the drop thread waits after it is handed something before it frees it: a change's
/// push to a few Envoys (the server's writes, their reads) takes well under this, and freeing
/// what the change replaced at once would take a core from it (the `push` benchmark measures
/// the difference).
const DROP_DELAY: std::time::Duration = std::time::Duration::from_millis(5);

/// Drops `value` on a background thread (values dropped there are freed in order). Freeing a
/// model of 10k objects takes tens of milliseconds, which a change's push should not wait for.
/// The allocator's own background thread gives the freed pages back to the operating system
/// (jemalloc's dirty decay, .cargo/config.toml). The thread frees what it is handed
/// [`DROP_DELAY`] later, after the push the garbage came with has gone out.
fn drop_later<T: Send + 'static>(value: T) {
    type Boxed = Box<dyn Send>;
    static DROPPER: OnceLock<Option<Mutex<mpsc::Sender<Boxed>>>> = OnceLock::new();
    let sender = DROPPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Boxed>();
        std::thread::Builder::new()
            .name("sluice-drop".into())
            .spawn(move || {
                while let Ok(first) = rx.recv() {
                    std::thread::sleep(DROP_DELAY);
                    drop(first);
                    rx.try_iter().for_each(drop);
                }
            })
            .ok()
            .map(|_| Mutex::new(tx))
    });
    let boxed: Boxed = Box::new(value);
    // Without the thread (it could not start), drop here.
    if let Some(tx) = sender {
        let _ = tx.lock().unwrap_or_else(|p| p.into_inner()).send(boxed);
    }
}

/// Logs the routing objects whose status changed since `prev` to invalid or orphaned (cluster
/// mode: every status is on its object; the log says what a build changed, not all of it again).
pub fn log_status_changes(prev: &Dag, dag: &Dag) {
    use crate::pmap::DiffItem;
    for item in prev.statuses.diff(&dag.statuses) {
        let (obj, status) = match item {
            DiffItem::Add(obj, status) => (obj, status),
            DiffItem::Update { new, .. } => new,
            DiffItem::Remove(..) => continue,
        };
        match status.state {
            State::Invalid => {
                tracing::warn!(object = %obj, description = %status.description, "invalid")
            }
            State::Orphaned => {
                tracing::warn!(object = %obj, description = %status.description, "orphaned")
            }
            State::Valid | State::Ignored => {}
        }
        log_warnings(obj, status);
    }
}

/// Logs the warnings of an object's status (an Ingress whose class annotation and field disagree).
fn log_warnings(obj: &crate::api::ObjectRef, status: &crate::dag::ObjectStatus) {
    for w in &status.warnings {
        tracing::warn!(object = %obj, reason = w.reason, warning = %w, "warning");
    }
}

/// Logs every routing object that is not valid (standalone mode has no status writer).
pub fn log_statuses(dag: &Dag) {
    let mut valid = 0usize;
    for (obj, status) in &dag.statuses {
        match status.state {
            State::Valid => valid += 1,
            State::Ignored => {}
            State::Invalid => {
                tracing::warn!(object = %obj, description = %status.description, "invalid")
            }
            State::Orphaned => {
                tracing::warn!(object = %obj, description = %status.description, "orphaned")
            }
        }
        log_warnings(obj, status);
    }
    tracing::info!(
        valid,
        objects = dag.statuses.len(),
        hosts = dag.vhosts.len(),
        clusters = dag.clusters.len(),
        "routing model built"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::ObjKey;
    use crate::store::SliceEndpoints;
    use crate::synth::{Shape, snapshot};

    /// The xDS resources a fresh pipeline publishes for `s` (always a full build).
    fn full(s: &Snapshot) -> Arc<xds::Snapshot> {
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        p.publish(s);
        p.xds().borrow().clone()
    }

    #[test]
    fn the_route_shards_gauge_follows_auto() {
        let options = translate::Options {
            route_shards: translate::RouteShards::Auto(translate::AutoRouteShards {
                shards: 4,
                on_at_hosts: 30,
                off_below_hosts: 10,
                ..Default::default()
            }),
            ..Default::default()
        };
        let p = Pipeline::new(dag::Options::default(), options);
        let mut registry = prometheus_client::registry::Registry::default();
        p.register_metrics(&mut registry);
        let gauge = || {
            let mut text = String::new();
            prometheus_client::encoding::text::encode(&mut text, &registry).unwrap();
            text
        };
        assert!(
            gauge().contains("sluice_http_route_shards 1\n"),
            "{}",
            gauge()
        );
        let shape = |routing_objects| Shape {
            routing_objects,
            endpoints_per_service: 1,
            unrelated_secrets: 0,
        };
        for (objects, want) in [(5, 1), (60, 4), (20, 4), (5, 1)] {
            let dag = p.publish(&snapshot(shape(objects)));
            assert_eq!(p.http_route_shards(), want, "{} hosts", dag.vhosts.len());
            let text = gauge();
            assert!(
                text.contains(&format!("sluice_http_route_shards {want}\n")),
                "{text}"
            );
        }
    }

    fn slice_key(s: &Snapshot, i: usize) -> ObjKey {
        s.endpoint_slices().keys().nth(i).unwrap().clone()
    }

    #[test]
    fn endpoint_changes_take_the_fast_path_and_publish_what_a_full_build_would() {
        let mut s = snapshot(Shape {
            routing_objects: 50,
            endpoints_per_service: 3,
            unrelated_secrets: 5,
        });
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        let (first, path) = p.publish_counted(&s);
        assert_eq!(path, PublishPath::Full);
        let mut rx = p.xds();
        rx.borrow_and_update();
        type Edit = fn(&mut SliceEndpoints);
        let edits: [(&str, Edit); 4] = [
            ("an address moves", |sl| {
                Arc::make_mut(&mut sl.ready)[0] = "10.99.0.1".parse().unwrap()
            }),
            ("an endpoint turns unready", |sl| {
                let mut ready = sl.ready.to_vec();
                ready.remove(1);
                sl.ready = ready.into();
            }),
            ("the slice moves to another Service", |sl| {
                sl.service = Some("nobody".into())
            }),
            ("the port is renamed away", |sl| {
                sl.ports[0].0 = "other".into()
            }),
        ];
        for (i, (what, edit)) in edits.into_iter().enumerate() {
            let key = slice_key(&s, i * 3);
            let mut sl = (**s.endpoint_slices().get(&key).unwrap()).clone();
            edit(&mut sl);
            s.put_endpoint_slice(key, Arc::new(sl));
            let (dag, path) = p.publish_counted(&s);
            assert_eq!(path, PublishPath::Endpoints, "{what}");
            assert!(Arc::ptr_eq(&dag, &first), "{what}: the model is unchanged");
            assert!(rx.has_changed().unwrap(), "{what}: Envoy gets an update");
            let got = rx.borrow_and_update().clone();
            assert_eq!(
                *got,
                *full(&s),
                "{what}: the same resources as a full build"
            );
        }
        // A slice removed, and one added.
        let gone = slice_key(&s, 20);
        let added = (**s.endpoint_slices().get(&gone).unwrap()).clone();
        s.remove_endpoint_slice(&gone);
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        assert_eq!(**p.xds().borrow(), *full(&s));
        s.put_endpoint_slice(
            ObjKey::new(gone.namespace.clone(), "extra"),
            Arc::new(added),
        );
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        assert_eq!(**p.xds().borrow(), *full(&s));
        // The same snapshot again: nothing to send.
        rx.borrow_and_update();
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        assert!(!rx.has_changed().unwrap());
    }

    #[test]
    fn a_rebuild_after_the_fast_path_does_not_reuse_stale_load_assignments() {
        let mut s = snapshot(Shape {
            routing_objects: 20,
            endpoints_per_service: 2,
            unrelated_secrets: 0,
        });
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        p.publish(&s);
        let key = slice_key(&s, 0);
        let original = s.endpoint_slices()[&key].clone();
        let mut moved = (*original).clone();
        Arc::make_mut(&mut moved.ready)[0] = "10.99.0.1".parse().unwrap();
        s.put_endpoint_slice(key.clone(), Arc::new(moved));
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        // Back to the endpoints of the last full build, together with a routing change: the
        // model's endpoints are those of the last full build again, Envoy's are not (the
        // encoder reuses only what it encoded itself for the previous model).
        s.put_endpoint_slice(key.clone(), original.clone());
        let last_route = s.ingressroutes_v1beta1.keys().last().unwrap().clone();
        s.ingressroutes_v1beta1.remove(&last_route);
        let (dag, path) = p.publish_counted(&s);
        assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
        assert_eq!(**p.xds().borrow(), *full(&s));
        assert_eq!(*dag, dag::build(&s, &dag::Options::default()));
        // Moved again through the fast path, then a routing change elsewhere that keeps the
        // moved endpoints: the rebuilt model and Envoy both have them.
        let mut moved = (*original).clone();
        Arc::make_mut(&mut moved.ready)[0] = "10.99.0.2".parse().unwrap();
        s.put_endpoint_slice(key, Arc::new(moved));
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        let endpoints = |p: &Pipeline| {
            let xds = p.xds().borrow().clone();
            xds.shared(translate::ResourceType::Endpoint)
                .unwrap()
                .clone()
        };
        let fast = endpoints(&p);
        // The path of a route to a Service changes (its cluster stays).
        let (key, root) = s
            .ingressroutes_v1beta1
            .iter()
            .find(|(_, r)| {
                r.spec
                    .routes
                    .first()
                    .is_some_and(|r| !r.services.is_empty())
            })
            .unwrap();
        let (key, mut root) = (key.clone(), (**root).clone());
        root.spec.routes[0].match_.push_str("/moved");
        let root = crate::store::Prepared::new(&key, Arc::new(root));
        s.ingressroutes_v1beta1.insert(key, Arc::new(root));
        let (dag, path) = p.publish_counted(&s);
        assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
        assert_eq!(**p.xds().borrow(), *full(&s));
        assert_eq!(*dag, dag::build(&s, &dag::Options::default()));
        // The load assignments the fast path published stay the published ones: xDS streams
        // see the routing change only.
        assert!(Arc::ptr_eq(&fast, &endpoints(&p)));
    }

    #[test]
    fn any_other_change_rebuilds() {
        let mut s = snapshot(Shape {
            routing_objects: 20,
            endpoints_per_service: 2,
            unrelated_secrets: 2,
        });
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        p.publish(&s);
        // A Service changes: the routing objects that name it are built again.
        let key = s.services().keys().next().unwrap().clone();
        let mut svc = (**s.services().get(&key).unwrap()).clone();
        let mut ports = svc.ports.into_vec();
        ports.push(crate::store::ServicePortRef {
            name: Some("admin".into()),
            port: 9000,
            app_protocol: Default::default(),
        });
        svc.ports = ports.into();
        s.put_service(key.clone(), Arc::new(svc.clone()));
        let (_, path) = p.publish_counted(&s);
        assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
        assert_eq!(**p.xds().borrow(), *full(&s));
        // The same content again in a new object: nothing changed.
        s.put_service(key, Arc::new(svc));
        assert_eq!(p.publish_counted(&s).1, PublishPath::Endpoints);
        // A slice and a route in one go: the part of the model the route affects, with the
        // slice's endpoints.
        let skey = slice_key(&s, 0);
        let mut sl = (**s.endpoint_slices().get(&skey).unwrap()).clone();
        Arc::make_mut(&mut sl.ready)[0] = "10.99.0.3".parse().unwrap();
        s.put_endpoint_slice(skey, Arc::new(sl));
        let rkey = s.ingressroutes_v1beta1.keys().next().unwrap().clone();
        s.ingressroutes_v1beta1.remove(&rkey);
        let (dag, path) = p.publish_counted(&s);
        assert!(matches!(path, PublishPath::Partial { .. }), "{path:?}");
        assert_eq!(**p.xds().borrow(), *full(&s));
        assert!(dag.statuses.len() < 20);
        // An IngressClass comes: full build.
        let class = k8s_openapi::api::networking::v1::IngressClass {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some("other".into()),
                ..Default::default()
            },
            ..Default::default()
        };
        s.ingress_classes
            .insert(ObjKey::new("", "other"), Arc::new(class));
        assert_eq!(p.publish_counted(&s).1, PublishPath::Full);
        assert_eq!(**p.xds().borrow(), *full(&s));
    }

    #[test]
    fn settle_waits_for_the_index_and_for_what_was_dropped_before_it() {
        use std::sync::atomic::{AtomicBool, Ordering};
        struct Slow(Arc<AtomicBool>);
        impl Drop for Slow {
            fn drop(&mut self) {
                std::thread::sleep(std::time::Duration::from_millis(100));
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        let mut s = snapshot(Shape {
            routing_objects: 50,
            endpoints_per_service: 2,
            unrelated_secrets: 0,
        });
        assert_eq!(p.publish_counted(&s).1, PublishPath::Full);
        let dropped = Arc::new(AtomicBool::new(false));
        drop_later(Slow(dropped.clone()));
        p.settle();
        assert!(
            dropped.load(Ordering::SeqCst),
            "settle returned before the drop"
        );
        assert!(p.state.lock().unwrap().indexing.is_none());
        // The index is back in the builder: a change to one object builds in part.
        let key = s.ingressroutes_v1beta1.keys().next().unwrap().clone();
        s.ingressroutes_v1beta1.remove(&key);
        assert!(matches!(
            p.publish_counted(&s).1,
            PublishPath::Partial { .. }
        ));
        // With nothing left behind, settle returns at once.
        p.settle();
        p.settle();
    }

    #[test]
    fn publish_wakes_watchers_only_on_change() {
        let p = Pipeline::new(dag::Options::default(), translate::Options::default());
        let mut xds_rx = p.xds();
        let dag_rx = p.dag();
        p.publish(&Snapshot::default());
        assert!(!xds_rx.has_changed().unwrap());
        assert!(!dag_rx.has_changed().unwrap());
        let other = Pipeline::new(
            dag::Options::default(),
            translate::Options {
                http_port: 1,
                ..Default::default()
            },
        );
        // Different listener port: different resources for the same (empty) model.
        let a = xds_rx.borrow_and_update().clone();
        let b = other.xds().borrow().clone();
        assert_ne!(a, b);
    }

    /// At scale, every change is seen: the snapshot maps are persistent B-trees whose comparison
    /// skips shared nodes, and a change anywhere in a large map must still be found.
    #[test]
    fn every_change_to_a_large_snapshot_is_rebuilt_and_pushed() {
        let mut snap = crate::synth::snapshot(crate::synth::Shape {
            routing_objects: 1000,
            endpoints_per_service: 2,
            unrelated_secrets: 10,
        });
        let p = Pipeline::new(
            crate::dag::Options::default(),
            crate::translate::Options::default(),
        );
        p.publish(&snap);
        let mut rx = p.xds();
        rx.borrow_and_update();
        for n in 0..60 {
            let i = (n * 7919) % 400;
            let key = ObjKey::new(format!("team-{}", i % 100), format!("root-{i}"));
            let mut root = (*snap.ingressroutes_v1beta1[&key]).clone();
            root.spec.routes[0].match_ = format!("/changed-{n}");
            let root = crate::store::Prepared::new(&key, Arc::new(root));
            snap.ingressroutes_v1beta1.insert(key, Arc::new(root));
            let (dag, path) = p.publish_counted(&snap);
            assert!(
                matches!(path, PublishPath::Partial { objects: 1.. }),
                "change {n}: {path:?}"
            );
            assert!(rx.has_changed().unwrap(), "change {n}: nothing pushed");
            rx.borrow_and_update();
            if n % 20 == 0 {
                assert_eq!(
                    *dag,
                    crate::dag::build(&snap, &crate::dag::Options::default()),
                    "change {n}"
                );
            }
        }
    }
}
