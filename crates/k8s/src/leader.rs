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
//!
//! Every decision — when a round runs and how long its requests may take, what it writes to the
//! Lease, when leadership begins and ends — is made by a synchronous state machine
//! (`machine::Election`, tested without a server or a runtime); [`Elector::run`] only waits,
//! performs the requests under their bound and publishes what the machine decides.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::sync::watch;

mod machine;

use machine::{Action, Change, Decision, Election, Outcome, released};

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

/// Runs the election until `shutdown` turns true; publishes leadership on `leader`.
pub struct Elector {
    api: Api<Lease>,
    name: String,
    identity: String,
    timings: LeaseTimings,
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
        }
    }

    /// The election loop: the async shell of `Election` (`leader/machine.rs`), which decides. Returns after
    /// releasing the Lease once `shutdown` is set (or its sender is gone).
    ///
    /// While this replica leads, a timer of its own ends its leadership at its renew deadline —
    /// the *start* of its last successful round plus `renew_deadline` — whatever the request in
    /// flight does: a renewal the API server (or the network) never answers is abandoned at the
    /// deadline and `leader` turns false at that moment, so the status writer stops before any
    /// follower can take over (a follower waits `lease_duration`, measured from when it saw the
    /// record this replica wrote, which is no earlier than the round's start). A follower's
    /// round is bounded by `renew_deadline` too.
    pub async fn run(self, leader: watch::Sender<bool>, mut shutdown: watch::Receiver<bool>) {
        let mut election = Election::new(&self.identity, self.timings, now());
        loop {
            if stopping(&shutdown) {
                break;
            }
            // A round due now starts at this instant.
            let started = now();
            match election.wake(started) {
                Action::StepDown => self.publish(&leader, Change::SteppedDown),
                Action::Sleep(until) => tokio::select! {
                    biased;
                    _ = shutdown.wait_for(|s| *s) => break,
                    _ = tokio::time::sleep_until(until.into()) => {}
                },
                Action::StartRound { bound } => {
                    let result = tokio::select! {
                        biased;
                        _ = shutdown.wait_for(|s| *s) => break,
                        r = tokio::time::timeout_at(bound.into(), self.round(&mut election)) => r,
                    };
                    let outcome = self.outcome(result, started);
                    if let Some(change) = election.round_done(outcome, started, now()) {
                        self.publish(&leader, change);
                    }
                }
            }
        }
        if election.shutdown() {
            leader.send_replace(false);
            match tokio::time::timeout(self.timings.renew_deadline, self.release()).await {
                Ok(Ok(())) => tracing::info!(identity = %self.identity, "released the lease"),
                Ok(Err(e)) => tracing::warn!(error = %e, "could not release the lease"),
                Err(_) => tracing::warn!("could not release the lease: the request timed out"),
            }
        }
    }

    /// Logs a leadership flip and publishes it on `leader`.
    fn publish(&self, leader: &watch::Sender<bool>, change: Change) {
        match &change {
            Change::Became => {
                tracing::info!(identity = %self.identity, lease = %self.name, "became leader")
            }
            Change::Lost { holder } => {
                tracing::warn!(identity = %self.identity, holder = ?holder, "lost the lease")
            }
            Change::SteppedDown => tracing::warn!(
                identity = %self.identity,
                renew_deadline_ms = self.timings.renew_deadline.as_millis() as u64,
                "could not renew the lease in time; stepping down"
            ),
        }
        leader.send_replace(change == Change::Became);
    }

    /// What a round's result (abandoned at its bound: `Err`) means to the election; logs a
    /// failure.
    fn outcome(
        &self,
        result: Result<Result<Outcome, kube::Error>, tokio::time::error::Elapsed>,
        started: Instant,
    ) -> Outcome {
        match result {
            Ok(Ok(outcome)) => outcome,
            Ok(Err(e)) => {
                tracing::warn!(error = %e, lease = %self.name, "lease request failed");
                Outcome::Failed
            }
            Err(_) => {
                tracing::warn!(
                    lease = %self.name,
                    after_ms = now().saturating_duration_since(started).as_millis() as u64,
                    "lease request timed out"
                );
                Outcome::Failed
            }
        }
    }

    /// One attempt to acquire or renew: reads the Lease, writes what `election` decides.
    async fn round(&self, election: &mut Election) -> Result<Outcome, kube::Error> {
        let wall = Timestamp::now();
        let lease = self.api.get_opt(&self.name).await?;
        let params = PostParams::default();
        match election.decide(lease, now(), wall) {
            Decision::Follow(holder) => Ok(Outcome::Following(holder)),
            Decision::Create(spec) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        ..Default::default()
                    },
                    spec: Some(spec),
                };
                match self.api.create(&params, &lease).await {
                    Ok(_) => Ok(Outcome::Leading),
                    Err(e) if is_conflict(&e) => Ok(Outcome::Following(None)),
                    Err(e) => Err(e),
                }
            }
            Decision::Replace {
                lease,
                previous,
                taking_over,
            } => {
                if taking_over {
                    tracing::info!(identity = %self.identity, previous = ?previous, "taking over the lease");
                }
                // replace carries metadata.resourceVersion: a concurrent writer makes this a 409.
                match self.api.replace(&self.name, &params, &lease).await {
                    Ok(_) => Ok(Outcome::Leading),
                    Err(e) if is_conflict(&e) => Ok(Outcome::Following(previous)),
                    Err(e) => Err(e),
                }
            }
        }
    }

    /// Gives the Lease up so the next replica does not wait for it to expire.
    async fn release(&self) -> Result<(), kube::Error> {
        let Some(lease) = self.api.get_opt(&self.name).await? else {
            return Ok(());
        };
        let Some(lease) = released(lease, &self.identity, Timestamp::now()) else {
            return Ok(());
        };
        self.api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
            .map(|_| ())
    }
}

/// The election's clock: tokio's (paused in tests that pause it), as a std `Instant`.
fn now() -> Instant {
    tokio::time::Instant::now().into_std()
}

/// Whether `shutdown` is set or its sender gone (what `wait_for` returns at once for).
fn stopping(shutdown: &watch::Receiver<bool>) -> bool {
    *shutdown.borrow() || shutdown.has_changed().is_err()
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

    /// A leader told to stop gives the Lease up: its last write has no holder.
    #[tokio::test]
    async fn a_leader_releases_the_lease_on_shutdown() {
        let store = Arc::new(Mutex::new(LeaseStore::default()));
        let (mut leader, _partition, stop) = spawn_elector(&store, "a");
        wait_until(&mut leader, true, Duration::from_secs(5)).await;
        stop.send_replace(true);
        wait_until(&mut leader, false, Duration::from_secs(1)).await;
        let released = async {
            loop {
                let last = store.lock().unwrap().writes.last().cloned();
                if last.is_some_and(|(holder, _)| holder.is_empty()) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(2), released)
            .await
            .expect("the Lease was not released");
    }

    #[test]
    fn default_timings_keep_the_failover_promise_and_never_overlap() {
        let t = LeaseTimings::default();
        assert!(t.lease_duration + 2 * t.retry_period <= Duration::from_secs(15));
        assert!(t.renew_deadline < t.lease_duration);
        assert!(t.renew_period < t.renew_deadline);
    }
}
