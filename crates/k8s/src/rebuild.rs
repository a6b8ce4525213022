//! The debounced rebuild loop: watch events mark the state changed; the loop builds the DAG from a
//! snapshot of the live state and publishes the result.
//!
//! The first change on an idle system is built at once; changes arriving within `window` of the
//! previous build are coalesced into one build at the end of the window, so a burst of N events
//! costs at most one build per window. Nothing is built until every watched kind has finished its
//! initial list (a partial first build would withdraw routes from Envoy and mark valid objects
//! orphaned). Every build is published (the webhook's index needs the snapshot even when the DAG
//! did not change); builds only happen when routing input changed.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;
use tokio::time::Instant;

use sluice_core::api::{Kind, ObjectRef};
use sluice_core::dag::{self, Dag};
use sluice_core::store::Snapshot;

use super::metrics::Metrics;
use super::state::{ClusterState, Rejected};
use super::watch::lock;

/// One published build: the snapshot it was made from and its result.
#[derive(Debug)]
pub struct Built {
    /// Increases with every publication (1, 2, …).
    pub version: u64,
    pub snapshot: Arc<Snapshot>,
    pub dag: Arc<Dag>,
    /// Routing objects in the cluster that do not decode (they get an `invalid` status).
    pub rejected: Arc<BTreeMap<ObjectRef, Rejected>>,
}

/// When the next build may run.
///
/// The first change after a quiet period is built at once. A change that arrives within the
/// window of the previous build waits for the window's end, and then the window doubles (up to
/// `max`): under sustained churn (a deploy of hundreds of objects) sluice builds, pushes to every
/// Envoy and plans statuses a few times per second instead of ten, which leaves the CPU to the
/// apiserver and to Envoy, whose every route configuration update costs it time in proportion to
/// all of its hosts. A change after a quiet window resets it.
#[derive(Clone, Debug)]
pub struct Debounce {
    base: Duration,
    max: Duration,
    window: Duration,
    last_build: Option<Instant>,
    /// The next build was held back by the window (a burst): widen the window after it.
    held: bool,
}

impl Debounce {
    pub fn new(base: Duration, max: Duration) -> Self {
        Debounce {
            base,
            max: max.max(base),
            window: base,
            last_build: None,
            held: false,
        }
    }

    /// How long to wait before building for a change seen at `now`.
    pub fn delay(&mut self, now: Instant) -> Duration {
        match self.last_build {
            Some(t) if now < t + self.window => {
                self.held = true;
                t + self.window - now
            }
            _ => {
                // Quiet for a whole window: back to the base window, build at once.
                self.window = self.base;
                Duration::ZERO
            }
        }
    }

    pub fn built_at(&mut self, t: Instant) {
        self.last_build = Some(t);
        if std::mem::take(&mut self.held) {
            self.window = (self.window * 2).min(self.max);
        }
    }

    /// The current window.
    pub fn window(&self) -> Duration {
        self.window
    }
}

/// Turns a snapshot into a DAG and hands it on: in `sluice serve` this is the app's pipeline
/// (`dag::build` + translate + xDS cache) so the DAG is built once per change; [`build_only`]
/// just builds.
pub type Publisher = Arc<dyn Fn(&Snapshot) -> Arc<Dag> + Send + Sync>;

/// A [`Publisher`] that only runs `dag::build`.
pub fn build_only(options: dag::Options) -> Publisher {
    Arc::new(move |s: &Snapshot| Arc::new(dag::build(s, &options)))
}

/// Inputs of the rebuild loop.
pub struct RebuildContext {
    pub state: Arc<Mutex<ClusterState>>,
    /// Bumped by the watch tasks whenever routing input changed.
    pub changed: watch::Receiver<u64>,
    pub publish: Publisher,
    /// Kinds whose initial list must be complete before the first build.
    pub required: Vec<Kind>,
    /// The debounce window after a quiet period, and how wide sustained churn may make it.
    pub window: Duration,
    pub max_window: Duration,
    pub metrics: Metrics,
}

