//! Tests of the status writer (`writer.rs`) against mock API servers.

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

/// Stores root IngressRoutes with these names, as the watch would.
fn add_routes(state: &Mutex<ClusterState>, names: &[&str]) {
    for name in names {
        let p = prepare(Kind::IngressRouteV1beta1, ingressroute(name)).unwrap();
        lock(state).apply(p);
    }
}

/// The build of whatever `state` holds.
fn build(state: &Mutex<ClusterState>, version: u64) -> Arc<Built> {
    let st = lock(state);
    let snapshot = Arc::new(st.snapshot().clone());
    let dag = Arc::new(sluice_core::dag::build(&snapshot, &Default::default()));
    Arc::new(Built {
        version,
        snapshot,
        dag,
        rejected: Arc::new(st.rejected().clone()),
    })
}

/// An apiserver that answers status applies of `names` (namespace `team`) with the object
/// carrying the applied status, records each write's object name, and holds a write of `slow`
/// until `released` is true.
fn mock_apiserver(
    names: &[&str],
    slow: &'static str,
    released: watch::Receiver<bool>,
) -> (Client, Arc<Mutex<Vec<String>>>) {
    use axum::http::{Request, Response};
    use http_body_util::BodyExt;
    let objects: BTreeMap<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), ingressroute(n)))
        .collect();
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
                if name == slow {
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
    (Client::new(apiserver, "default"), written)
}

/// What a test's API server saw of each write, by object name.
#[derive(Clone, Default)]
struct Seen {
    /// Requests that reached it.
    sent: Arc<Mutex<Vec<String>>>,
    /// Requests it answered.
    answered: Arc<Mutex<Vec<String>>>,
    /// Requests the client gave up before they were answered.
    abandoned: Arc<Mutex<Vec<String>>>,
}

/// Records a request the client drops before it is answered.
struct Abandon(Option<(String, Arc<Mutex<Vec<String>>>)>);

impl Drop for Abandon {
    fn drop(&mut self) {
        if let Some((name, abandoned)) = self.0.take() {
            abandoned.lock().unwrap().push(name);
        }
    }
}

/// An apiserver like [`mock_apiserver`] whose answer to the `n`th write (from 0) of an
/// object never comes when `hangs(name, n)`.
fn hanging_apiserver(names: &[&str], hangs: fn(&str, usize) -> bool) -> (Client, Seen) {
    use axum::http::{Request, Response};
    use http_body_util::BodyExt;
    let objects: BTreeMap<String, Value> = names
        .iter()
        .map(|n| (n.to_string(), ingressroute(n)))
        .collect();
    let seen = Seen::default();
    let apiserver = {
        let seen = seen.clone();
        tower::service_fn(move |req: Request<kube::client::Body>| {
            let (objects, seen) = (objects.clone(), seen.clone());
            async move {
                let name = req
                    .uri()
                    .path()
                    .rsplit('/')
                    .nth(1)
                    .unwrap_or("")
                    .to_string();
                let body = req.into_body().collect().await?.to_bytes();
                let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                let attempt = {
                    let mut sent = seen.sent.lock().unwrap();
                    sent.push(name.clone());
                    sent.iter().filter(|n| **n == name).count() - 1
                };
                let mut guard = Abandon(Some((name.clone(), seen.abandoned.clone())));
                if hangs(&name, attempt) {
                    std::future::pending::<()>().await;
                }
                guard.0 = None;
                let mut object = objects.get(&name).cloned().unwrap_or_default();
                object["status"] = patch["status"].clone();
                seen.answered.lock().unwrap().push(name);
                Ok::<_, kube::Error>(Response::new(kube::client::Body::from(
                    serde_json::to_vec(&object).unwrap_or_default(),
                )))
            }
        })
    };
    (Client::new(apiserver, "default"), seen)
}

/// Waits until `list` holds `name` `times` times.
async fn seen_times(list: &Mutex<Vec<String>>, name: &str, times: usize) {
    written_times(list, name, times).await;
}

