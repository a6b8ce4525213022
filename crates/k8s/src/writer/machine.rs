//! The status writer's decisions as a synchronous state machine: input changes (a build, the
//! lease, the load-balancer address), write outcomes and the clock go in; the writes to send
//! come out. No I/O and no async: [`super::write_loop`] sends the writes, bounds them by the
//! write timeout and feeds back what happened.
//!
//! Writes are a continuous pipeline, not passes that wait for their slowest write: every input
//! change plans again from the latest state, and each free slot (of `concurrency`, paced by the
//! token bucket) takes the next planned write at once. An object whose write is in flight is
//! left out of a plan and planned again when the write ends. A failed write holds its object
//! back for the backoff, then everything is planned again.
//!
//! A plan covers every object at start, on a lease or load-balancer change and after a backoff;
//! after any other build only the objects whose verdict or observed status changed since the
//! last plan ([`changed_since`]).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use sluice_core::api::ObjectRef;
use sluice_core::pmap::DiffItem;

use super::super::rebuild::Built;
use super::super::status::LoadBalancer;

/// The backoff after the first failed write (doubled per failure while writes keep failing).
const FIRST_BACKOFF: Duration = Duration::from_millis(200);
/// The longest backoff.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// A token bucket: `rate` requests per second on average, `burst` at once.
#[derive(Debug)]
pub struct RateLimit {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: Instant,
}

impl RateLimit {
    /// A full bucket.
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

/// Where the writer's plans come from: what the cluster holds of each object's status (in
/// production the live `ClusterState`).
pub trait Planner {
    /// The objects whose observed status changed since the last call.
    fn take_observed_changes(&mut self) -> HashSet<ObjectRef>;

    /// The status of each routing object of `built` (of the `only` objects) that differs from
    /// what the cluster holds.
    fn plan(
        &mut self,
        built: &Built,
        lb: Option<&LoadBalancer>,
        only: Option<&[ObjectRef]>,
    ) -> Vec<(ObjectRef, Value)>;
}

/// A write to send: after `wait` (the token bucket's pacing), if this replica still leads.
#[derive(Debug)]
pub struct Write {
    pub obj: ObjectRef,
    pub status: Value,
    pub wait: Duration,
}

/// How a write ended.
#[derive(Debug)]
pub enum Outcome {
    /// The status was written.
    Written,
    /// The object is gone (404): nothing to retry.
    Gone,
    /// The replica stopped leading before the write was sent.
    NotSent,
    /// Anything else (409 Conflict, 429, 5xx, a timeout): retried after the backoff.
    Failed(String),
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

/// The status writer's state: what is planned, in flight, held back, and what the next plan is
/// made from.
pub struct Writer<P> {
    planner: P,
    limiter: RateLimit,
    /// Writes in flight at once.
    concurrency: usize,
    /// The wait before failed writes are planned again.
    backoff: Duration,
    leading: bool,
    /// The latest build and load-balancer address.
    built: Option<Arc<Built>>,
    lb: Option<LoadBalancer>,
    /// Objects with a write in flight, and those of them a later plan left out.
    busy: HashSet<ObjectRef>,
    skipped: HashSet<ObjectRef>,
    /// Objects whose write failed, held back until `retry_at`.
    held: HashSet<ObjectRef>,
    retry_at: Option<Instant>,
    queue: Queue,
    pass: Pass,
    /// An input changed since the last plan.
    replan: bool,
    /// The next plan covers every object; otherwise what changed since the last one.
    full: bool,
    /// What the last plan was made from.
    planned_from: Option<(Arc<Built>, Option<LoadBalancer>)>,
}

impl<P: Planner> Writer<P> {
    /// A writer that does not lead yet, with `concurrency` write slots paced by a token bucket
    /// of `rate` writes per second and bursts of `burst`.
    pub fn new(planner: P, rate: f64, burst: u32, concurrency: usize) -> Self {
        Writer {
            planner,
            limiter: RateLimit::new(rate, burst),
            concurrency: concurrency.max(1),
            backoff: FIRST_BACKOFF,
            leading: false,
            built: None,
            lb: None,
            busy: HashSet::new(),
            skipped: HashSet::new(),
            held: HashSet::new(),
            retry_at: None,
            queue: Queue::default(),
            pass: Pass {
                reported: true,
                ..Pass::default()
            },
            replan: true,
            full: true,
            planned_from: None,
        }
    }

    /// A new build was published.
    pub fn on_built(&mut self, built: Option<Arc<Built>>) {
        self.built = built;
        self.replan = true;
    }

    /// The load-balancer address (maybe unchanged).
    pub fn on_load_balancer(&mut self, lb: Option<LoadBalancer>) {
        self.lb = lb;
        self.replan = true;
    }

    /// Whether this replica holds the lease. A change plans every object again; a replica that
    /// does not lead abandons its writes in flight: the number returned, which the caller drops.
    pub fn on_lease(&mut self, leading: bool) -> usize {
        if leading != self.leading {
            self.leading = leading;
            self.replan = true;
            self.full = true;
        }
        if leading || self.busy.is_empty() {
            return 0;
        }
        let abandoned = self.busy.len();
        self.busy.clear();
        self.skipped.clear();
        abandoned
    }

