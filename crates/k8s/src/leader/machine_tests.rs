//! Tests of the election's state machine (`machine.rs`): no API server, no runtime, no clock;
//! the tests feed the time, the Lease read and each round's outcome, and look at what it asks
//! for.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::*;

/// Distinct renew and retry periods, so the tests see which one a round waits.
const T: LeaseTimings = LeaseTimings {
    lease_duration: Duration::from_secs(10),
    renew_deadline: Duration::from_secs(7),
    renew_period: Duration::from_secs(2),
    retry_period: Duration::from_secs(3),
};

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A wall-clock time `s` seconds into some day (other replicas' clocks are not trusted: these
/// only have to differ).
fn wall(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

/// A Lease held by `holder` (none: released), renewed at wall time `renewed`, for `secs`.
fn lease(holder: Option<&str>, renewed: i64, secs: i32, transitions: i32) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("sluice-leader".into()),
            resource_version: Some("42".into()),
            ..Default::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_string),
            lease_duration_seconds: Some(secs),
            acquire_time: Some(MicroTime(wall(0))),
            renew_time: Some(MicroTime(wall(renewed))),
            lease_transitions: Some(transitions),
            ..Default::default()
        }),
    }
}

/// An election of "me" that became leader in a round from `t0` to `t0 + 50 ms`.
fn leader_at(t0: Instant) -> Election {
    let mut e = Election::new("me", T, t0);
    assert_eq!(
        e.wake(t0),
        Action::StartRound {
            bound: t0 + T.renew_deadline
        }
    );
    assert_eq!(
        e.round_done(Outcome::Leading, t0, t0 + ms(50)),
        Some(Change::Became)
    );
    e
}

#[test]
fn the_first_successful_round_makes_a_leader() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    assert!(!e.leading());
    // A follower's round is bounded by renew_deadline from its start.
    assert_eq!(
        e.wake(t0),
        Action::StartRound {
            bound: t0 + T.renew_deadline
        }
    );
    assert_eq!(
        e.round_done(Outcome::Leading, t0, t0 + ms(50)),
        Some(Change::Became)
    );
    assert!(e.leading());
    assert_eq!(e.deadline(), Some(t0 + T.renew_deadline));
}

#[test]
fn a_renewal_keeps_leading_and_moves_the_deadline_to_its_start_plus_renew_deadline() {
    let t0 = Instant::now();
    let mut e = leader_at(t0);
    let t1 = e.next_round();
    assert_eq!(t1, t0 + ms(50) + T.renew_period);
    assert_eq!(e.wake(t1 - ms(1)), Action::Sleep(t1));
    // The leader's round is bounded by its current deadline, not renew_deadline from its start.
    assert_eq!(
        e.wake(t1),
        Action::StartRound {
            bound: t0 + T.renew_deadline
        }
    );
    assert_eq!(e.round_done(Outcome::Leading, t1, t1 + ms(900)), None);
    assert!(e.leading());
    assert_eq!(e.deadline(), Some(t1 + T.renew_deadline));
}

#[test]
fn a_round_that_times_out_steps_down_exactly_at_the_deadline() {
    let t0 = Instant::now();
    let mut e = leader_at(t0);
    let deadline = t0 + T.renew_deadline;
    let t1 = e.next_round();
    assert_eq!(e.wake(t1), Action::StartRound { bound: deadline });
    // The request hangs; the shell abandons it at its bound, which is the deadline.
    assert_eq!(
        e.round_done(Outcome::Failed, t1, deadline),
        Some(Change::SteppedDown)
    );
    assert!(!e.leading());
    assert_eq!(e.next_round(), deadline + T.retry_period);
}

#[test]
fn the_deadline_ends_leadership_while_waiting_for_the_next_round() {
    let t0 = Instant::now();
    let slow = LeaseTimings {
        renew_period: Duration::from_secs(8),
        ..T
    };
    let mut e = Election::new("me", slow, t0);
    e.wake(t0);
    assert_eq!(
        e.round_done(Outcome::Leading, t0, t0 + ms(50)),
        Some(Change::Became)
    );
    let deadline = t0 + slow.renew_deadline;
    // The deadline comes before the next round: that is what the shell sleeps until.
    assert_eq!(e.wake(t0 + ms(100)), Action::Sleep(deadline));
    assert_eq!(e.wake(deadline - ms(1)), Action::Sleep(deadline));
    assert_eq!(e.wake(deadline), Action::StepDown);
    assert!(!e.leading());
    assert_eq!(e.deadline(), None);
    // Then the round due (as a follower: bounded by renew_deadline from its start).
    let next = t0 + ms(50) + slow.renew_period;
    assert_eq!(e.wake(deadline), Action::Sleep(next));
    assert_eq!(
        e.wake(next),
        Action::StartRound {
            bound: next + slow.renew_deadline
        }
    );
}

