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

use std::collections::{BTreeMap, HashSet, VecDeque};
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
pub async fn write_loop(ctx: WriterContext, mut inputs: WriterInputs) {
    let mut limiter = RateLimit::new(ctx.rate, ctx.burst);
    let mut backoff = Duration::from_millis(200);
    let concurrency = ctx.concurrency.max(1);
    let mut in_flight = futures::stream::FuturesUnordered::new();
    // Objects with a write in flight, and those of them a later plan left out.
    let mut busy: HashSet<ObjectRef> = HashSet::new();
    let mut skipped: HashSet<ObjectRef> = HashSet::new();
    // Objects whose write failed, held back until `retry_at`.
    let mut held: HashSet<ObjectRef> = HashSet::new();
    let mut retry_at: Option<Instant> = None;
    let mut queue: VecDeque<(ObjectRef, Value)> = VecDeque::new();
    let mut pass = Pass {
        reported: true,
        ..Pass::default()
    };
    let mut replan = true;
    // What the last plan was made from.
    let mut planned_from: Option<(Arc<Built>, Option<LoadBalancer>)> = None;
    loop {
        if *inputs.shutdown.borrow() {
            return;
        }
        let leading = *inputs.leader.borrow_and_update();
        if replan {
            replan = false;
            let built = inputs.built.borrow_and_update().clone();
            let lb = inputs.load_balancer.borrow_and_update().clone();
            queue.clear();
            planned_from = None;
            if let (true, Some(built)) = (leading, built) {
                for (obj, status) in plan_statuses(&ctx, &built, lb.as_ref(), None) {
                    if busy.contains(&obj) {
                        skipped.insert(obj);
                    } else if !held.contains(&obj) {
                        queue.push_back((obj, status));
                    }
                }
                pass = Pass {
                    build: built.version,
                    objects: built.dag.statuses.len() + built.rejected.len(),
                    planned: queue.len(),
                    ..Pass::default()
                };
                planned_from = Some((built, lb));
            }
        }
        // Start what the free slots allow; a replica that lost the lease starts nothing.
        while leading && in_flight.len() < concurrency {
            let Some((obj, status)) = queue.pop_front() else {
                break;
            };
            let wait = limiter.take(Instant::now());
            busy.insert(obj.clone());
            let ctx = &ctx;
            in_flight.push(async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                let result = write_one(ctx, &obj, &status).await;
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
                    Err(e) if matches!(&e, kube::Error::Api(s) if s.code == 404) => {
                        tracing::debug!(object = %obj, "object gone before its status was written");
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
                    let again = plan_statuses(&ctx, built, lb.as_ref(), Some(&obj));
                    pass.planned += again.len();
                    queue.extend(again);
                }
            }
            _ = retry => {
                retry_at = None;
                held.clear();
                replan = true;
            }
            _ = changed(&mut inputs.built) => replan = true,
            _ = changed(&mut inputs.leader) => replan = true,
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

/// The status of every routing object of one build that differs from what the cluster holds
/// (of `only` that object).
fn plan_statuses(
    ctx: &WriterContext,
    built: &Built,
    lb: Option<&LoadBalancer>,
    only: Option<&ObjectRef>,
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
    // One object's verdict, or every object's (walked, not collected: a plan runs per build).
    let verdicts: Box<dyn Iterator<Item = Candidate<'_>> + '_> = match only {
        Some(r) => Box::new(
            built
                .dag
                .statuses
                .get_key_value(r)
                .map(dag)
                .into_iter()
                .chain(built.rejected.get_key_value(r).map(rejected)),
        ),
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

    fn ingressroute(name: &str) -> Value {
        serde_json::json!({
            "apiVersion": "contour.heptio.com/v1beta1",
            "kind": "IngressRoute",
            "metadata": {"name": name, "namespace": "team", "generation": 1, "resourceVersion": "1"},
            "spec": {"virtualhost": {"fqdn": format!("{name}.example.com")},
                     "routes": [{"match": "/", "services": [{"name": "web", "port": 80}]}]}
        })
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

    /// A slow write does not hold back the writes of later builds: with a write of `slow` hanging
    /// in the apiserver, the status of an object created afterwards is still written.
    #[tokio::test]
    async fn a_slow_write_does_not_hold_back_later_builds() {
        use axum::http::{Request, Response};
        use http_body_util::BodyExt;
        let objects: BTreeMap<String, Value> = ["slow", "a", "b"]
            .into_iter()
            .map(|n| (n.to_string(), ingressroute(n)))
            .collect();
        let (release, released) = watch::channel(false);
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
                    if name == "slow" {
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
        let state = Arc::new(Mutex::new(ClusterState::default()));
        for name in ["slow", "a"] {
            let p = prepare(Kind::IngressRouteV1beta1, ingressroute(name)).unwrap();
            lock(&state).apply(p);
        }
        let resource = ApiResource::from_gvk_with_plural(
            &kube::core::GroupVersionKind::gvk("contour.heptio.com", "v1beta1", "IngressRoute"),
            "ingressroutes",
        );
        let ctx = WriterContext {
            client: Client::new(apiserver, "default"),
            state: state.clone(),
            resources: Arc::new(Mutex::new(BTreeMap::from([(
                Kind::IngressRouteV1beta1,
                resource,
            )]))),
            metrics: Metrics::default(),
            rate: 1000.0,
            burst: 100,
            concurrency: 4,
        };
        let (built_tx, built) = watch::channel(Some(build(&state, 1)));
        let (_leader_tx, leader) = watch::channel(true);
        let (_lb_tx, load_balancer) = watch::channel(None);
        let (shutdown_tx, shutdown) = watch::channel(false);
        let writer = tokio::spawn(write_loop(
            ctx,
            WriterInputs {
                built,
                leader,
                load_balancer,
                shutdown,
            },
        ));
        let wait_for = |name: &'static str| {
            let written = written.clone();
            async move {
                let deadline = Instant::now() + Duration::from_secs(30);
                while !written.lock().unwrap().iter().any(|n| n == name) {
                    assert!(Instant::now() < deadline, "{name} was never written");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        };
        wait_for("a").await;
        // A new object, a new build, while `slow` still hangs.
        let p = prepare(Kind::IngressRouteV1beta1, ingressroute("b")).unwrap();
        lock(&state).apply(p);
        built_tx.send_replace(Some(build(&state, 2)));
        wait_for("b").await;
        assert!(!written.lock().unwrap().iter().any(|n| n == "slow"));
        release.send_replace(true);
        wait_for("slow").await;
        shutdown_tx.send_replace(true);
        writer.await.unwrap();
        // Each status written once: `slow`, in flight during the second build, was not sent again.
        let mut all = written.lock().unwrap().clone();
        all.sort();
        assert_eq!(all, ["a", "b", "slow"]);
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
