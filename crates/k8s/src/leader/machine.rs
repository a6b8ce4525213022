//! The leader election's decisions as a synchronous state machine: the clock, the Lease as the
//! API server holds it and each round's outcome go in; when to run a round, how long its requests
//! may take, what to write to the Lease and when leadership begins and ends come out. No I/O, no
//! async and no clock of its own: [`super::Elector::run`] performs the requests, bounds them and
//! feeds back what happened and when.
//!
//! Timers (client-go's algorithm):
//! - a follower takes over when the Lease record (holder, renew time, transitions) has not
//!   changed for the Lease's duration *as measured on its own clock* ([`Election::decide`]);
//! - the leader renews every `renew_period`, a follower retries every `retry_period`, both
//!   counted from the end of the last round;
//! - the leader's renew deadline is the *start* of its last successful round plus
//!   `renew_deadline`: when it passes, leadership ends whatever the request in flight does
//!   ([`Action::StepDown`]), and every request of a round is abandoned at it (or, for a follower,
//!   `renew_deadline` after the round's start): [`Action::StartRound`]'s `bound`.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;

use super::LeaseTimings;

/// What the shell does next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Run a round now and abandon its requests at `bound` (a [`Outcome::Failed`] then).
    StartRound { bound: Instant },
    /// The renew deadline passed without a renewal: this replica no longer leads.
    StepDown,
    /// Nothing to do before `until` (shutdown aside).
    Sleep(Instant),
}

/// How a round ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// This replica holds the Lease (it wrote it).
    Leading,
    /// Someone else holds a live Lease (or wrote it first).
    Following(Option<String>),
    /// The request failed or was abandoned at its bound.
    Failed,
}

/// A flip of this replica's leadership.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// It leads from now on.
    Became,
    /// Another replica holds the Lease.
    Lost { holder: Option<String> },
    /// Its renew deadline passed without a renewal.
    SteppedDown,
}

/// What a round writes, decided from the Lease the API server holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    /// Someone else holds a live Lease: write nothing.
    Follow(Option<String>),
    /// There is no Lease: create one with this spec (a conflict means another replica created it
    /// first).
    Create(LeaseSpec),
    /// Write this Lease over the one read (it carries its resourceVersion: a conflict means
    /// another replica wrote in between, and `previous` is the holder to follow then).
    Replace {
        lease: Box<Lease>,
        previous: Option<String>,
        /// `previous` is not this replica: it takes the Lease over.
        taking_over: bool,
    },
}

/// The Lease record a follower watches, and since when (on its clock) it has seen it unchanged.
#[derive(Clone, Debug, PartialEq)]
struct Observation {
    record: (Option<String>, Option<String>, Option<i32>),
    at: Instant,
}

/// The election's state: whether this replica leads and until when, when the next round is,
/// and what it saw of the Lease.
#[derive(Debug)]
pub struct Election {
    identity: String,
    timings: LeaseTimings,
    /// While leading (and only then): when leadership ends unless a renewal succeeds first.
    deadline: Option<Instant>,
    next_round: Instant,
    observed: Option<Observation>,
}

impl Election {
    /// A follower of `identity` whose first round is due at `now`.
    pub fn new(identity: &str, timings: LeaseTimings, now: Instant) -> Self {
        Election {
            identity: identity.to_string(),
            timings,
            deadline: None,
            next_round: now,
            observed: None,
        }
    }

    /// Whether this replica leads.
    pub fn leading(&self) -> bool {
        self.deadline.is_some()
    }

    /// While leading: when leadership ends unless a renewal succeeds first (what tests inspect).
    #[cfg(test)]
    pub fn deadline(&self) -> Option<Instant> {
        self.deadline
    }

    /// When the next round is due (what tests inspect).
    #[cfg(test)]
    pub fn next_round(&self) -> Instant {
        self.next_round
    }

    /// The clock reached `now`: the renew deadline ends leadership first, then a round is due
    /// (its requests bounded by the deadline, or `renew_deadline` from now for a follower), else
    /// nothing happens before the earlier of the two.
    pub fn wake(&mut self, now: Instant) -> Action {
        if self.deadline.is_some_and(|d| now >= d) {
            self.deadline = None;
            return Action::StepDown;
        }
        if now >= self.next_round {
            let bound = self.deadline.unwrap_or(now + self.timings.renew_deadline);
            return Action::StartRound { bound };
        }
        Action::Sleep(
            self.deadline
                .map_or(self.next_round, |d| d.min(self.next_round)),
        )
    }

