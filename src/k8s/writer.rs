//! The status writer: the leader's only job. On becoming leader and when the load-balancer address
//! changes it plans a status for every routing object ([`super::status::plan`]); after every other
//! published build, for the objects whose verdict or observed status changed since its last plan.
//! It writes only those that differ from what the cluster holds.
//!
//! Writes are server-side applies on the status subresource with field manager `sluice` and
//! `force` (sluice is the only writer of these fields; forcing takes them over from a previous
//! owner such as an older sluice or a human `kubectl edit --subresource status`). Requests go through
//! a token bucket ([`RateLimit`], 500 writes/s, bursts of 1,000 by default, `--status-write-qps`
//! and `--status-write-burst`) with up to 64 writes in flight (`--status-write-concurrency`), so a
//! burst of 1,000 new objects gets its statuses within a second while a full resync of a very big
//! cluster is still paced. A failed write (409 Conflict, 429, 5xx, timeouts) is retried
//! with exponential backoff — re-planned from the latest state each time, so a retry never writes a
//! stale status; a 404 means the object is gone and is dropped.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use serde_json::Value;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::api::{Kind, ObjectRef};
use crate::pmap::DiffItem;

use super::metrics::Metrics;
use super::rebuild::Built;
use super::state::{ClusterState, FIELD_MANAGER, Rejected, prepare};
use super::status::{LoadBalancer, Plan, Verdict, apply_body, plan, writes_status};
use super::watch::lock;

/// A token bucket: `rate` requests per second on average, `burst` at once.
#[derive(Debug)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimit {
    pub fn new(rate: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimit {
            rate: rate.max(0.1),
            burst,
            tokens: burst,
            last: Instant::now(),
        }
    }

    /// How long to wait before the next request may go (and takes its token).
    fn take(&mut self, now: Instant) -> Duration {
        let elapsed = now.saturating_duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + elapsed * self.rate).min(self.burst);
        self.tokens -= 1.0;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

/// Everything the writer needs.
pub struct WriterContext {
    pub client: Client,
    pub state: Arc<Mutex<ClusterState>>,
    /// The resource each kind is served at (from discovery).
    pub resources: Arc<Mutex<BTreeMap<Kind, ApiResource>>>,
    pub metrics: Metrics,
    pub rate: f64,
    pub burst: u32,
    /// Writes in flight at once.
    pub concurrency: usize,
    /// How long one write may take, from sending it to its answer ([`WRITE_TIMEOUT`]).
    pub write_timeout: Duration,
}

/// How long one status write may take before it is abandoned and retried like a failed one. The
/// API server answers a status apply in milliseconds (100–200 ms while it creates hundreds of
/// objects); a write that takes this long is hanging.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a status write did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error("no answer within {0:?}")]
    TimedOut(Duration),
    /// The replica stopped leading before the write was sent.
    #[error("this replica no longer holds the lease")]
    NotLeader,
}

/// The inputs the writer reacts to.
pub struct WriterInputs {
    pub built: watch::Receiver<Option<Arc<Built>>>,
    pub leader: watch::Receiver<bool>,
    pub load_balancer: watch::Receiver<Option<LoadBalancer>>,
    pub shutdown: watch::Receiver<bool>,
}

/// What the writer is doing between two plans.
#[derive(Default)]
struct Pass {
    build: u64,
    objects: usize,
    planned: usize,
    written: usize,
    failed: usize,
    /// The pass's end was logged.
    reported: bool,
}