/// A running writer's inputs.
struct Running {
    built: watch::Sender<Option<Arc<Built>>>,
    leader: watch::Sender<bool>,
    shutdown: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

/// The writer over `state` as leader, from build 1 of it.
fn spawn_writer(
    client: Client,
    state: &Arc<Mutex<ClusterState>>,
) -> (
    watch::Sender<Option<Arc<Built>>>,
    watch::Sender<bool>,
    tokio::task::JoinHandle<()>,
) {
    let r = spawn_writer_with(client, state, WRITE_TIMEOUT);
    let leader = r.leader;
    let task = tokio::spawn(async move {
        let _ = r.task.await;
        drop(leader);
    });
    (r.built, r.shutdown, task)
}

/// The writer over `state` as leader, from build 1 of it, each write bounded by `timeout`.
fn spawn_writer_with(
    client: Client,
    state: &Arc<Mutex<ClusterState>>,
    write_timeout: Duration,
) -> Running {
    let resource = ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("contour.heptio.com", "v1beta1", "IngressRoute"),
        "ingressroutes",
    );
    let ctx = WriterContext {
        client,
        state: state.clone(),
        resources: Arc::new(Mutex::new(BTreeMap::from([(
            Kind::IngressRouteV1beta1,
            resource,
        )]))),
        metrics: Metrics::default(),
        rate: 1000.0,
        burst: 100,
        concurrency: 4,
        write_timeout,
    };
    let (built_tx, built) = watch::channel(Some(build(state, 1)));
    let (leader_tx, leader) = watch::channel(true);
    let (lb_tx, load_balancer) = watch::channel(None);
    let (shutdown_tx, shutdown) = watch::channel(false);
    let task = tokio::spawn(async move {
        write_loop(
            ctx,
            WriterInputs {
                built,
                leader,
                load_balancer,
                shutdown,
            },
        )
        .await;
        drop(lb_tx);
    });
    Running {
        built: built_tx,
        leader: leader_tx,
        shutdown: shutdown_tx,
        task,
    }
}

/// A write the API server never answers is abandoned after the write timeout and retried;
/// the other objects' writes go on meanwhile.
#[tokio::test]
async fn a_write_that_never_ends_is_abandoned_and_retried() {
    let (client, seen) = hanging_apiserver(&["stuck", "a"], |name, n| name == "stuck" && n == 0);
    let state = Arc::new(Mutex::new(ClusterState::default()));
    add_routes(&state, &["stuck", "a"]);
    let w = spawn_writer_with(client, &state, Duration::from_millis(300));
    seen_times(&seen.answered, "a", 1).await;
    seen_times(&seen.abandoned, "stuck", 1).await;
    seen_times(&seen.answered, "stuck", 1).await;
    w.shutdown.send_replace(true);
    w.task.await.unwrap();
    assert_eq!(
        seen.sent
            .lock()
            .unwrap()
            .iter()
            .filter(|n| *n == "stuck")
            .count(),
        2
    );
}

/// An apiserver keeping `names` with resourceVersions: a write whose precondition names
/// another version is refused (409); every write is recorded with its precondition and
/// outcome. The first write of `held` waits until `released` is true.
fn versioned_apiserver(
    names: &[&str],
    held: &'static str,
    released: watch::Receiver<bool>,
) -> (Client, Versioned) {
    use axum::http::{Request, Response, StatusCode};
    use http_body_util::BodyExt;
    let objects: Arc<Mutex<BTreeMap<String, Value>>> = Arc::new(Mutex::new(
        names
            .iter()
            .map(|n| (n.to_string(), ingressroute(n)))
            .collect(),
    ));
    let log = Arc::new(Mutex::new(Vec::new()));
    let arrived = Arc::new(Mutex::new(0));
    let apiserver = {
        let (objects, log, arrived) = (objects.clone(), log.clone(), arrived.clone());
        tower::service_fn(move |req: Request<kube::client::Body>| {
            let (objects, log, arrived, mut released) = (
                objects.clone(),
                log.clone(),
                arrived.clone(),
                released.clone(),
            );
            async move {
                let name = req
                    .uri()
                    .path()
                    .rsplit('/')
                    .nth(1)
                    .unwrap_or("")
                    .to_string();
                let body = req.into_body().collect().await?.to_bytes();
                let patch: Value = serde_json::from_slice(&body).unwrap_or_default();
                let first = {
                    let mut arrived = arrived.lock().unwrap();
                    *arrived += 1;
                    *arrived == 1
                };
                if name == held && first {
                    let _ = released.wait_for(|r| *r).await;
                }
                let precondition = patch["metadata"]["resourceVersion"]
                    .as_str()
                    .map(String::from);
                let mut objects = objects.lock().unwrap();
                let object = objects.get_mut(&name).unwrap();
                let current = object["metadata"]["resourceVersion"]
                    .as_str()
                    .unwrap()
                    .to_string();
                let accepted = precondition.as_ref().is_none_or(|p| *p == current);
                log.lock().unwrap().push((name, precondition, accepted));
                let (code, answer) = if accepted {
                    let next = current.parse::<u64>().unwrap() + 1;
                    object["metadata"]["resourceVersion"] = Value::from(next.to_string());
                    object["status"] = patch["status"].clone();
                    (200, object.clone())
                } else {
                    let status = serde_json::json!({"kind": "Status", "apiVersion": "v1",
                        "status": "Failure", "reason": "Conflict", "code": 409});
                    (409, status)
                };
                let mut response = Response::new(kube::client::Body::from(
                    serde_json::to_vec(&answer).unwrap_or_default(),
                ));
                *response.status_mut() = StatusCode::from_u16(code).unwrap();
                Ok::<_, kube::Error>(response)
            }
        })
    };
    let seen = Versioned {
        objects,
        log,
        arrived,
    };
    (Client::new(apiserver, "default"), seen)
}

