//! Leader election on a `coordination.k8s.io/v1` Lease.
//!
//! Every replica serves xDS and the webhook; only the holder of the Lease writes status. The
//! algorithm is client-go's: a follower takes over when the Lease record has not changed for
//! `lease_duration` *as measured on its own clock* (no trust in other replicas' clocks); the leader
//! renews every `renew_period` and steps down when it could not renew for `renew_deadline`
//! (shorter than the lease duration, so two leaders never overlap); on shutdown the leader
//! releases the Lease so a successor takes over at its next retry.
//!
//! The renew deadline is a timer of the leader's own, counted from the start of its last
//! successful renewal, not the outcome of a request: a renewal the API server never answers (a
//! network that stopped carrying the connection, an apiserver that hangs) ends leadership at the
//! deadline all the same, and every request of the election is abandoned when it runs past it.
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
    ///
    /// While this replica leads, a timer of its own ends its leadership at its renew deadline —
    /// the *start* of its last successful round plus `renew_deadline` — whatever the request in
    /// flight does: a renewal the API server (or the network) never answers is abandoned at the
    /// deadline and `leader` turns false at that moment, so the status writer stops before any
    /// follower can take over (a follower waits `lease_duration`, measured from when it saw the
    /// record this replica wrote, which is no earlier than the round's start). A follower's
    /// round is bounded by `renew_deadline` too.
    pub async fn run(mut self, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        // While leading: when leadership ends unless a renewal succeeds first.
        let mut deadline: Option<Instant> = None;
        let mut next_round = Instant::now();
        loop {
            tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                _ = sleep_until_some(deadline) => {
                    self.step_down(&leader);
                    deadline = None;
                    continue;
                }
                _ = tokio::time::sleep_until(next_round) => {}
            }
            let leading = *leader.borrow();
            let started = Instant::now();
            let bound = deadline.unwrap_or(started + self.timings.renew_deadline);
            let outcome = tokio::select! {
                biased;
                _ = shutdown.wait_for(|s| *s) => break,
                r = tokio::time::timeout_at(bound, self.round()) => r,
            };
            match outcome {
                Ok(Ok(Round::Leading)) => {
                    deadline = Some(started + self.timings.renew_deadline);
                    if !leading {
                        tracing::info!(identity = %self.identity, lease = %self.name, "became leader");
                        leader.send_replace(true);
                    }
                }
                Ok(Ok(Round::Following(holder))) => {
                    if leading {
                        tracing::warn!(identity = %self.identity, holder = ?holder, "lost the lease");
                        leader.send_replace(false);
                    }
                    deadline = None;
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, lease = %self.name, "lease request failed");
                }
                Err(_) => {
                    tracing::warn!(
                        lease = %self.name,
                        after_ms = started.elapsed().as_millis() as u64,
                        "lease request timed out"
                    );
                }
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                self.step_down(&leader);
                deadline = None;
            }
            next_round = Instant::now()
                + if *leader.borrow() {
                    self.timings.renew_period
                } else {
                    self.timings.retry_period
                };
        }
        if *leader.borrow() {
            leader.send_replace(false);
            match tokio::time::timeout(self.timings.renew_deadline, self.release()).await {
                Ok(Ok(())) => tracing::info!(identity = %self.identity, "released the lease"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
                Err(_) => tracing::warn!("could not release the lease: the request timed out"),
            }
        }
    }

    /// Ends this replica's leadership: its renew deadline passed without a renewal.
    fn step_down(&self, leader: &watch::Sender<bool>) {
        if *leader.borrow() {
            tracing::warn!(
                identity = %self.identity,
                renew_deadline_ms = self.timings.renew_deadline.as_millis() as u64,
                "could not renew the lease in time; stepping down"
            );
            leader.send_replace(false);
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

/// Sleeps until `at`; forever when there is none.
async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Whether an API error is a 409 Conflict (someone else wrote first).
pub fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;

    /// Timings scaled down for tests, with wide margins between the deadline and the duration
    /// (a loaded test machine delays timers).
    const FAST: LeaseTimings = LeaseTimings {
        lease_duration: Duration::from_millis(3000),
        renew_deadline: Duration::from_millis(1500),
        renew_period: Duration::from_millis(300),
        retry_period: Duration::from_millis(300),
    };

    /// One Lease in memory, as the API server keeps it.
    #[derive(Default)]
    struct LeaseStore {
        lease: Option<Value>,
        version: u64,
        /// Each successful write: the holder it wrote and when it reached the store.
        writes: Vec<(String, Instant)>,
    }

    /// An API server for the Lease `sluice-system/sluice-leader` (GET, POST, PUT with
    /// resourceVersion checks) over `store`; every request of this client hangs while
    /// `partitioned` is true, as over a network that stopped carrying it.
    fn lease_apiserver(
        store: Arc<Mutex<LeaseStore>>,
        partitioned: watch::Receiver<bool>,
    ) -> Client {
        use axum::http::{Request, Response, StatusCode};
        use http_body_util::BodyExt;
        let service = tower::service_fn(move |req: Request<kube::client::Body>| {
            let (store, partitioned) = (store.clone(), partitioned.clone());
            async move {
                if *partitioned.borrow() {
                    std::future::pending::<()>().await;
                }
                let method = req.method().clone();
                let body = req.into_body().collect().await?.to_bytes();
                let sent: Value = serde_json::from_slice(&body).unwrap_or_default();
                let mut st = store.lock().unwrap();
                let status = |code: u16, reason: &str| {
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": reason, "code": code})
                };
                let (code, answer) = match method.as_str() {
                    "GET" => match &st.lease {
                        Some(l) => (200, l.clone()),
                        None => (404, status(404, "NotFound")),
                    },
                    "POST" | "PUT" => {
                        let exists = st.lease.is_some();
                        let current = st.version.to_string();
                        let stale = sent["metadata"]["resourceVersion"].as_str() != Some(&current);
                        if (method == "POST" && exists) || (method == "PUT" && (!exists || stale)) {
                            (409, status(409, "Conflict"))
                        } else {
                            st.version += 1;
                            let mut lease = sent;
                            lease["metadata"]["resourceVersion"] = json!(st.version.to_string());
                            let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or("");
                            st.writes.push((holder.to_string(), Instant::now()));
                            st.lease = Some(lease.clone());
                            (if method == "POST" { 201 } else { 200 }, lease)
                        }
                    }
                    _ => (405, status(405, "MethodNotAllowed")),
                };
                let mut response = Response::new(kube::client::Body::from(
                    serde_json::to_vec(&answer).unwrap(),
                ));
                *response.status_mut() = StatusCode::from_u16(code).unwrap();
                Ok::<_, kube::Error>(response)
            }
        });
        Client::new(service, "sluice-system")
    }

    /// An elector of `identity` over `store`: its leadership, its partition switch, its stop.
    fn spawn_elector(
        store: &Arc<Mutex<LeaseStore>>,
        identity: &str,
    ) -> (
        watch::Receiver<bool>,
        watch::Sender<bool>,
        watch::Sender<bool>,
    ) {
        let (partition, partitioned) = watch::channel(false);
        let client = lease_apiserver(store.clone(), partitioned);
        let elector = Elector::new(client, "sluice-system", "sluice-leader", identity, FAST);
        let (leader_tx, leader) = watch::channel(false);
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(elector.run(leader_tx, stopped));
        (leader, partition, stop)
    }

    async fn wait_until(rx: &mut watch::Receiver<bool>, value: bool, within: Duration) {
        tokio::time::timeout(within, rx.wait_for(|v| *v == value))
            .await
            .unwrap_or_else(|_| panic!("leadership was not {value} within {within:?}"))
            .unwrap();
    }

    /// A renewal that never returns ends leadership at the renew deadline — counted from the
    /// start of the last renewal that reached the API server — not when (or if) the request
    /// ends.
    #[tokio::test]
    async fn a_hung_renewal_ends_leadership_at_the_renew_deadline() {
        let store = Arc::new(Mutex::new(LeaseStore::default()));
        let (mut leader, partition, _stop) = spawn_elector(&store, "a");
        wait_until(&mut leader, true, Duration::from_secs(5)).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        partition.send_replace(true);
        let partitioned_at = Instant::now();
        wait_until(&mut leader, false, Duration::from_secs(10)).await;
        let stepped_down = Instant::now();
        let (holder, last_write) = store.lock().unwrap().writes.last().cloned().unwrap();
        assert_eq!(holder, "a");
        let held = stepped_down - last_write;
        assert!(
            held < FAST.lease_duration,
            "led for {held:?} after its last renewal reached the API server: a follower may take over after {:?}",
            FAST.lease_duration
        );
        assert!(stepped_down - partitioned_at <= FAST.renew_deadline + Duration::from_millis(500));
    }

    /// Two replicas, the leader's requests hang: the follower takes over once the Lease
    /// expires, and the two never lead at the same time; when the old leader's requests get
    /// through again it follows.
    #[tokio::test]
    async fn a_partitioned_leader_steps_down_before_another_replica_takes_over() {
        let store = Arc::new(Mutex::new(LeaseStore::default()));
        let (mut a, partition_a, _stop_a) = spawn_elector(&store, "a");
        wait_until(&mut a, true, Duration::from_secs(5)).await;
        let (mut b, _partition_b, _stop_b) = spawn_elector(&store, "b");
        // Watch both: were they ever leaders at once?
        let overlap = Arc::new(Mutex::new(false));
        let monitor = {
            let (mut a, mut b, overlap) = (a.clone(), b.clone(), overlap.clone());
            tokio::spawn(async move {
                loop {
                    if *a.borrow_and_update() && *b.borrow_and_update() {
                        *overlap.lock().unwrap() = true;
                    }
                    tokio::select! {
                        r = a.changed() => if r.is_err() { return },
                        r = b.changed() => if r.is_err() { return },
                    }
                }
            })
        };
        tokio::time::sleep(Duration::from_secs(1)).await;
        assert!(!*b.borrow());
        partition_a.send_replace(true);
        wait_until(&mut b, true, Duration::from_secs(10)).await;
        assert!(!*a.borrow(), "b took over while a still led");
        partition_a.send_replace(false);
        tokio::time::sleep(2 * FAST.renew_deadline).await;
        assert!(!*a.borrow() && *b.borrow());
        monitor.abort();
        assert!(!*overlap.lock().unwrap(), "a and b led at the same time");
        let st = store.lock().unwrap();
        assert_eq!(st.writes.last().map(|(h, _)| h.as_str()), Some("b"));
    }

    #[test]
    fn default_timings_keep_the_failover_promise_and_never_overlap() {
        let t = LeaseTimings::default();
        assert!(t.lease_duration + 2 * t.retry_period <= Duration::from_secs(15));
        assert!(t.renew_deadline < t.lease_duration);
        assert!(t.renew_period < t.renew_deadline);
    }
}