/// Runs until shutdown.
///
/// Writes are a continuous pipeline, not passes that wait for their slowest write: every input
/// change (a build, the lease, the load-balancer address) plans again from the latest state, and
/// each free slot (of `concurrency`, paced by the token bucket) takes the next planned write at
/// once. An object whose write is in flight is left out of a plan and planned again when the
/// write ends. A failed write holds its object back for the backoff, then plans again.
///
/// Only a leader writes. When the lease is lost (the elector's renew deadline passed, or another
/// replica holds it) the writer starts nothing more and abandons every write in flight at once
/// (dropping a request closes its connection); a write waiting for its turn in the token bucket
/// checks the lease again right before it is sent. Each write is abandoned after
/// `write_timeout`, and retried like a failed one.
pub async fn write_loop(ctx: WriterContext, mut inputs: WriterInputs) {
    let mut limiter = RateLimit::new(ctx.rate, ctx.burst);
    let mut backoff = Duration::from_millis(200);
    let concurrency = ctx.concurrency.max(1);
    // Read by each write right before it is sent.
    let lease = inputs.leader.clone();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    // Objects with a write in flight, and those of them a later plan left out.
    let mut busy: HashSet<ObjectRef> = HashSet::new();
    let mut skipped: HashSet<ObjectRef> = HashSet::new();
    // Objects whose write failed, held back until `retry_at`.
    let mut held: HashSet<ObjectRef> = HashSet::new();
    let mut retry_at: Option<Instant> = None;
    let mut queue = Queue::default();
    let mut pass = Pass {
        reported: true,
        ..Pass::default()
    };
    let mut replan = true;
    // The next plan covers every object (at start, on a lease or load-balancer change, after a
    // backoff); otherwise it covers what changed since the last one.
    let mut full = true;
    // What the last plan was made from.
    let mut planned_from: Option<(Arc<Built>, Option<LoadBalancer>)> = None;
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let leading = *inputs.leader.borrow_and_update();
        if !leading && !in_flight.is_empty() {
            tracing::warn!(
                abandoned = in_flight.len(),
                "not leading any more: abandoning the status writes in flight"
            );
            in_flight.clear();
            busy.clear();
            skipped.clear();
        }
        if replan {
            replan = false;
            let built = inputs.built.borrow_and_update().clone();
            let lb = inputs.load_balancer.borrow_and_update().clone();
            let observed_changes = lock(&ctx.state).take_observed_changes();
            match (leading, built) {
                (true, Some(built)) => {
                    let since = planned_from
                        .take()
                        .filter(|(_, prev_lb)| !full && *prev_lb == lb)
                        .map(|(prev, _)| prev);
                    let planned = match since {
                        // Only objects whose verdict or observed status changed since the last
                        // plan can plan differently: a plan of every object per build was most
                        // of sluice's CPU while hundreds of objects were being created.
                        Some(prev) => {
                            let changed = changed_since(&prev, &built, observed_changes);
                            for obj in &changed {
                                queue.remove(obj);
                            }
                            plan_statuses(&ctx, &built, lb.as_ref(), Some(&changed))
                        }
                        None => {
                            queue.clear();
                            plan_statuses(&ctx, &built, lb.as_ref(), None)
                        }
                    };
                    for (obj, status) in planned {
                        if busy.contains(&obj) {
                            skipped.insert(obj);
                        } else if !held.contains(&obj) {
                            queue.push(obj, status);
                        }
                    }
                    if full || pass.reported {
                        pass = Pass {
                            build: built.version,
                            objects: built.dag.statuses.len() + built.rejected.len(),
                            planned: queue.len(),
                            ..Pass::default()
                        };
                    } else {
                        pass.build = built.version;
                        pass.objects = built.dag.statuses.len() + built.rejected.len();
                        pass.planned = pass.written + pass.failed + in_flight.len() + queue.len();
                    }
                    full = false;
                    planned_from = Some((built, lb));
                }
                _ => {
                    queue.clear();
                    planned_from = None;
                    full = true;
                }
            }
        }
        // Start what the free slots allow; a replica that lost the lease starts nothing.
        while leading && in_flight.len() < concurrency {
            let Some((obj, status)) = queue.pop() else {
                break;
            };
            let wait = limiter.take(Instant::now());
            busy.insert(obj.clone());
            let (ctx, lease) = (&ctx, &lease);
            in_flight.push(async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                let result = if *lease.borrow() {
                    tokio::time::timeout(ctx.write_timeout, write_one(ctx, &obj, &status))
                        .await
                        .unwrap_or(Err(WriteError::TimedOut(ctx.write_timeout)))
                } else {
                    Err(WriteError::NotLeader)
                };
                (obj, result)
            });
        }
        if !pass.reported && queue.is_empty() && in_flight.is_empty() {
            pass.reported = true;
            tracing::info!(
                build = pass.build,
                objects = pass.objects,
                planned = pass.planned,
                written = pass.written,
                failed = pass.failed,
                "status pass complete"
            );
        }
        let retry = async {
            match retry_at {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some((obj, result)) = in_flight.next(), if !in_flight.is_empty() => {
                busy.remove(&obj);
                let was_skipped = skipped.remove(&obj);
                match result {
                    Ok(()) => {
                        pass.written += 1;
                        if held.is_empty() {
                            backoff = Duration::from_millis(200);
                        }
                    }
                    Err(WriteError::Api(kube::Error::Api(s))) if s.code == 404 => {
                        tracing::debug!(object = %obj, "object gone before its status was written");
                    }
                    Err(WriteError::NotLeader) => {
                        tracing::debug!(object = %obj, "not leading any more: status write not sent");
                    }
                    Err(e) => {
                        pass.failed += 1;
                        ctx.metrics.count_write(obj.kind.kind(), false);
                        tracing::warn!(
                            object = %obj,
                            error = %e,
                            retry_in_ms = backoff.as_millis() as u64,
                            "status write failed; will retry"
                        );
                        held.insert(obj.clone());
                        if retry_at.is_none() {
                            retry_at = Some(Instant::now() + backoff);
                            backoff = (backoff * 2).min(Duration::from_secs(30));
                        }
                    }
                }
                // Left out of the last plan while in flight: plan it now, from the same inputs.
                if was_skipped
                    && !held.contains(&obj)
                    && let Some((built, lb)) = &planned_from
                {
                    let again = plan_statuses(&ctx, built, lb.as_ref(), Some(&[obj]));
                    pass.planned += again.len();
                    for (obj, status) in again {
                        queue.push(obj, status);
                    }
                }
            }
            _ = retry => {
                retry_at = None;
                held.clear();
                replan = true;
                full = true;
            }
            _ = changed(&mut inputs.built) => replan = true,
            _ = changed(&mut inputs.leader) => {
                replan = true;
                full = true;
            }
            _ = changed(&mut inputs.load_balancer) => replan = true,
            _ = changed(&mut inputs.shutdown) => {}
        }
    }
}