    /// The round that started at `started` ended at `now` with `outcome`; the leadership flip it
    /// makes, if any. A successful round moves the deadline to `started + renew_deadline`; a
    /// failed one leaves it (leadership ends at it, now if it already passed); another holder
    /// ends leadership at once. The next round is `renew_period` after `now` while leading,
    /// `retry_period` otherwise.
    pub fn round_done(
        &mut self,
        outcome: Outcome,
        started: Instant,
        now: Instant,
    ) -> Option<Change> {
        let was_leading = self.leading();
        let mut holder = None;
        match outcome {
            Outcome::Leading => self.deadline = Some(started + self.timings.renew_deadline),
            Outcome::Following(h) => {
                self.deadline = None;
                holder = h;
            }
            Outcome::Failed => {}
        }
        // A success that arrives past its own deadline (the runtime was late) renews nothing.
        let expired = self.deadline.is_some_and(|d| now >= d);
        if expired {
            self.deadline = None;
        }
        self.next_round = now
            + if self.leading() {
                self.timings.renew_period
            } else {
                self.timings.retry_period
            };
        match (was_leading, self.leading()) {
            (false, true) => Some(Change::Became),
            (true, false) if expired => Some(Change::SteppedDown),
            (true, false) => Some(Change::Lost { holder }),
            _ => None,
        }
    }

    /// Shutdown: whether this replica led (it then gives the Lease up: [`released`]). It leads
    /// no more.
    pub fn shutdown(&mut self) -> bool {
        self.deadline.take().is_some()
    }

    /// What to write, given the Lease read at `now` (on this replica's clock; `wall` is the
    /// time written into the Lease). Another holder's Lease is followed until its record has
    /// been seen unchanged for the Lease's duration; a Lease without a holder (released) is
    /// taken at once; this replica's own is renewed.
    pub fn decide(&mut self, lease: Option<Lease>, now: Instant, wall: Timestamp) -> Decision {
        let wall = MicroTime(wall);
        let duration_secs = self.timings.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = lease else {
            return Decision::Create(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(duration_secs),
                acquire_time: Some(wall.clone()),
                renew_time: Some(wall),
                lease_transitions: Some(0),
                ..Default::default()
            });
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let taking_over = holder.as_deref() != Some(self.identity.as_str());
        if taking_over {
            let unchanged = self.unchanged_for(&spec, &holder, now);
            if holder.is_some() && unchanged < held_for(&spec, self.timings) {
                return Decision::Follow(holder);
            }
        }
        let mut new_spec = spec;
        if taking_over {
            new_spec.acquire_time = Some(wall.clone());
            new_spec.lease_transitions = Some(new_spec.lease_transitions.unwrap_or(0) + 1);
        }
        new_spec.holder_identity = Some(self.identity.clone());
        new_spec.lease_duration_seconds = Some(duration_secs);
        new_spec.renew_time = Some(wall);
        lease.spec = Some(new_spec);
        Decision::Replace {
            lease: Box::new(lease),
            previous: holder,
            taking_over,
        }
    }

    /// How long (up to `now`) this replica has seen the record of `spec` unchanged.
    fn unchanged_for(
        &mut self,
        spec: &LeaseSpec,
        holder: &Option<String>,
        now: Instant,
    ) -> Duration {
        let record = (
            holder.clone(),
            spec.renew_time.as_ref().map(|t| t.0.to_string()),
            spec.lease_transitions,
        );
        let since = match &self.observed {
            Some(o) if o.record == record => o.at,
            _ => {
                self.observed = Some(Observation { record, at: now });
                now
            }
        };
        now.saturating_duration_since(since)
    }
}

/// How long a holder's Lease lives after its last renewal: its own duration, else ours.
fn held_for(spec: &LeaseSpec, timings: LeaseTimings) -> Duration {
    spec.lease_duration_seconds
        .map_or(timings.lease_duration, |s| {
            Duration::from_secs(s.max(1) as u64)
        })
}

/// The Lease to write to give it up: `lease` without a holder and with a 1-second duration, if
/// `identity` holds it (otherwise there is nothing to give up).
pub fn released(mut lease: Lease, identity: &str, wall: Timestamp) -> Option<Lease> {
    let spec = lease.spec.as_mut()?;
    if spec.holder_identity.as_deref() != Some(identity) {
        return None;
    }
    spec.holder_identity = None;
    spec.lease_duration_seconds = Some(1);
    spec.renew_time = Some(MicroTime(wall));
    Some(lease)
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
