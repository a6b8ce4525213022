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

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::ApiResource;
use serde_json::Value;
use tokio::sync::watch;

use sluice_core::api::{Kind, ObjectRef};

use super::metrics::Metrics;
use super::rebuild::Built;
use super::state::{ClusterState, FIELD_MANAGER, Rejected, prepare};
use super::status::{LoadBalancer, Plan, Verdict, apply_body, plan, writes_status};
use super::watch::lock;

mod machine;

pub use machine::{Outcome, Planner, RateLimit, Write, Writer};

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

/// Runs until shutdown: the async shell of [`Writer`], which decides what to write.
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
    let mut writer = Writer::new(ctx.state.clone(), ctx.rate, ctx.burst, ctx.concurrency);
    writer.on_built(inputs.built.borrow_and_update().clone());
    writer.on_load_balancer(inputs.load_balancer.borrow_and_update().clone());
    // Read by each write right before it is sent.
    let lease = inputs.leader.clone();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let abandoned = writer.on_lease(*inputs.leader.borrow_and_update());
        if abandoned > 0 {
            tracing::warn!(
                abandoned,
                "not leading any more: abandoning the status writes in flight"
            );
            in_flight.clear();
        }
        for write in writer.next_writes(Instant::now()) {
            in_flight.push(send(&ctx, &lease, write));
        }
        let retry = sleep_until(writer.next_wakeup());
        tokio::select! {
            Some((obj, result)) = in_flight.next(), if !in_flight.is_empty() => {
                let outcome = outcome(result);
                if let Outcome::Failed(_) = outcome {
                    ctx.metrics.count_write(obj.kind.kind(), false);
                }
                writer.on_write_done(obj, outcome, Instant::now());
            }
            _ = retry => writer.on_wakeup(Instant::now()),
            _ = changed(&mut inputs.built) => {
                writer.on_built(inputs.built.borrow_and_update().clone());
            }
            // Read at the top of the loop.
            _ = changed(&mut inputs.leader) => {}
            _ = changed(&mut inputs.load_balancer) => {
                writer.on_load_balancer(inputs.load_balancer.borrow_and_update().clone());
            }
            _ = changed(&mut inputs.shutdown) => {}
        }
    }
}

/// Sends one write after its wait in the token bucket, if this replica still leads then,
/// bounded by the write timeout.
async fn send(
    ctx: &WriterContext,
    lease: &watch::Receiver<bool>,
    write: Write,
) -> (ObjectRef, Result<(), WriteError>) {
    let Write { obj, status, wait } = write;
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
}

/// What a write's result means to the writer.
fn outcome(result: Result<(), WriteError>) -> Outcome {
    match result {
        Ok(()) => Outcome::Written,
        Err(WriteError::Api(kube::Error::Api(s))) if s.code == 404 => Outcome::Gone,
        Err(WriteError::NotLeader) => Outcome::NotSent,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// Resolves at `at`; never without it.
async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await,
        None => std::future::pending().await,
    }
}

/// Resolves when the value changes; never when the sender is gone.
async fn changed<T>(rx: &mut watch::Receiver<T>) {
    if rx.changed().await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Plans from the live state.
impl Planner for Arc<Mutex<ClusterState>> {
    fn take_observed_changes(&mut self) -> HashSet<ObjectRef> {
        lock(self).take_observed_changes()
    }

    fn plan(
        &mut self,
        built: &Built,
        lb: Option<&LoadBalancer>,
        only: Option<&[ObjectRef]>,
    ) -> Vec<(ObjectRef, Value)> {
        plan_statuses(self, built, lb, only)
    }
}

/// The status of every routing object of one build that differs from what the cluster holds
/// (of the `only` objects).
fn plan_statuses(
    state: &Mutex<ClusterState>,
    built: &Built,
    lb: Option<&LoadBalancer>,
    only: Option<&[ObjectRef]>,
) -> Vec<(ObjectRef, Value)> {
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now().to_string());
    let st = lock(state);
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