/// Resolves when the value changes; never when the sender is gone.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Planned writes in the order they were planned; planning an object again replaces its write.
#[derive(Default)]
struct Queue {
    order: VecDeque<ObjectRef>,
    writes: HashMap<ObjectRef, Value>,
}

impl Queue {
    fn push(&mut self, obj: ObjectRef, status: Value) {
        if self.writes.insert(obj.clone(), status).is_none() {
            self.order.push_back(obj);
        }
    }

    fn remove(&mut self, obj: &ObjectRef) {
        self.writes.remove(obj);
    }

    fn pop(&mut self) -> Option<(ObjectRef, Value)> {
        while let Some(obj) = self.order.pop_front() {
            if let Some(status) = self.writes.remove(&obj) {
                return Some((obj, status));
            }
        }
        None
    }

    fn clear(&mut self) {
        self.order.clear();
        self.writes.clear();
    }

    fn len(&self) -> usize {
        self.writes.len()
    }

    fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }
}

/// The objects whose plan may differ between a plan made from `prev` and one from `built` (with
/// the same load-balancer address): those whose verdict differs (a diff of the two builds'
/// persistent status maps, which steps over what an incremental build shares), every object
/// that does not decode (few), and those whose observed status changed in between.
fn changed_since(
    prev: &Built,
    built: &Built,
    mut observed_changes: HashSet<ObjectRef>,
) -> Vec<ObjectRef> {
    if !Arc::ptr_eq(&prev.dag, &built.dag) {
        for item in prev.dag.statuses.diff(&built.dag.statuses) {
            let r = match item {
                DiffItem::Add(r, _) | DiffItem::Remove(r, _) => r,
                DiffItem::Update { new: (r, _), .. } => r,
            };
            if !observed_changes.contains(r) {
                observed_changes.insert(r.clone());
            }
        }
    }
    for r in prev.rejected.keys().chain(built.rejected.keys()) {
        if !observed_changes.contains(r) {
            observed_changes.insert(r.clone());
        }
    }
    observed_changes.into_iter().collect()
}

