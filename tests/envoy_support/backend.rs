//! Small HTTP backends on 127.0.0.1 that answer every request with their own name (body and
//! `x-backend` header). `/healthz` answers 200, or 503 once the backend is told to be unhealthy;
//! the backend keeps the Host header of the last health check.
//! Each backend keeps the headers of the last request it served (with `:path` and `:version`,
//! the HTTP version it came in). A request with an
//! `x-delay-ms` header is answered that many milliseconds later (at most 10 s).

use std::convert::Infallible;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

pub struct Backend {
    pub name: String,
    pub port: u16,
    healthy: Arc<AtomicBool>,
    failing: Arc<AtomicBool>,
    hits: Arc<AtomicU64>,
    last_headers: Arc<Mutex<Vec<(String, String)>>>,
    health_host: Arc<Mutex<Option<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Backend {
    /// Starts a backend on a free loopback port.
    pub async fn start(name: &str) -> Backend {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind backend");
        let port = listener.local_addr().expect("backend addr").port();
        let healthy = Arc::new(AtomicBool::new(true));
        let failing = Arc::new(AtomicBool::new(false));
        let hits = Arc::new(AtomicU64::new(0));
        let last_headers = Arc::new(Mutex::new(Vec::new()));
        let health_host = Arc::new(Mutex::new(None));
        let (n, h, f, c) = (
            name.to_string(),
            healthy.clone(),
            failing.clone(),
            hits.clone(),
        );
        let seen = last_headers.clone();
        let probed = health_host.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (n, h, f, c) = (n.clone(), h.clone(), f.clone(), c.clone());
                let seen = seen.clone();
                let probed = probed.clone();
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let (n, h, f, c) = (n.clone(), h.clone(), f.clone(), c.clone());
                        let seen = seen.clone();
                        let probed = probed.clone();
                        async move {
                            let status = if req.uri().path() == "/healthz" {
                                let host = (req.headers().get("host"))
                                    .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
                                    .or_else(|| req.uri().authority().map(|a| a.to_string()));
                                *probed.lock().unwrap() = host;
                                if h.load(Ordering::SeqCst) { 200 } else { 503 }
                            } else {
                                let path = (":path".to_string(), req.uri().to_string());
                                let version =
                                    (":version".to_string(), format!("{:?}", req.version()));
                                *seen.lock().unwrap() = (req.headers().iter())
                                    .map(|(k, v)| {
                                        let v = String::from_utf8_lossy(v.as_bytes());
                                        (k.to_string(), v.into_owned())
                                    })
                                    .chain([path, version])
                                    .collect();
                                // Counted once its headers are there: a test that waits for a
                                // hit then reads that request's headers.
                                c.fetch_add(1, Ordering::SeqCst);
                                let delay = (req.headers().get("x-delay-ms"))
                                    .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
                                if let Some(ms) = delay {
                                    let ms = ms.min(10_000);
                                    tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
                                }
                                if f.load(Ordering::SeqCst) { 500 } else { 200 }
                            };
                            Ok::<_, Infallible>(
                                Response::builder()
                                    .status(status)
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
        Backend {
            name: name.to_string(),
            port,
            healthy,
            failing,
            hits,
            last_headers,
            health_host,
            task,
        }
    }

    /// Makes `/healthz` answer 503 (false) or 200 (true).
    pub fn set_healthy(&self, healthy: bool) {
        self.healthy.store(healthy, Ordering::SeqCst);
    }

    /// Makes every other path answer 500.
    pub fn set_failing(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The values of header `name` (lower case) in the last request served; `:path` is its
    /// path and query.
    pub fn last_header(&self, name: &str) -> Vec<String> {
        let seen = self.last_headers.lock().unwrap();
        (seen.iter().filter(|(k, _)| k == name))
            .map(|(_, v)| v.clone())
            .collect()
    }

    /// The Host (or HTTP/2 `:authority`) of the last health check, if any came.
    pub fn health_check_host(&self) -> Option<String> {
        self.health_host.lock().unwrap().clone()
    }

    /// Requests served (health checks excluded).
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::SeqCst)
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.task.abort();
    }
}
