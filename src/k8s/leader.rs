//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Every replica serves xDS and the webhook; only the holder of the Lease writes status. The
//! algorithm is client-go's: a follower takes over when the Lease record has not changed for
//! `lease_duration` *as measured on its own clock* (no trust in other replicas' clocks); the leader
//! renews every `renew_period` and steps down when it could not renew for `renew_deadline`
//! (shorter than the lease duration, so two leaders never overlap); on shutdown the leader
//! releases the Lease so a successor takes over at its next retry.
//!
//! Failover after a crash takes at most `lease_duration + 2 × retry_period` (the last renewal is
//! seen up to one retry late, expiry is noticed up to one retry late): 10 s + 2 × 2 s = 14 s with
//! the defaults, inside the 15 s sluice promises. After a graceful shutdown it takes at most one
//! retry period.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;
use tokio::time::Instant;

/// Timings of the election.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    pub lease_duration: Duration,
    pub renew_deadline: Duration,
    pub renew_period: Duration,
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> Self {
        LeaseTimings {
            lease_duration: Duration::from_secs(10),
            renew_deadline: Duration::from_secs(7),
            renew_period: Duration::from_secs(2),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// Who holds the Lease and since when this replica has seen its record unchanged.
#[derive(Clone, Debug, PartialEq)]
struct Observation {
    record: (Option<String>, Option<String>, Option<i32>),
    at: Instant,
}

/// What one election round decided.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Round {
    /// This replica holds the Lease.
    Leading,
    /// Someone else holds a live Lease.
    Following(Option<String>),
}

/// Runs the election until `shutdown` turns true; publishes leadership on `leader`.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: LeaseTimings,
    observed: Option<Observation>,
}

impl Elector {
    pub fn new(
        client: Client,
        namespace: &str,
        name: &str,
        identity: &str,
        timings: LeaseTimings,
    ) -> Self {
        Elector {
            api: Api::namespaced(client, namespace),
            name: name.to_string(),
            identity: identity.to_string(),
            timings,
            observed: None,
        }
    }

    /// The election loop. Returns after releasing the Lease once `shutdown` is set.
    pub async fn run(mut self, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut last_renew: Option<Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let leading = *leader.borrow();
            match self.round().await {
                Ok(Round::Leading) => {
                    last_renew = Some(Instant::now());
                    if !leading {
                        tracing::info!(identity = %self.identity, lease = %self.name, "became leader");
                        leader.send_replace(true);
                    }
                }
                Ok(Round::Following(holder)) => {
                    if leading {
                        tracing::warn!(identity = %self.identity, holder = ?holder, "lost the lease");
                        leader.send_replace(false);
                    }
                    last_renew = None;
                }
                Err(e) => {
                    tracing::warn!(error = %e, lease = %self.name, "lease request failed");
                    let expired =
                        last_renew.is_none_or(|t| t.elapsed() >= self.timings.renew_deadline);
                    if leading && expired {
                        tracing::warn!(identity = %self.identity, "could not renew the lease in time; stepping down");
                        leader.send_replace(false);
                        last_renew = None;
                    }
                }
            }
            let wait = if *leader.borrow() {
                self.timings.renew_period
            } else {
                self.timings.retry_period
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => {}
            }
        }
        if *leader.borrow() {
            leader.send_replace(false);
            match self.release().await {
                Ok(()) => tracing::info!(identity = %self.identity, "released the lease"),
                Err(e) => tracing::warn!(error = %e, "could not release the lease"),
            }
        }
    }

    /// One attempt to acquire or renew.
    async fn round(&mut self) -> Result<Round, kube::Error> {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        let duration_secs = self.timings.lease_duration.as_secs().max(1) as i32;
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.name.clone()),
                    ..Default::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.identity.clone()),
                    lease_duration_seconds: Some(duration_secs),
                    acquire_time: Some(now.clone()),
                    renew_time: Some(now),
                    lease_transitions: Some(0),
                    ..Default::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(Round::Leading),
                Err(e) if is_conflict(&e) => Ok(Round::Following(None)),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        if holder.as_deref() != Some(self.identity.as_str()) {
            let record = (
                holder.clone(),
                spec.renew_time.as_ref().map(|t| t.0.to_string()),
                spec.lease_transitions,
            );
            let at = Instant::now();
            let unchanged_since = match &self.observed {
                Some(o) if o.record == record => o.at,
                _ => {
                    self.observed = Some(Observation { record, at });
                    at
                }
            };
            let held_for = spec
                .lease_duration_seconds
                .map_or(self.timings.lease_duration, |s| {
                    Duration::from_secs(s.max(1) as u64)
                });
            if holder.is_some() && unchanged_since.elapsed() < held_for {
                return Ok(Round::Following(holder));
            }
        }
        let taking_over = holder.as_deref() != Some(self.identity.as_str());
        let mut new_spec = spec;
        if taking_over {
            new_spec.acquire_time = Some(now.clone());
            new_spec.lease_transitions = Some(new_spec.lease_transitions.unwrap_or(0) + 1);
            tracing::info!(identity = %self.identity, previous = ?holder, "taking over the lease");
        }
        new_spec.holder_identity = Some(self.identity.clone());
        new_spec.lease_duration_seconds = Some(duration_secs);
        new_spec.renew_time = Some(now);
        lease.spec = Some(new_spec);
        // replace carries metadata.resourceVersion: a concurrent writer makes this a 409.
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => Ok(Round::Leading),
            Err(e) if is_conflict(&e) => Ok(Round::Following(holder)),
            Err(e) => Err(e),
        }
    }

    /// Gives the Lease up so the next replica does not wait for it to expire.
    async fn release(&self) -> Result<(), kube::Error> {
        let Some(mut lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(spec) = lease.spec.as_mut() else {
            return Ok(());
        };
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return Ok(());
        }
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(k8s_openapi::jiff::Timestamp::now()));
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// Whether an API error is a 409 Conflict (someone else wrote first).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_timings_keep_the_failover_promise_and_never_overlap() {
        let t = LeaseTimings::default();
        assert!(t.lease_duration + 2 * t.retry_period <= Duration::from_secs(15));
        assert!(t.renew_deadline < t.lease_duration);
        assert!(t.renew_period < t.renew_deadline);
    }
}