/// The status of every routing object of one build that differs from what the cluster holds
/// (of the `only` objects).
fn plan_statuses(
    ctx: &WriterContext,
    built: &Built,
    lb: Option<&LoadBalancer>,
    only: Option<&[ObjectRef]>,
) -> Vec<(ObjectRef, Value)> {
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now().to_string());
    let st = lock(&ctx.state);
    type Candidate<'b> = (&'b ObjectRef, Verdict<'b>, Option<i64>);
    fn dag<'b>((r, s): (&'b ObjectRef, &'b crate::dag::ObjectStatus)) -> Candidate<'b> {
        (r, Verdict::Dag(s), s.generation)
    }
    fn rejected<'b>((r, x): (&'b ObjectRef, &'b Rejected)) -> Candidate<'b> {
        (r, Verdict::Rejected(x), x.generation)
    }
    // Some objects' verdicts, or every object's (walked, not collected: a plan runs per build).
    let verdicts: Box<dyn Iterator<Item = Candidate<'_>> + '_> = match only {
        Some(only) => Box::new(only.iter().flat_map(|r| {
            built
                .dag
                .statuses
                .get_key_value(r)
                .map(dag)
                .into_iter()
                .chain(built.rejected.get_key_value(r).map(rejected))
        })),
        None => Box::new(
            built
                .dag
                .statuses
                .iter()
                .map(dag)
                .chain(built.rejected.iter().map(rejected)),
        ),
    };
    verdicts
        .filter(|(r, _, _)| writes_status(r.kind))
        .filter_map(|(r, verdict, generation)| {
            // Gone, or changed since this build (the next build has the current verdict).
            let observed = st.observed(r)?;
            if observed.generation > generation {
                return None;
            }
            match plan(r.kind, verdict, observed, lb, &now) {
                Plan::Keep => None,
                Plan::Apply(status) => Some((r.clone(), status)),
            }
        })
        .collect()
}