/// Runs until the task is aborted.
pub async fn rebuild_loop(mut ctx: RebuildContext, out: watch::Sender<Option<Arc<Built>>>) {
    let mut debounce = Debounce::new(ctx.window, ctx.max_window);
    let mut version = 0u64;
    let mut waiting_logged = false;
    loop {
        if ctx.changed.changed().await.is_err() {
            return; // every watch task is gone
        }
        let missing: Vec<Kind> = {
            let st = lock(&ctx.state);
            ctx.required
                .iter()
                .copied()
                .filter(|k| !st.is_synced(*k))
                .collect()
        };
        if !missing.is_empty() {
            if !waiting_logged {
                tracing::info!(waiting_for = ?missing, "first build waits for every initial list");
                waiting_logged = true;
            }
            continue;
        }
        let delay = debounce.delay(Instant::now());
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        // Changes seen while waiting are in the state read below.
        ctx.changed.borrow_and_update();
        let started = Instant::now();
        let (snapshot, rejected) = {
            let st = lock(&ctx.state);
            (
                Arc::new(st.snapshot().clone()),
                Arc::new(st.rejected().clone()),
            )
        };
        let publish = ctx.publish.clone();
        let snap = snapshot.clone();
        let dag = match tokio::task::spawn_blocking(move || publish(&snap)).await {
            Ok(d) => d,
            Err(e) => {
                tracing::error!(error = %e, "DAG build panicked; keeping the previous result");
                debounce.built_at(started);
                continue;
            }
        };
        debounce.built_at(started);
        ctx.metrics.rebuilds.inc();
        version += 1;
        tracing::info!(
            version,
            objects = snapshot.len(),
            vhosts = dag.vhosts.len(),
            clusters = dag.clusters.len(),
            statuses = dag.statuses.len(),
            build_ms = started.elapsed().as_millis() as u64,
            window_ms = debounce.window().as_millis() as u64,
            "published a new build"
        );
        out.send_replace(Some(Arc::new(Built {
            version,
            snapshot,
            dag,
            rejected,
        })));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_change_builds_at_once_then_bursts_wait_for_the_window() {
        let ms = Duration::from_millis;
        let mut d = Debounce::new(ms(100), ms(400));
        let t0 = Instant::now();
        assert_eq!(d.delay(t0), Duration::ZERO);
        d.built_at(t0);
        assert_eq!(d.delay(t0 + ms(30)), ms(70));
        assert_eq!(d.delay(t0 + ms(100)), Duration::ZERO);
        assert_eq!(d.delay(t0 + Duration::from_secs(5)), Duration::ZERO);
        assert_eq!(d.window(), ms(100));
    }

    #[test]
    fn sustained_churn_widens_the_window_up_to_the_maximum_and_quiet_resets_it() {
        let ms = Duration::from_millis;
        let mut d = Debounce::new(ms(100), ms(400));
        let mut t = Instant::now();
        // A change every 10 ms: each build waits for the window, which doubles after it.
        d.built_at(t);
        let mut gaps = Vec::new();
        for _ in 0..5 {
            let wait = d.delay(t + ms(10));
            let next = t + ms(10) + wait;
            d.built_at(next);
            gaps.push(next - t);
            t = next;
        }
        assert_eq!(gaps, vec![ms(100), ms(200), ms(400), ms(400), ms(400)]);
        // A change after a quiet window is built at once, and the window is the base again.
        assert_eq!(d.delay(t + ms(500)), Duration::ZERO);
        d.built_at(t + ms(500));
        assert_eq!(d.window(), ms(100));
        assert_eq!(d.delay(t + ms(550)), ms(50));
    }

    #[test]
    fn a_maximum_below_the_base_window_is_the_base_window() {
        let ms = Duration::from_millis;
        let mut d = Debounce::new(ms(100), ms(10));
        let t = Instant::now();
        d.built_at(t);
        let wait = d.delay(t + ms(1));
        d.built_at(t + ms(1) + wait);
        assert_eq!(d.window(), ms(100));
    }

    #[tokio::test]
    async fn a_burst_of_changes_is_one_build_and_nothing_before_sync() {
        use crate::state::prepare;
        use serde_json::json;

        let state = Arc::new(Mutex::new(ClusterState::default()));
        let (changed, changed_rx) = watch::channel(0u64);
        let bump = || changed.send_modify(|n| *n += 1);
        let metrics = Metrics::default();
        let (tx, mut rx) = watch::channel(None);
        let ctx = RebuildContext {
            state: state.clone(),
            changed: changed_rx,
            publish: build_only(dag::Options::default()),
            required: vec![Kind::Service],
            window: Duration::from_millis(100),
            max_window: Duration::from_millis(100),
            metrics: metrics.clone(),
        };
        let task = tokio::spawn(rebuild_loop(ctx, tx));
        let svc = |name: &str| {
            prepare(
                Kind::Service,
                json!({"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": name, "namespace": "ns"}, "spec": {"ports": [{"port": 80}]}}),
            )
            .unwrap()
        };
        // Events before the initial list completes: no build.
        lock(&state).apply(svc("early"));
        bump();
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(metrics.rebuilds.get(), 0);

        lock(&state).replace_kind(Kind::Service, vec![svc("a")]);
        bump();
        rx.changed().await.unwrap();
        assert_eq!(metrics.rebuilds.get(), 1);
        assert_eq!(
            rx.borrow_and_update()
                .as_ref()
                .unwrap()
                .snapshot
                .services()
                .len(),
            1
        );

        // A burst of 50 changes (the test runtime is single-threaded: the loop cannot run
        // between them) right after a build: one more build, at the end of the window.
        for i in 0..50 {
            lock(&state).apply(svc(&format!("b{i}")));
            bump();
        }
        rx.changed().await.unwrap();
        tokio::time::sleep(Duration::from_millis(400)).await;
        assert_eq!(metrics.rebuilds.get(), 2);
        let built = rx.borrow().clone().unwrap();
        assert_eq!((built.version, built.snapshot.services().len()), (2, 51));
        task.abort();
    }
}
