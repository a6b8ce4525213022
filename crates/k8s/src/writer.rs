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
//!
//! Each write carries the object's resourceVersion as this replica last saw it, which the API
//! server checks: a write from a view that fell behind (a replica cut off from the API server
//! whose write arrives late, after another replica took over) is refused instead of replacing a
//! newer status. Each write is bounded by [`WRITE_TIMEOUT`], and a replica that stops leading
//! abandons its writes in flight at once (docs/cluster-mode.md, "Leader election").

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

use sluice_core::api::{Kind, ObjectRef};
use sluice_core::pmap::DiffItem;

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
    fn dag<'b>((r, s): (&'b ObjectRef, &'b sluice_core::dag::ObjectStatus)) -> Candidate<'b> {
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
    // The object's resourceVersion as this replica sees it, as a precondition: the API server
    // refuses the write (409) when the object changed since — another replica's status write
    // among others — so a write computed from a view that fell behind (a replica cut off from
    // the API server whose write arrives late) never replaces a newer status. A refused write is
    // retried, planned from the state the watch then brings.
    let mut body = body;
    if let Some(rv) = lock(&ctx.state).resource_version(obj) {
        body["metadata"]["resourceVersion"] = Value::from(rv.to_string());
    }
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
        lock(&ctx.state).set_written(obj, p.observed, p.resource_version);
    }
    Ok(())
}

#[cfg(test)]
#[path = "writer_tests.rs"]
mod tests;