async fn write_one(ctx: &WriterContext, obj: &ObjectRef, status: &Value) -> Result<(), WriteError> {
    let Some(ar) = ctx
        .resources
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&obj.kind)
        .cloned()
    else {
        return Ok(());
    };
    let api: Api<DynamicObject> = if obj.key.namespace.is_empty() {
        Api::all_with(ctx.client.clone(), &ar)
    } else {
        Api::namespaced_with(ctx.client.clone(), &obj.key.namespace, &ar)
    };
    let body = apply_body(
        &ar.api_version,
        &ar.kind,
        &obj.key.name,
        &obj.key.namespace,
        status,
    );
    let params = PatchParams::apply(FIELD_MANAGER).force();
    let written = api
        .patch_status(&obj.key.name, &params, &Patch::Apply(&body))
        .await?;
    let total = ctx.metrics.count_write(obj.kind.kind(), true);
    tracing::info!(object = %obj, writes_total = total, "status written");
    // Remember what the cluster now holds, so the next pass does not write it again before the
    // watch event arrives.
    if let Ok(p) = serde_json::to_value(written)
        .map_err(|_| ())
        .and_then(|v| prepare(obj.kind, v).map_err(|_| ()))
    {
        lock(&ctx.state).set_observed(obj, p.observed);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ingressroute(name: &str) -> Value {
        serde_json::json!({
            "apiVersion": "contour.heptio.com/v1beta1",
            "kind": "IngressRoute",
            "metadata": {"name": name, "namespace": "team", "generation": 1, "resourceVersion": "1"},
            "spec": {"virtualhost": {"fqdn": format!("{name}.example.com")},
                     "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}
        })
    }

    /// Stores root IngressRoutes with these names, as the watch would.
    fn add_routes(state: &Mutex<ClusterState>, names: &[&str]) {
        for name in names {
            let p = prepare(Kind::IngressRouteV1beta1, ingressroute(name)).unwrap();
            lock(state).apply(p);
        }
    }

    /// The build of whatever `state` holds.
    fn build(state: &Mutex<ClusterState>, version: u64) -> Arc<Built> {
        let st = lock(state);
        let snapshot = Arc::new(st.snapshot().clone());
        let dag = Arc::new(crate::dag::build(&snapshot, &Default::default()));
        Arc::new(Built {
            version,
            snapshot,
            dag,
            rejected: Arc::new(st.rejected().clone()),
        })
    }

    /// An apiserver that answers status applies of `names` (namespace `team`) with the object
    /// carrying the applied status, records each write's object name, and holds a write of `slow`
    /// until `released` is true.
    fn mock_apiserver(
        names: &[&str],
        slow: &'static str,
        released: watch::Receiver<bool>,
    ) -> (Client, Arc<Mutex<Vec<String>>>) {
        use axum::http::{Request, Response};
        use http_body_util::BodyExt;
        let objects: BTreeMap<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), ingressroute(n)))
            .collect();
        let written = Arc::new(Mutex::new(Vec::<String>::new()));
        let apiserver = {
            let written = written.clone();
            tower::service_fn(move |req: Request<kube::client::Body>| {
                let (objects, written, mut released) =
                    (objects.clone(), written.clone(), released.clone());
                async move {
                    // …/namespaces/team/ingressroutes/<name>/status
                    let name = req
                        .uri()
                        .path()
                        .rsplit('/')
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    let body = req.into_body().collect().await?.to_bytes();
                    let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                    if name == slow {
                        let _ = released.wait_for(|r| *r).await;
                    }
                    let mut object = objects.get(&name).cloned().unwrap_or_default();
                    object["status"] = patch["status"].clone();
                    written.lock().unwrap().push(name);
                    Ok::<_, kube::Error>(Response::new(kube::client::Body::from(
                        serde_json::to_vec(&object).unwrap_or_default(),
                    )))
                }
            })
        };
        (Client::new(apiserver, "default"), written)
    }

    /// What a test's API server saw of each write, by object name.
    #[derive(Clone, Default)]
    struct Seen {
        /// Requests that reached it.
        sent: Arc<Mutex<Vec<String>>>,
        /// Requests it answered.
        answered: Arc<Mutex<Vec<String>>>,
        /// Requests the client gave up before they were answered.
        abandoned: Arc<Mutex<Vec<String>>>,
    }

    /// Records a request the client drops before it is answered.
    struct Abandon(Option<(String, Arc<Mutex<Vec<String>>>)>);

    impl Drop for Abandon {
        fn drop(&mut self) {
            if let Some((name, abandoned)) = self.0.take() {
                abandoned.lock().unwrap().push(name);
            }
        }
    }

    /// An apiserver like [`mock_apiserver`] whose answer to the `n`th write (from 0) of an
    /// object never comes when `hangs(name, n)`.
    fn hanging_apiserver(names: &[&str], hangs: fn(&str, usize) -> bool) -> (Client, Seen) {
        use axum::http::{Request, Response};
        use http_body_util::BodyExt;
        let objects: BTreeMap<String, Value> = names
            .iter()
            .map(|n| (n.to_string(), ingressroute(n)))
            .collect();
        let seen = Seen::default();
        let apiserver = {
            let seen = seen.clone();
            tower::service_fn(move |req: Request<kube::client::Body>| {
                let (objects, seen) = (objects.clone(), seen.clone());
                async move {
                    let name = req
                        .uri()
                        .path()
                        .rsplit('/')
                        .nth(1)
                        .unwrap_or("")
                        .to_string();
                    let body = req.into_body().collect().await?.to_bytes();
                    let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                    let attempt = {
                        let mut sent = seen.sent.lock().unwrap();
                        sent.push(name.clone());
                        sent.iter().filter(|n| **n == name).count() - 1
                    };
                    let mut guard = Abandon(Some((name.clone(), seen.abandoned.clone())));
                    if hangs(&name, attempt) {
                        std::future::pending::<()>().await;
                    }
                    guard.0 = None;
                    let mut object = objects.get(&name).cloned().unwrap_or_default();
                    object["status"] = patch["status"].clone();
                    seen.answered.lock().unwrap().push(name);
                    Ok::<_, kube::Error>(Response::new(kube::client::Body::from(
                        serde_json::to_vec(&object).unwrap_or_default(),
                    )))
                }
            })
        };
        (Client::new(apiserver, "default"), seen)
    }

    /// Waits until `list` holds `name` `times` times.
    async fn seen_times(list: &Mutex<Vec<String>>, name: &str, times: usize) {
        written_times(list, name, times).await;
    }

    /// A running writer's inputs.
    struct Running {
        built: watch::Sender<Option<Arc<Built>>>,
        leader: watch::Sender<bool>,
        shutdown: watch::Sender<bool>,
        task: tokio::task::JoinHandle<()>,
    }

    /// The writer over `state` as leader, from build 1 of it.
    fn spawn_writer(
        client: Client,
        state: &Arc<Mutex<ClusterState>>,
    ) -> (
        watch::Sender<Option<Arc<Built>>>,
        watch::Sender<bool>,
        tokio::task::JoinHandle<()>,
    ) {
        let r = spawn_writer_with(client, state, WRITE_TIMEOUT);
        let leader = r.leader;
        let task = tokio::spawn(async move {
            let _ = r.task.await;
            drop(leader);
        });
        (r.built, r.shutdown, task)
    }

    /// The writer over `state` as leader, from build 1 of it, each write bounded by `timeout`.
    fn spawn_writer_with(
        client: Client,
        state: &Arc<Mutex<ClusterState>>,
        write_timeout: Duration,
    ) -> Running {
        let resource = ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("contour.heptio.com", "v1beta1", "IngressRoute"),
            "ingressroutes",
        );
        let ctx = WriterContext {
            client,
            state: state.clone(),
            resources: Arc::new(Mutex::new(BTreeMap::from([(
                Kind::IngressRouteV1beta1,
                resource,
            )]))),
            metrics: Metrics::default(),
            rate: 1000.0,
            burst: 100,
            concurrency: 4,
            write_timeout,
        };
        let (built_tx, built) = watch::channel(Some(build(state, 1)));
        let (leader_tx, leader) = watch::channel(true);
        let (lb_tx, load_balancer) = watch::channel(None);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let task = tokio::spawn(async move {
            write_loop(
                ctx,
                WriterInputs {
                    built,
                    leader,
                    load_balancer,
                    shutdown,
                },
            )
            .await;
            drop(lb_tx);
        });
        Running {
            built: built_tx,
            leader: leader_tx,
            shutdown: shutdown_tx,
            task,
        }
    }

    /// A write the API server never answers is abandoned after the write timeout and retried;
    /// the other objects' writes go on meanwhile.
    #[tokio::test]
    async fn a_write_that_never_ends_is_abandoned_and_retried() {
        let (client, seen) =
            hanging_apiserver(&["stuck", "a"], |name, n| name == "stuck" && n == 0);
        let state = Arc::new(Mutex::new(ClusterState::default()));
        add_routes(&state, &["stuck", "a"]);
        let w = spawn_writer_with(client, &state, Duration::from_millis(300));
        seen_times(&seen.answered, "a", 1).await;
        seen_times(&seen.abandoned, "stuck", 1).await;
        seen_times(&seen.answered, "stuck", 1).await;
        w.shutdown.send_replace(true);
        w.task.await.unwrap();
        assert_eq!(
            seen.sent
                .lock()
                .unwrap()
                .iter()
                .filter(|n| *n == "stuck")
                .count(),
            2
        );
    }

    /// A replica that stops leading abandons its writes in flight at once (not at their
    /// timeout) and starts none until it leads again.
    #[tokio::test]
    async fn losing_the_lease_abandons_the_writes_in_flight_and_starts_none() {
        let (client, seen) =
            hanging_apiserver(&["stuck", "a", "b"], |name, n| name == "stuck" && n == 0);
        let state = Arc::new(Mutex::new(ClusterState::default()));
        add_routes(&state, &["stuck", "a"]);
        let w = spawn_writer_with(client, &state, Duration::from_secs(600));
        seen_times(&seen.answered, "a", 1).await;
        seen_times(&seen.sent, "stuck", 1).await;
        w.leader.send_replace(false);
        let lost = Instant::now();
        seen_times(&seen.abandoned, "stuck", 1).await;
        assert!(lost.elapsed() < Duration::from_secs(5));
        // A new object while following: nothing is sent.
        add_routes(&state, &["b"]);
        w.built.send_replace(Some(build(&state, 2)));
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut sent = seen.sent.lock().unwrap().clone();
        sent.sort();
        assert_eq!(
            sent,
            ["a", "stuck"],
            "a replica that does not lead sent a write"
        );
        w.leader.send_replace(true);
        seen_times(&seen.answered, "b", 1).await;
        seen_times(&seen.answered, "stuck", 1).await;
        w.shutdown.send_replace(true);
        w.task.await.unwrap();
    }

    /// Waits until `name` was written `times` times.
    async fn written_times(written: &Mutex<Vec<String>>, name: &str, times: usize) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while written
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == name)
            .count()
            < times
        {
            assert!(
                Instant::now() < deadline,
                "{name} was not written {times} times"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// A slow write does not hold back the writes of later builds: with a write of `slow` hanging
    /// in the apiserver, the status of an object created afterwards is still written.
    #[tokio::test]
    async fn a_slow_write_does_not_hold_back_later_builds() {
        let (release, released) = watch::channel(false);
        let (client, written) = mock_apiserver(&["slow", "a", "b"], "slow", released);
        let state = Arc::new(Mutex::new(ClusterState::default()));
        add_routes(&state, &["slow", "a"]);
        let (built_tx, shutdown_tx, writer) = spawn_writer(client, &state);
        written_times(&written, "a", 1).await;
        // A new object, a new build, while `slow` still hangs.
        add_routes(&state, &["b"]);
        built_tx.send_replace(Some(build(&state, 2)));
        written_times(&written, "b", 1).await;
        assert!(!written.lock().unwrap().iter().any(|n| n == "slow"));
        release.send_replace(true);
        written_times(&written, "slow", 1).await;
        shutdown_tx.send_replace(true);
        writer.await.unwrap();
        // Each status written once: `slow`, in flight during the second build, was not sent again.
        let mut all = written.lock().unwrap().clone();
        all.sort();
        assert_eq!(all, ["a", "b", "slow"]);
    }

    /// A plan after a build covers the objects whose verdict changed and those whose observed
    /// status changed: a status edited by someone else is written again at the next build even
    /// though its verdict did not change, and nothing else is written again.
    #[tokio::test]
    async fn a_status_edited_in_the_cluster_is_corrected_at_the_next_build() {
        let (_release, released) = watch::channel(false);
        let (client, written) = mock_apiserver(&["a", "b"], "", released);
        let state = Arc::new(Mutex::new(ClusterState::default()));
        add_routes(&state, &["a", "b"]);
        let (built_tx, shutdown_tx, writer) = spawn_writer(client, &state);
        written_times(&written, "a", 1).await;
        written_times(&written, "b", 1).await;
        // Someone edits a's status (the watch delivers it); then an unrelated change is built.
        let mut edited = ingressroute("a");
        edited["status"] = serde_json::json!({"currentStatus": "orphaned", "description": "x"});
        lock(&state).apply(prepare(Kind::IngressRouteV1beta1, edited).unwrap());
        let p = prepare(Kind::IngressRouteV1beta1, ingressroute("c")).unwrap();
        lock(&state).apply(p);
        built_tx.send_replace(Some(build(&state, 2)));
        written_times(&written, "a", 2).await;
        written_times(&written, "c", 1).await;
        // And a build with nothing new writes nothing.
        built_tx.send_replace(Some(build(&state, 3)));
        tokio::time::sleep(Duration::from_millis(300)).await;
        shutdown_tx.send_replace(true);
        writer.await.unwrap();
        let mut all = written.lock().unwrap().clone();
        all.sort();
        assert_eq!(all, ["a", "a", "b", "c"]);
    }

    #[test]
    fn a_plan_after_a_build_looks_only_at_what_changed() {
        use crate::dag::{Dag, ObjectStatus, State};
        let r = |n: &str| ObjectRef::new(Kind::IngressRouteV1beta1, "team", n);
        let valid = ObjectStatus {
            state: State::Valid,
            description: "valid IngressRoute".into(),
            messages: Vec::new(),
            warnings: Vec::new(),
            generation: Some(1),
            gateway: None,
            condition: None,
        };
        let mut dag = Dag::default();
        for i in 0..1000 {
            dag.statuses.insert(r(&format!("r{i}")), valid.clone());
        }
        let built = |dag: Dag, rejected: BTreeMap<ObjectRef, Rejected>| Built {
            version: 1,
            snapshot: Default::default(),
            dag: Arc::new(dag),
            rejected: Arc::new(rejected),
        };
        let prev = built(dag.clone(), BTreeMap::new());
        // The next build: r7's verdict changed, r8 is gone, `bad` does not decode.
        let mut next = dag;
        next.statuses.insert(
            r("r7"),
            ObjectStatus {
                generation: Some(2),
                ..valid
            },
        );
        next.statuses.remove(&r("r8"));
        let bad = Rejected {
            error: crate::validate::FieldError::new("spec", "InvalidSpec", "not an object"),
            generation: Some(1),
        };
        let next = built(next, BTreeMap::from([(r("bad"), bad)]));
        let mut got = changed_since(&prev, &next, HashSet::from([r("r9"), r("r7")]));
        got.sort();
        assert_eq!(got, [r("bad"), r("r7"), r("r8"), r("r9")]);
        // The same build again: only what was observed.
        assert_eq!(changed_since(&next, &next, HashSet::new()), [r("bad")]);
    }

    #[test]
    fn token_bucket_allows_the_burst_then_paces() {
        let t0 = Instant::now();
        let mut rl = RateLimit::new(10.0, 3);
        rl.last = t0;
        for _ in 0..3 {
            assert_eq!(rl.take(t0), Duration::ZERO);
        }
        assert_eq!(rl.take(t0), Duration::from_millis(100));
        // A second later the bucket refilled (capped at the burst).
        let t1 = t0 + Duration::from_secs(1);
        let mut rl = RateLimit::new(10.0, 3);
        rl.last = t1 - Duration::from_secs(10);
        for _ in 0..3 {
            assert_eq!(rl.take(t1), Duration::ZERO);
        }
        assert!(rl.take(t1) > Duration::ZERO);
    }
}