#[test]
fn a_failed_round_keeps_leading_until_the_deadline() {
    let t0 = Instant::now();
    let mut e = leader_at(t0);
    let deadline = t0 + T.renew_deadline;
    let mut now = e.next_round();
    while now + ms(100) < deadline {
        assert_eq!(e.wake(now), Action::StartRound { bound: deadline });
        assert_eq!(e.round_done(Outcome::Failed, now, now + ms(100)), None);
        assert!(e.leading());
        assert_eq!(e.deadline(), Some(deadline), "a failure moved the deadline");
        assert_eq!(e.next_round(), now + ms(100) + T.renew_period);
        now = e.next_round();
    }
    // The deadline passed before the next round was due.
    assert_eq!(e.wake(now), Action::StepDown);
    assert!(!e.leading());
}

#[test]
fn another_holder_while_leading_ends_leadership_at_once() {
    let t0 = Instant::now();
    let mut e = leader_at(t0);
    let t1 = e.next_round();
    e.wake(t1);
    assert_eq!(
        e.round_done(Outcome::Following(Some("b".into())), t1, t1 + ms(10)),
        Some(Change::Lost {
            holder: Some("b".into())
        })
    );
    assert!(!e.leading());
    assert_eq!(e.deadline(), None);
    // A follower hearing of another holder again: nothing flips.
    let t2 = e.next_round();
    e.wake(t2);
    assert_eq!(
        e.round_done(Outcome::Following(Some("b".into())), t2, t2 + ms(10)),
        None
    );
}

#[test]
fn the_next_round_waits_renew_period_while_leading_and_retry_period_otherwise() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    e.wake(t0);
    e.round_done(Outcome::Following(None), t0, t0 + ms(20));
    assert_eq!(e.next_round(), t0 + ms(20) + T.retry_period);
    let t1 = e.next_round();
    e.wake(t1);
    e.round_done(Outcome::Failed, t1, t1 + ms(20));
    assert_eq!(e.next_round(), t1 + ms(20) + T.retry_period);
    let t2 = e.next_round();
    e.wake(t2);
    e.round_done(Outcome::Leading, t2, t2 + ms(20));
    assert_eq!(e.next_round(), t2 + ms(20) + T.renew_period);
    let t3 = e.next_round();
    e.wake(t3);
    e.round_done(Outcome::Failed, t3, t3 + ms(20));
    assert_eq!(e.next_round(), t3 + ms(20) + T.renew_period);
}

#[test]
fn a_success_that_arrives_past_its_deadline_leads_nothing() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    e.wake(t0);
    let late = t0 + T.renew_deadline;
    assert_eq!(e.round_done(Outcome::Leading, t0, late), None);
    assert!(!e.leading());
    let mut e = leader_at(t0);
    let t1 = e.next_round();
    e.wake(t1);
    assert_eq!(
        e.round_done(Outcome::Leading, t1, t1 + T.renew_deadline),
        Some(Change::SteppedDown)
    );
}

#[test]
fn shutdown_while_leading_asks_for_release_and_a_follower_has_none_to_give() {
    let t0 = Instant::now();
    let mut e = leader_at(t0);
    assert!(e.shutdown());
    assert!(!e.leading());
    assert!(!e.shutdown());
    let mut follower = Election::new("me", T, t0);
    assert!(!follower.shutdown());
}

#[test]
fn no_lease_yet_creates_one_held_by_this_replica() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    let Decision::Create(spec) = e.decide(None, t0, wall(5)) else {
        panic!("no Lease was not created");
    };
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_duration_seconds, Some(10));
    assert_eq!(spec.acquire_time, Some(MicroTime(wall(5))));
    assert_eq!(spec.renew_time, Some(MicroTime(wall(5))));
    assert_eq!(spec.lease_transitions, Some(0));
}