/// A write [`versioned_apiserver`] answered: object, precondition, accepted.
type Answered = (String, Option<String>, bool);

/// What [`versioned_apiserver`] holds and saw.
struct Versioned {
    objects: Arc<Mutex<BTreeMap<String, Value>>>,
    /// Each write answered: object, precondition, accepted.
    log: Arc<Mutex<Vec<Answered>>>,
    /// Writes that reached it.
    arrived: Arc<Mutex<usize>>,
}

/// A write sent from a view of the object that fell behind — here, another writer changed
/// the status while this one's write was on its way — is refused by its resourceVersion
/// precondition instead of replacing the newer status; once the watch brings the new
/// version, the writer plans from it.
#[tokio::test]
async fn a_write_from_a_view_that_fell_behind_is_refused() {
    let (release, released) = watch::channel(false);
    let (client, seen) = versioned_apiserver(&["a"], "a", released);
    let Versioned {
        objects,
        log,
        arrived,
    } = seen;
    let state = Arc::new(Mutex::new(ClusterState::default()));
    add_routes(&state, &["a"]);
    let w = spawn_writer_with(client, &state, WRITE_TIMEOUT);
    let deadline = Instant::now() + Duration::from_secs(30);
    while *arrived.lock().unwrap() == 0 {
        assert!(Instant::now() < deadline, "a was never written");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Meanwhile another writer changes a's status.
    let newer = {
        let mut objects = objects.lock().unwrap();
        let a = objects.get_mut("a").unwrap();
        a["metadata"]["resourceVersion"] = Value::from("2");
        a["status"] = serde_json::json!({"currentStatus": "invalid", "description": "newer"});
        a.clone()
    };
    release.send_replace(true);
    let deadline = Instant::now() + Duration::from_secs(30);
    while log.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the held write never arrived");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        log.lock().unwrap()[0],
        ("a".to_string(), Some("1".to_string()), false),
        "the write made from version 1 replaced version 2"
    );
    assert_eq!(
        objects.lock().unwrap()["a"]["status"]["description"],
        "newer"
    );
    // The watch brings version 2: the writer writes from it.
    lock(&state).apply(prepare(Kind::IngressRouteV1beta1, newer).unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    while !log.lock().unwrap().iter().any(|(_, _, accepted)| *accepted) {
        assert!(
            Instant::now() < deadline,
            "a was never written: {:?}",
            log.lock().unwrap()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let accepted: Vec<_> = (log.lock().unwrap().iter())
        .filter(|(_, _, ok)| *ok)
        .map(|(_, rv, _)| rv.clone())
        .collect();
    assert_eq!(accepted, [Some("2".to_string())]);
    assert_ne!(
        objects.lock().unwrap()["a"]["status"]["description"],
        "newer"
    );
    w.shutdown.send_replace(true);
    w.task.await.unwrap();
}

/// A replica that stops leading abandons its writes in flight at once (not at their
/// timeout) and starts none until it leads again.
#[tokio::test]
async fn losing_the_lease_abandons_the_writes_in_flight_and_starts_none() {
    let (client, seen) =
        hanging_apiserver(&["stuck", "a", "b"], |name, n| name == "stuck" && n == 0);
    let state = Arc::new(Mutex::new(ClusterState::default()));
    add_routes(&state, &["stuck", "a"]);
    let w = spawn_writer_with(client, &state, Duration::from_secs(600));
    seen_times(&seen.answered, "a", 1).await;
    seen_times(&seen.sent, "stuck", 1).await;
    w.leader.send_replace(false);
    let lost = Instant::now();
    seen_times(&seen.abandoned, "stuck", 1).await;
    assert!(lost.elapsed() < Duration::from_secs(5));
    // A new object while following: nothing is sent.
    add_routes(&state, &["b"]);
    w.built.send_replace(Some(build(&state, 2)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sent = seen.sent.lock().unwrap().clone();
    sent.sort();
    assert_eq!(
        sent,
        ["a", "stuck"],
        "a replica that does not lead sent a write"
    );
    w.leader.send_replace(true);
    seen_times(&seen.answered, "b", 1).await;
    seen_times(&seen.answered, "stuck", 1).await;
    w.shutdown.send_replace(true);
    w.task.await.unwrap();
}

/// Waits until `name` was written `times` times.
async fn written_times(written: &Mutex<Vec<String>>, name: &str, times: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while written
        .lock()
        .unwrap()
        .iter()
        .filter(|n| *n == name)
        .count()
        < times
    {
        assert!(
            Instant::now() < deadline,
            "{name} was not written {times} times"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// A slow write does not hold back the writes of later builds: with a write of `slow` hanging
/// in the apiserver, the status of an object created afterwards is still written.
#[tokio::test]
async fn a_slow_write_does_not_hold_back_later_builds() {
    let (release, released) = watch::channel(false);
    let (client, written) = mock_apiserver(&["slow", "a", "b"], "slow", released);
    let state = Arc::new(Mutex::new(ClusterState::default()));
    add_routes(&state, &["slow", "a"]);
    let (built_tx, shutdown_tx, writer) = spawn_writer(client, &state);
    written_times(&written, "a", 1).await;
    // A new object, a new build, while `slow` still hangs.
    add_routes(&state, &["b"]);
    built_tx.send_replace(Some(build(&state, 2)));
    written_times(&written, "b", 1).await;
    assert!(!written.lock().unwrap().iter().any(|n| n == "slow"));
    release.send_replace(true);
    written_times(&written, "slow", 1).await;
    shutdown_tx.send_replace(true);
    writer.await.unwrap();
    // Each status written once: `slow`, in flight during the second build, was not sent again.
    let mut all = written.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, ["a", "b", "slow"]);
}

/// A plan after a build covers the objects whose verdict changed and those whose observed
/// status changed: a status edited by someone else is written again at the next build even
/// though its verdict did not change, and nothing else is written again.
#[tokio::test]
async fn a_status_edited_in_the_cluster_is_corrected_at_the_next_build() {
    let (_release, released) = watch::channel(false);
    let (client, written) = mock_apiserver(&["a", "b"], "", released);
    let state = Arc::new(Mutex::new(ClusterState::default()));
    add_routes(&state, &["a", "b"]);
    let (built_tx, shutdown_tx, writer) = spawn_writer(client, &state);
    written_times(&written, "a", 1).await;
    written_times(&written, "b", 1).await;
    // Someone edits a's status (the watch delivers it); then an unrelated change is built.
    let mut edited = ingressroute("a");
    edited["status"] = serde_json::json!({"currentStatus": "orphaned", "description": "x"});
    lock(&state).apply(prepare(Kind::IngressRouteV1beta1, edited).unwrap());
    let p = prepare(Kind::IngressRouteV1beta1, ingressroute("c")).unwrap();
    lock(&state).apply(p);
    built_tx.send_replace(Some(build(&state, 2)));
    written_times(&written, "a", 2).await;
    written_times(&written, "c", 1).await;
    // And a build with nothing new writes nothing.
    built_tx.send_replace(Some(build(&state, 3)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    shutdown_tx.send_replace(true);
    writer.await.unwrap();
    let mut all = written.lock().unwrap().clone();
    all.sort();
    assert_eq!(all, ["a", "a", "b", "c"]);
}
