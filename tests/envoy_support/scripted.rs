//! Scripted backends of the policy tests: HTTP servers on 127.0.0.1 answering with their name
//! and the status a script gives for each request's number, counting requests and holding them
//! on demand; with the Service and IngressRoute v1 fixtures that route to them.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::watch;

use super::harness::{Harness, docs, service, slice};

/// A backend on 127.0.0.1 that answers each request with its name and the status its script
/// gives for the request's number (0 for the first), counted when its headers arrive. While it
/// is held ([`Scripted::hold`]) requests wait (at most 30 s) before being answered.
pub struct Scripted {
    pub name: String,
    pub port: u16,
    hits: Arc<AtomicU64>,
    held: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Scripted {
    pub async fn start(
        name: &str,
        script: impl Fn(u64) -> u16 + Send + Sync + 'static,
    ) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let port = listener.local_addr().expect("backend addr").port();
        let hits = Arc::new(AtomicU64::new(0));
        let (held, _) = watch::channel(false);
        let script = Arc::new(script);
        let (n, c, h) = (name.to_string(), hits.clone(), held.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (n, c, h, script) = (n.clone(), c.clone(), h.clone(), script.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |_: Request<Incoming>| {
                        let (n, c, script) = (n.clone(), c.clone(), script.clone());
                        let mut release = h.subscribe();
                        async move {
                            let number = c.fetch_add(1, Ordering::SeqCst);
                            let wait = release.wait_for(|held| !*held);
                            let _ = tokio::time::timeout(Duration::from_secs(30), wait).await;
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(script(number))
                                    .header("x-backend", n.as_str())
                                    .body(Full::new(Bytes::from(n)))
                                    .expect("response"),
                            )
                        }
                    });
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Scripted {
            name: name.to_string(),
            port,
            hits,
            held,
            task,
        }
    }

    /// A backend that answers every request 200.
    pub async fn ok(name: &str) -> Scripted {
        Scripted::start(name, |_| 200).await
    }

    /// Holds requests (true) or answers them, the held ones first (false).
    pub fn hold(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// Requests received so far.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.hold(false);
        self.task.abort();
    }
}

/// Service `ns/svc` on port 80 whose endpoints are `backends` (one EndpointSlice each, all on
/// 127.0.0.1, each on its backend's port).
pub fn service_of(ns: &str, svc: &str, backends: &[&Scripted]) -> String {
    let mut parts = vec![service(ns, svc, 80, "")];
    for (i, b) in backends.iter().enumerate() {
        parts.push(slice(ns, svc, "", b.port, &i.to_string()));
    }
    docs(&parts)
}

/// A root IngressRoute `projectcontour.io/v1` of `fqdn` with these `routes` (YAML lines).
pub fn ingressroute_v1(ns: &str, name: &str, fqdn: &str, routes: &str) -> String {
    format!(
        "apiVersion: projectcontour.io/v1\nkind: IngressRoute\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n  virtualhost: {{fqdn: {fqdn}}}\n  routes:\n{routes}"
    )
}

/// A route of `/warm` to Service `warm` (always 200): the tests wait for it to answer before
/// sending the requests they count, so that no counted request meets a configuration Envoy
/// has not taken in yet (every route of a host comes in one route configuration).
pub const WARM_ROUTE: &str = "  - match: {path: /warm}\n    services: [{http: warm, port: 80}]\n";

/// Sends `n` requests one after the other; the answers in order.
pub async fn sequence(h: &Harness, host: &str, path: &str, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(h.get(host, path, &[]).await);
    }
    out
}

/// How many times each answer came.
pub fn tally(answers: &[String]) -> BTreeMap<&str, usize> {
    let mut counts = BTreeMap::new();
    for a in answers {
        *counts.entry(a.as_str()).or_default() += 1;
    }
    counts
}
