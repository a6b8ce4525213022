//! Tests of the status writer's state machine (`machine.rs`): no API server, no runtime; the
//! tests feed inputs, outcomes and the clock, and look at the writes it asks for.

use std::collections::BTreeMap;

use sluice_core::api::Kind;
use sluice_core::dag::{Dag, ObjectStatus, State};

use super::super::super::state::Rejected;
use super::*;

fn r(name: &str) -> ObjectRef {
    ObjectRef::new(Kind::IngressRouteV1beta1, "team", name)
}

/// A valid IngressRoute's verdict at `generation`.
fn valid(generation: i64) -> ObjectStatus {
    ObjectStatus {
        state: State::Valid,
        description: "valid IngressRoute".into(),
        messages: Vec::new(),
        warnings: Vec::new(),
        generation: Some(generation),
        gateway: None,
        condition: None,
    }
}

/// Build `version` of these objects, each with its generation.
fn build(version: u64, objects: &[(&str, i64)]) -> Arc<Built> {
    let mut dag = Dag::default();
    for (name, generation) in objects {
        dag.statuses.insert(r(name), valid(*generation));
    }
    Arc::new(Built {
        version,
        snapshot: Default::default(),
        dag: Arc::new(dag),
        rejected: Default::default(),
    })
}

/// A planner that plans a write for every object asked about that the build has (the status
/// names the build), and records what it was asked.
#[derive(Default)]
struct Fake {
    /// What `take_observed_changes` answers next.
    observed: HashSet<ObjectRef>,
    /// Each plan's `only`, sorted (None for every object).
    asked: Vec<Option<Vec<ObjectRef>>>,
}

impl Planner for Fake {
    fn take_observed_changes(&mut self) -> HashSet<ObjectRef> {
        std::mem::take(&mut self.observed)
    }

    fn plan(
        &mut self,
        built: &Built,
        _lb: Option<&LoadBalancer>,
        only: Option<&[ObjectRef]>,
    ) -> Vec<(ObjectRef, Value)> {
        let mut sorted = only.map(<[ObjectRef]>::to_vec);
        if let Some(sorted) = &mut sorted {
            sorted.sort();
        }
        self.asked.push(sorted);
        let objects: Vec<ObjectRef> = match only {
            Some(only) => only.to_vec(),
            None => built.dag.statuses.keys().cloned().collect(),
        };
        (objects.into_iter())
            .filter(|obj| built.dag.statuses.get(obj).is_some())
            .map(|obj| (obj, serde_json::json!({"build": built.version})))
            .collect()
    }
}

/// A leading writer over `built`, 4 slots and a bucket that never makes a write wait.
fn leading(built: Arc<Built>) -> Writer<Fake> {
    let mut w = Writer::new(Fake::default(), 1000.0, 100, 4);
    w.on_built(Some(built));
    w.on_load_balancer(None);
    w.on_lease(true);
    w
}

/// The objects of `writes`, sorted.
fn names(writes: &[Write]) -> Vec<String> {
    let mut names: Vec<String> = writes.iter().map(|w| w.obj.key.name.to_string()).collect();
    names.sort();
    names
}

#[test]
fn a_leader_writes_every_object_at_start_and_a_follower_nothing() {
    let now = Instant::now();
    let mut follower = Writer::new(Fake::default(), 1000.0, 100, 4);
    follower.on_built(Some(build(1, &[("a", 1), ("b", 1)])));
    assert_eq!(follower.on_lease(false), 0);
    assert!(follower.next_writes(now).is_empty());
    let mut w = leading(build(1, &[("a", 1), ("b", 1)]));
    let writes = w.next_writes(now);
    assert_eq!(names(&writes), ["a", "b"]);
    assert_eq!(w.planner().asked, [None]);
    assert_eq!(writes[0].status, serde_json::json!({"build": 1}));
    assert_eq!(w.in_flight(), 2);
}

#[test]
fn losing_the_lease_abandons_the_writes_in_flight_and_starts_none() {
    let now = Instant::now();
    let mut w = leading(build(1, &[("a", 1), ("b", 1)]));
    assert_eq!(w.next_writes(now).len(), 2);
    assert_eq!(
        w.on_lease(false),
        2,
        "the writes in flight were not abandoned"
    );
    assert_eq!(w.in_flight(), 0);
    // A new object while following: nothing is written.
    w.on_built(Some(build(2, &[("a", 1), ("b", 1), ("c", 1)])));
    assert!(w.next_writes(now).is_empty());
    assert_eq!(w.on_lease(false), 0);
    // Leading again: every object is planned again, the abandoned ones too.
    w.on_lease(true);
    assert_eq!(names(&w.next_writes(now)), ["a", "b", "c"]);
    assert_eq!(w.planner().asked.last(), Some(&None));
}

#[test]
fn concurrency_bounds_the_writes_in_flight() {
    let now = Instant::now();
    let mut w = Writer::new(Fake::default(), 1000.0, 100, 2);
    w.on_built(Some(build(1, &[("a", 1), ("b", 1), ("c", 1)])));
    w.on_lease(true);
    let first = w.next_writes(now);
    assert_eq!(names(&first), ["a", "b"]);
    assert!(w.next_writes(now).is_empty(), "a third write started");
    w.on_write_done(first[0].obj.clone(), Outcome::Written, now);
    assert_eq!(names(&w.next_writes(now)), ["c"]);
}