#[test]
fn a_follower_takes_over_only_after_the_lease_duration_of_an_unchanged_record_on_its_own_clock() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    // The holder's renew time is far in the past on our wall clock: not trusted. The Lease's
    // own duration (5 s here) counts, from when this replica first saw the record.
    let held = lease(Some("a"), -3600, 5, 2);
    let mut now = t0;
    while now < t0 + Duration::from_secs(5) {
        assert_eq!(
            e.decide(Some(held.clone()), now, wall(0)),
            Decision::Follow(Some("a".into())),
            "took over {:?} after first seeing the record",
            now - t0
        );
        now += ms(700);
    }
    let at = t0 + Duration::from_secs(5);
    let Decision::Replace {
        lease,
        previous,
        taking_over,
    } = e.decide(Some(held), at, wall(9))
    else {
        panic!("did not take over an expired Lease");
    };
    assert_eq!(previous.as_deref(), Some("a"));
    assert!(taking_over);
    let spec = lease.spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("me"));
    assert_eq!(spec.lease_duration_seconds, Some(10));
    assert_eq!(spec.acquire_time, Some(MicroTime(wall(9))));
    assert_eq!(spec.renew_time, Some(MicroTime(wall(9))));
    assert_eq!(spec.lease_transitions, Some(3));
    // Written over the Lease read: a concurrent write makes it a conflict.
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("42"));
}

#[test]
fn a_changed_record_restarts_the_wait() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    let d = Duration::from_secs(10);
    assert!(matches!(
        e.decide(Some(lease(Some("a"), 0, 10, 0)), t0, wall(0)),
        Decision::Follow(_)
    ));
    // Renewed at 8 s: the wait starts again.
    let renewed = lease(Some("a"), 8, 10, 0);
    let t1 = t0 + Duration::from_secs(8);
    assert!(matches!(
        e.decide(Some(renewed.clone()), t1, wall(0)),
        Decision::Follow(_)
    ));
    assert!(matches!(
        e.decide(Some(renewed.clone()), t0 + d, wall(0)),
        Decision::Follow(_)
    ));
    assert!(matches!(
        e.decide(Some(renewed.clone()), t1 + d - ms(1), wall(0)),
        Decision::Follow(_)
    ));
    // Another holder (same renew time) is another record too.
    let other = lease(Some("b"), 8, 10, 1);
    assert!(matches!(
        e.decide(Some(other.clone()), t1 + d, wall(0)),
        Decision::Follow(_)
    ));
    assert!(matches!(
        e.decide(Some(other), t1 + 2 * d, wall(0)),
        Decision::Replace {
            taking_over: true,
            ..
        }
    ));
}

#[test]
fn a_released_lease_is_taken_at_once() {
    let t0 = Instant::now();
    for holder in [None, Some("")] {
        let mut e = Election::new("me", T, t0);
        let Decision::Replace {
            lease,
            previous,
            taking_over,
        } = e.decide(Some(lease(holder, 0, 1, 4)), t0, wall(1))
        else {
            panic!("a released Lease ({holder:?}) was not taken");
        };
        assert_eq!(previous, None);
        assert!(taking_over);
        let spec = lease.spec.unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("me"));
        assert_eq!(spec.lease_transitions, Some(5));
    }
}

#[test]
fn the_leader_renews_its_own_lease_without_waiting() {
    let t0 = Instant::now();
    let mut e = Election::new("me", T, t0);
    let Decision::Replace {
        lease,
        previous,
        taking_over,
    } = e.decide(Some(lease(Some("me"), 0, 10, 3)), t0, wall(2))
    else {
        panic!("its own Lease was not renewed");
    };
    assert_eq!(previous.as_deref(), Some("me"));
    assert!(!taking_over);
    let spec = lease.spec.unwrap();
    assert_eq!(spec.renew_time, Some(MicroTime(wall(2))));
    assert_eq!(
        spec.acquire_time,
        Some(MicroTime(wall(0))),
        "acquire time moved"
    );
    assert_eq!(spec.lease_transitions, Some(3));
}

#[test]
fn release_gives_up_only_this_replicas_lease() {
    let mine = released(lease(Some("me"), 0, 10, 3), "me", wall(4)).unwrap();
    let spec = mine.spec.unwrap();
    assert_eq!(spec.holder_identity, None);
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.renew_time, Some(MicroTime(wall(4))));
    assert_eq!(spec.lease_transitions, Some(3));
    assert_eq!(released(lease(Some("a"), 0, 10, 3), "me", wall(4)), None);
    assert_eq!(released(lease(None, 0, 10, 3), "me", wall(4)), None);
    let no_spec = Lease {
        spec: None,
        ..lease(Some("me"), 0, 10, 3)
    };
    assert_eq!(released(no_spec, "me", wall(4)), None);
}
