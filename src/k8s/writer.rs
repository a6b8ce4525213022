//! The status writer: the leader's only job. After every published build (and on becoming leader,
//! and when the load-balancer address changes) it plans a status for every routing object
//! ([`super::status::plan`]) and writes only those that differ from what the cluster holds.
//!
//! Writes are server-side applies on the status subresource with field manager `sluice` and
//! `force` (sluice is the only writer of these fields; forcing takes them over from a previous
//! owner such as an older sluice or a human `kubectl edit --subresource status`). Requests go through
//! a token bucket ([`RateLimit`], 500 writes/s, bursts of 1,000 by default, `--status-write-qps`
//! and `--status-write-burst`) with up to 16 writes in flight (`--status-write-concurrency`), so a
//! burst of 1,000 new objects gets its statuses within a second while a full resync of a very big
//! cluster is still paced. A failed write (409 Conflict, 429, 5xx, timeouts) is retried
//! with exponential backoff — re-planned from the latest state each time, so a retry never writes a
//! stale status; a 404 means the object is gone and is dropped.

use std::collections::BTreeMap;
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

use super::metrics::Metrics;
use super::rebuild::Built;
use super::state::{ClusterState, FIELD_MANAGER, prepare};
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
}

/// The inputs the writer reacts to.
pub struct WriterInputs {
    pub built: watch::Receiver<Option<Arc<Built>>>,
    pub leader: watch::Receiver<bool>,
    pub load_balancer: watch::Receiver<Option<LoadBalancer>>,
    pub shutdown: watch::Receiver<bool>,
}

/// Runs until shutdown.
pub async fn write_loop(ctx: WriterContext, mut inputs: WriterInputs) {
    let mut limiter = RateLimit::new(ctx.rate, ctx.burst);
    let mut backoff = Duration::from_millis(200);
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let leading = *inputs.leader.borrow_and_update();
        let built = inputs.built.borrow_and_update().clone();
        let lb = inputs.load_balancer.borrow_and_update().clone();
        let mut retry = None;
        if let (true, Some(built)) = (leading, built) {
            let failed = write_pass(&ctx, &built, lb.as_ref(), &inputs.leader, &mut limiter).await;
            if failed > 0 {
                tracing::warn!(
                    failed,
                    retry_in_ms = backoff.as_millis() as u64,
                    "status writes failed; will retry"
                );
                retry = Some(backoff);
                backoff = (backoff * 2).min(Duration::from_secs(30));
            } else {
                backoff = Duration::from_millis(200);
            }
        }
        let sleep = tokio::time::sleep(retry.unwrap_or(Duration::from_secs(86400)));
        // A closed input (its sender gone, e.g. no load-balancer source) never fires again.
        tokio::select! {
            _ = sleep => {}
            _ = changed(&mut inputs.built) => {}
            _ = changed(&mut inputs.leader) => {}
            _ = changed(&mut inputs.load_balancer) => {}
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

/// Plans every status of one build and writes those that differ. Returns how many writes failed.
async fn write_pass(
    ctx: &WriterContext,
    built: &Built,
    lb: Option<&LoadBalancer>,
    leader: &watch::Receiver<bool>,
    limiter: &mut RateLimit,
) -> usize {
    let now = k8s_openapi::jiff::Timestamp::now()
        .round(k8s_openapi::jiff::Unit::Second)
        .map(|t| t.to_string())
        .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now().to_string());
    let plans: Vec<(ObjectRef, Value)> = {
        let st = lock(&ctx.state);
        let dag = built
            .dag
            .statuses
            .iter()
            .map(|(r, s)| (r, Verdict::Dag(s), s.generation));
        let rejected = built
            .rejected
            .iter()
            .map(|(r, x)| (r, Verdict::Rejected(x), x.generation));
        dag.chain(rejected)
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
    };
    let mut failed = 0;
    let mut written = 0;
    let planned = plans.len();
    // Paced one by one by the token bucket, then up to `concurrency` writes in flight; a replica
    // that loses the lease starts no further write.
    let results: Vec<(ObjectRef, Result<(), kube::Error>)> = futures::stream::iter(plans)
        .take_while(|_| std::future::ready(*leader.borrow()))
        .then(|item| {
            let wait = limiter.take(Instant::now());
            async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                item
            }
        })
        .map(|(obj, status)| async move {
            let r = write_one(ctx, &obj, &status).await;
            (obj, r)
        })
        .buffer_unordered(ctx.concurrency.max(1))
        .collect()
        .await;
    for (obj, result) in results {
        match result {
            Ok(()) => written += 1,
            Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => {
                tracing::debug!(object = %obj, "object gone before its status was written");
            }
            Err(e) => {
                failed += 1;
                ctx.metrics.count_write(obj.kind.kind(), false);
                tracing::warn!(object = %obj, error = %e, "status write failed");
            }
        }
    }
    tracing::info!(
        build = built.version,
        objects = built.dag.statuses.len() + built.rejected.len(),
        planned,
        written,
        failed,
        "status pass complete"
    );
    failed
}

async fn write_one(
    ctx: &WriterContext,
    obj: &ObjectRef,
    status: &Value,
) -> Result<(), kube::Error> {
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