#[test]
fn an_object_written_while_in_flight_is_planned_again_when_its_write_ends() {
    let now = Instant::now();
    let mut w = leading(build(1, &[("a", 1)]));
    assert_eq!(names(&w.next_writes(now)), ["a"]);
    // a changes while its write is in flight: left out of the plan, not written twice at once.
    w.on_built(Some(build(2, &[("a", 2)])));
    assert!(w.next_writes(now).is_empty());
    assert_eq!(w.planner().asked.last(), Some(&Some(vec![r("a")])));
    // Its write ends: planned again from build 2 and written.
    w.on_write_done(r("a"), Outcome::Written, now);
    let again = w.next_writes(now);
    assert_eq!(names(&again), ["a"]);
    assert_eq!(again[0].status, serde_json::json!({"build": 2}));
    // An object whose write was in flight during no plan is not planned again.
    w.on_write_done(r("a"), Outcome::Written, now);
    assert!(w.next_writes(now).is_empty());
}

#[test]
fn a_failed_write_is_held_back_for_the_backoff_then_retried() {
    let t0 = Instant::now();
    let mut w = leading(build(1, &[("a", 1), ("b", 1)]));
    assert_eq!(w.next_writes(t0).len(), 2);
    w.on_write_done(r("a"), Outcome::Failed("409 Conflict".into()), t0);
    w.on_write_done(r("b"), Outcome::Written, t0);
    assert_eq!(w.next_wakeup(), Some(t0 + FIRST_BACKOFF));
    // A build that changes a meanwhile does not write it: it is held back.
    w.on_built(Some(build(2, &[("a", 2), ("b", 1)])));
    assert!(w.next_writes(t0).is_empty());
    // Not before the backoff's end.
    w.on_wakeup(t0 + FIRST_BACKOFF / 2);
    assert!(w.next_writes(t0).is_empty());
    // Then every object is planned again; a is written.
    let t1 = t0 + FIRST_BACKOFF;
    w.on_wakeup(t1);
    assert_eq!(w.next_wakeup(), None);
    let retried = w.next_writes(t1);
    assert_eq!(names(&retried), ["a", "b"]);
    assert_eq!(w.planner().asked.last(), Some(&None));
    // A second failure in a row waits twice as long.
    w.on_write_done(r("a"), Outcome::Failed("timed out".into()), t1);
    assert_eq!(w.next_wakeup(), Some(t1 + FIRST_BACKOFF * 2));
}

#[test]
fn a_write_to_an_object_that_is_gone_is_not_retried() {
    let now = Instant::now();
    let mut w = leading(build(1, &[("a", 1)]));
    assert_eq!(w.next_writes(now).len(), 1);
    w.on_write_done(r("a"), Outcome::Gone, now);
    assert_eq!(w.next_wakeup(), None);
    assert!(w.next_writes(now).is_empty());
}

#[test]
fn the_token_bucket_paces_the_writes() {
    let now = Instant::now() + Duration::from_secs(1);
    let objects: Vec<(String, i64)> = (0..5).map(|i| (format!("r{i}"), 1)).collect();
    let objects: Vec<(&str, i64)> = objects.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let mut w = Writer::new(Fake::default(), 10.0, 2, 10);
    w.on_built(Some(build(1, &objects)));
    w.on_lease(true);
    let waits: Vec<Duration> = w.next_writes(now).iter().map(|w| w.wait).collect();
    let ms = |n| Duration::from_millis(n);
    assert_eq!(waits.len(), 5);
    assert_eq!(
        waits[..2],
        [Duration::ZERO, Duration::ZERO],
        "the burst waits"
    );
    for (wait, want) in waits[2..].iter().zip([ms(100), ms(200), ms(300)]) {
        assert!(wait.abs_diff(want) < ms(1), "waited {wait:?}, not {want:?}");
    }
}

#[test]
fn a_plan_after_a_build_covers_only_what_changed() {
    let now = Instant::now();
    let objects: Vec<(String, i64)> = (0..10).map(|i| (format!("r{i}"), 1)).collect();
    let mut objects: Vec<(&str, i64)> = objects.iter().map(|(n, g)| (n.as_str(), *g)).collect();
    let mut w = leading(build(1, &objects));
    loop {
        let writes = w.next_writes(now);
        if writes.is_empty() {
            break;
        }
        for write in writes {
            w.on_write_done(write.obj, Outcome::Written, now);
        }
    }
    // r3's verdict changes and r5's status was edited in the cluster.
    objects[3].1 = 2;
    w.planner.observed = HashSet::from([r("r5")]);
    w.on_built(Some(build(2, &objects)));
    assert_eq!(names(&w.next_writes(now)), ["r3", "r5"]);
    assert_eq!(w.planner().asked, [None, Some(vec![r("r3"), r("r5")])]);
    // A new load-balancer address plans every object.
    w.on_load_balancer(Some(LoadBalancer::default()));
    w.next_writes(now);
    assert_eq!(w.planner().asked.last(), Some(&None));
}

#[test]
fn a_plan_after_a_build_looks_only_at_what_changed() {
    let mut dag = Dag::default();
    for i in 0..1000 {
        dag.statuses.insert(r(&format!("r{i}")), valid(1));
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
    next.statuses.insert(r("r7"), valid(2));
    next.statuses.remove(&r("r8"));
    let bad = Rejected {
        error: sluice_core::validate::FieldError::new("spec", "InvalidSpec", "not an object"),
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