    /// When [`Self::on_wakeup`] is due: the end of the backoff.
    pub fn next_wakeup(&self) -> Option<Instant> {
        self.retry_at
    }

    /// The clock reached `now`: at the end of the backoff, the objects held back are released
    /// and every object is planned again.
    pub fn on_wakeup(&mut self, now: Instant) {
        if self.retry_at.is_some_and(|at| at <= now) {
            self.retry_at = None;
            self.held.clear();
            self.replan = true;
            self.full = true;
        }
    }

    /// Writes in flight.
    pub fn in_flight(&self) -> usize {
        self.busy.len()
    }

    /// The planner (what tests inspect).
    pub fn planner(&self) -> &P {
        &self.planner
    }

    /// Plans again if an input changed, then the writes the free slots take (a replica that
    /// does not lead starts none), each with its wait in the token bucket.
    pub fn next_writes(&mut self, now: Instant) -> Vec<Write> {
        if self.replan {
            self.replan = false;
            self.plan();
        }
        let mut writes = Vec::new();
        while self.leading && self.busy.len() < self.concurrency {
            let Some((obj, status)) = self.queue.pop() else {
                break;
            };
            let wait = self.limiter.take(now);
            self.busy.insert(obj.clone());
            writes.push(Write { obj, status, wait });
        }
        self.report_pass();
        writes
    }

    /// A write of `obj` ended at `now`. A failure holds the object back for the backoff; an
    /// object a plan left out while its write was in flight is planned again at once, from the
    /// same inputs.
    pub fn on_write_done(&mut self, obj: ObjectRef, outcome: Outcome, now: Instant) {
        self.busy.remove(&obj);
        let was_skipped = self.skipped.remove(&obj);
        match outcome {
            Outcome::Written => {
                self.pass.written += 1;
                if self.held.is_empty() {
                    self.backoff = FIRST_BACKOFF;
                }
            }
            Outcome::Gone => {
                tracing::debug!(object = %obj, "object gone before its status was written");
            }
            Outcome::NotSent => {
                tracing::debug!(object = %obj, "not leading any more: status write not sent");
            }
            Outcome::Failed(error) => self.hold_back(&obj, &error, now),
        }
        if was_skipped
            && !self.held.contains(&obj)
            && let Some((built, lb)) = &self.planned_from
        {
            let again = self
                .planner
                .plan(built, lb.as_ref(), Some(std::slice::from_ref(&obj)));
            self.pass.planned += again.len();
            for (obj, status) in again {
                self.queue.push(obj, status);
            }
        }
    }

    /// Holds a failed write's object back until the backoff (started by the first failure of
    /// a round) ends.
    fn hold_back(&mut self, obj: &ObjectRef, error: &str, now: Instant) {
        self.pass.failed += 1;
        tracing::warn!(
            object = %obj,
            error = %error,
            retry_in_ms = self.backoff.as_millis() as u64,
            "status write failed; will retry"
        );
        self.held.insert(obj.clone());
        if self.retry_at.is_none() {
            self.retry_at = Some(now + self.backoff);
            self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Plans from the latest inputs: every object, or those that changed since the last plan.
    fn plan(&mut self) {
        let observed_changes = self.planner.take_observed_changes();
        let built = match (self.leading, &self.built) {
            (true, Some(built)) => built.clone(),
            _ => {
                self.queue.clear();
                self.planned_from = None;
                self.full = true;
                return;
            }
        };
        let lb = self.lb.clone();
        let since = (self.planned_from.take())
            .filter(|(_, prev_lb)| !self.full && *prev_lb == lb)
            .map(|(prev, _)| prev);
        let planned = match since {
            // Only objects whose verdict or observed status changed since the last plan can
            // plan differently: a plan of every object per build was most of sluice's CPU
            // while hundreds of objects were being created.
            Some(prev) => {
                let changed = changed_since(&prev, &built, observed_changes);
                for obj in &changed {
                    self.queue.remove(obj);
                }
                self.planner.plan(&built, lb.as_ref(), Some(&changed))
            }
            None => {
                self.queue.clear();
                self.planner.plan(&built, lb.as_ref(), None)
            }
        };
        for (obj, status) in planned {
            if self.busy.contains(&obj) {
                self.skipped.insert(obj);
            } else if !self.held.contains(&obj) {
                self.queue.push(obj, status);
            }
        }
        self.count_plan(&built);
        self.full = false;
        self.planned_from = Some((built, lb));
    }

    /// Starts a pass with a full plan or after the last one ended; extends it otherwise.
    fn count_plan(&mut self, built: &Built) {
        let objects = built.dag.statuses.len() + built.rejected.len();
        if self.full || self.pass.reported {
            self.pass = Pass {
                build: built.version,
                objects,
                planned: self.queue.len(),
                ..Pass::default()
            };
        } else {
            let pass = &mut self.pass;
            pass.build = built.version;
            pass.objects = objects;
            pass.planned = pass.written + pass.failed + self.busy.len() + self.queue.len();
        }
    }

    /// Logs the end of a pass: nothing planned or in flight.
    fn report_pass(&mut self) {
        let pass = &mut self.pass;
        if !pass.reported && self.queue.is_empty() && self.busy.is_empty() {
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

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
