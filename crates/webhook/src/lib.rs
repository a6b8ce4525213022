#![forbid(unsafe_code)]
//! The admission webhook: immediate, exact and harmless answers at `kubectl apply` time.
//!
//! - `POST /validate`: the single-object rules `dag::build` and `sluice validate` use
//!   ([`sluice_core::validate::validate_object`]) plus order-independent cross-object rules read from an
//!   in-memory [`Index`] (a root claiming a host another root owns, a root outside
//!   `--root-namespaces`, Ingress class rules of seed 001). Deprecated usage gets warnings.
//! - `POST /mutate`: Ingress defaults (`pathType`, `ingressClassName`) as a JSON patch.
//! - `GET /healthz`, `GET /readyz` (ready once the index has been loaded), on the webhook port and
//!   on the plain-HTTP health port (`--webhook-health-address`, [`health_router`]).
//!
//! The request path never performs I/O: no API calls, no files, no exec; it decodes, checks and
//! answers, within the limits of [`limits`]. See docs/webhook.md for the decisions (ratcheting on
//! update, v1beta1, scope, limits).

pub mod admit;
pub mod index;
pub mod limits;
pub mod metrics;
pub mod mutate;
pub mod review;
pub mod server;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{Request, State as AxumState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use tokio::sync::Semaphore;
use tokio::time::Instant;

pub use admit::Endpoint;
pub use index::{Index, IndexHandle};
pub use limits::{Limits, MAX_BODY_BYTES, Peer};
pub use metrics::{Limit, Metrics};
pub use sluice_tls::{ReloadingCert, TlsError};

use limits::{BodyError, Budget, Buffered};
pub use sluice_core::validate::ingress::{CLASS_ANNOTATION as INGRESS_CLASS_ANNOTATION, PathType};

/// Bodies larger than this are decoded on the blocking pool so they do not stall other requests.
const OFFLOAD_BYTES: usize = 256 * 1024;
/// How long a denial the index may be behind on ([`review::Answer::recheck`]) waits for the index
/// to catch up, and how often it looks: longer than the rebuild loop's debounce window. The wait
/// ends earlier when the request deadline comes closer than [`RECHECK_MARGIN`].
const RECHECK_FOR: Duration = Duration::from_millis(1500);
const RECHECK_EVERY: Duration = Duration::from_millis(50);
/// The recheck loop answers at least this long before the request deadline, so that the answer
/// it has reaches the API server before the API server gives up.
const RECHECK_MARGIN: Duration = Duration::from_millis(500);

/// The Gateway API controllerName sluice's GatewayClasses carry (`--gateway-controller-name`), in
/// the form of the IngressClass controller `sluice.dev/ingress-controller`.
pub use sluice_core::dag::DEFAULT_GATEWAY_CONTROLLER_NAME;

/// How admission behaves (from `sluice serve` flags). Root namespaces and the ingress class come
/// from the [`IndexHandle`]'s `dag::Options`, so the webhook and the DAG cannot disagree on them.
#[derive(Clone, Debug)]
pub struct AdmissionSettings {
    /// `--default-path-type`.
    pub default_path_type: PathType,
    /// `--default-ingress-class`: used when no IngressClass is marked default.
    pub default_ingress_class: Option<String>,
    /// The Gateway API controllerName sluice implements (`sluice serve` sets
    /// `--gateway-controller-name`). When set, Gateway API objects the index shows to belong to
    /// another controller are not refused by sluice's rules; None checks every one.
    pub gateway_controller_name: Option<String>,
}

impl Default for AdmissionSettings {
    fn default() -> Self {
        AdmissionSettings {
            default_path_type: PathType::ImplementationSpecific,
            default_ingress_class: None,
            gateway_controller_name: None,
        }
    }
}

/// What every request handler shares.
#[derive(Clone, Debug)]
pub struct State {
    pub settings: Arc<AdmissionSettings>,
    pub index: IndexHandle,
    pub metrics: Metrics,
    limits: Arc<Limits>,
    budget: Arc<Budget>,
    reviews: Arc<Semaphore>,
}

impl State {
    /// A state with the default [`Limits`].
    pub fn new(settings: AdmissionSettings, index: IndexHandle, metrics: Metrics) -> State {
        State::with_limits(settings, index, metrics, Limits::default())
    }

    pub fn with_limits(
        settings: AdmissionSettings,
        index: IndexHandle,
        metrics: Metrics,
        limits: Limits,
    ) -> State {
        State {
            settings: Arc::new(settings),
            index,
            budget: Budget::new(&limits, metrics.buffered_bytes.clone()),
            reviews: Arc::new(Semaphore::new(limits.max_concurrent_reviews.max(1))),
            limits: Arc::new(limits),
            metrics,
        }
    }

    /// The limits requests are served within.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The most bytes of request bodies held in memory at once so far.
    pub fn peak_buffered_bytes(&self) -> u64 {
        self.budget.peak()
    }
}

/// The webhook's routes (no TLS; see [`serve`]).
pub fn router(state: State) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The health port's routes: `/healthz` and `/readyz` only.
pub fn health_router(state: State) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(AxumState(state): AxumState<State>) -> Response {
    if state.index.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "index not loaded yet").into_response()
    }
}

async fn validate(AxumState(state): AxumState<State>, req: Request) -> Response {
    handle(Endpoint::Validate, state, req).await
}

async fn mutate(AxumState(state): AxumState<State>, req: Request) -> Response {
    handle(Endpoint::Mutate, state, req).await
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// Why a request got no review: the status, the message, and the limit it hit (if one).
type Failure = (StatusCode, String, Option<Limit>);

/// Reads, reviews and answers one AdmissionReview, all before the request deadline
/// ([`Limits::request_timeout`] from now): a body that does not arrive in time gets 408, a body or
/// review that finds no room in time 503, a body over the size limit 413; each an AdmissionReview.
async fn handle(endpoint: Endpoint, state: State, req: Request) -> Response {
    let started = Instant::now();
    let deadline = started + state.limits.request_timeout;
    let outcome = review_within(endpoint, &state, req, deadline).await;
    let elapsed = started.elapsed();
    match outcome {
        Ok(answer) => {
            state.metrics.observe(answer.labels, elapsed);
            json_response(answer.status, answer.body)
        }
        Err((status, message, limit)) => {
            let labels = metrics::RequestLabels {
                endpoint: endpoint.as_str(),
                kind: "unknown",
                operation: "unknown",
                verdict: if status.is_server_error() {
                    "error"
                } else {
                    "bad_request"
                },
            };
            if let Some(limit) = limit {
                state.metrics.hit(limit);
            }
            state.metrics.observe(labels, elapsed);
            let mut resp = json_response(status, review::encode_failure(status.as_u16(), &message));
            if status == StatusCode::SERVICE_UNAVAILABLE {
                resp.headers_mut()
                    .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
            }
            resp
        }
    }
}

async fn review_within(
    endpoint: Endpoint,
    state: &State,
    req: Request,
    deadline: Instant,
) -> Result<review::Answer, Failure> {
    let limits = &state.limits;
    let peer = req.extensions().get::<Peer>().map(|p| p.0.ip());
    let secs = limits.request_timeout.as_secs_f64();
    let body = limits::read_body(
        req.into_body(),
        limits.max_body_bytes,
        &state.budget,
        peer,
        deadline,
    )
    .await
    .map_err(|e| match e {
        BodyError::TooLarge => (
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "request body is larger than the {} bytes allowed",
                limits.max_body_bytes
            ),
            Some(Limit::BodySize),
        ),
        BodyError::Timeout => (
            StatusCode::REQUEST_TIMEOUT,
            format!("request body not received within {secs}s"),
            Some(Limit::BodyTimeout),
        ),
        BodyError::Busy => (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("webhook busy: no room to buffer the request body within {secs}s"),
            Some(Limit::BufferedBytes),
        ),
        BodyError::Read(e) => (
            StatusCode::BAD_REQUEST,
            format!("failed to read the request body: {e}"),
            None,
        ),
    })?;
    let body = Arc::new(body);
    let mut answer = review_once(endpoint, state, &body, deadline).await?;
    // A denial the index may be behind on (it follows the cluster through a debounced watch):
    // asked again as the index moves, for a bounded time within the deadline.
    let until = (Instant::now() + RECHECK_FOR).min(deadline - RECHECK_MARGIN);
    while answer.recheck && Instant::now() < until {
        let seen = state.index.load();
        tokio::time::sleep_until((Instant::now() + RECHECK_EVERY).min(until)).await;
        if !Arc::ptr_eq(&seen, &state.index.load()) {
            answer = review_once(endpoint, state, &body, deadline).await?;
        }
    }
    Ok(answer)
}

/// One review of a buffered body, in a review slot, before `deadline`.
async fn review_once(
    endpoint: Endpoint,
    state: &State,
    body: &Arc<Buffered>,
    deadline: Instant,
) -> Result<review::Answer, Failure> {
    let secs = state.limits.request_timeout.as_secs_f64();
    let Ok(Ok(slot)) =
        tokio::time::timeout_at(deadline, Arc::clone(&state.reviews).acquire_owned()).await
    else {
        return Err((
            StatusCode::SERVICE_UNAVAILABLE,
            format!("webhook busy: no review slot free within {secs}s"),
            Some(Limit::Reviews),
        ));
    };
    let large = body.bytes.len() > OFFLOAD_BYTES;
    let st = state.clone();
    let body = Arc::clone(body);
    // The slot and the body go with the work: a review on the blocking pool that outlives the
    // deadline still holds both until it ends.
    let run = move || {
        let _slot = slot;
        // No rule may panic on user data; should one ever do, the request still gets an answer.
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            review::answer(endpoint, &body.bytes, &st)
        }))
    };
    let result = if large {
        match tokio::time::timeout_at(deadline, tokio::task::spawn_blocking(run)).await {
            Err(_) => {
                return Err((
                    StatusCode::SERVICE_UNAVAILABLE,
                    format!("the review did not finish within {secs}s"),
                    Some(Limit::ReviewTimeout),
                ));
            }
            Ok(joined) => joined.ok(),
        }
    } else {
        Some(run())
    };
    match result {
        Some(Ok(answer)) => Ok(answer),
        _ => Err((
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal error while reviewing the request".into(),
            None,
        )),
    }
}

/// Errors starting the webhook.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    #[error("webhook certificate: {0}")]
    Tls(#[from] TlsError),
    #[error("cannot listen on {address}: {source}")]
    Bind {
        address: SocketAddr,
        source: std::io::Error,
    },
}

/// Everything `sluice serve --webhook-address ... --webhook-cert ... --webhook-key ...` configures.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    pub address: SocketAddr,
    pub cert_path: PathBuf,
    pub key_path: PathBuf,
    pub settings: AdmissionSettings,
    /// Shared with the app's /metrics registry (see [`Metrics::register`]).
    pub metrics: Metrics,
    /// How often the certificate files are checked for changes.
    pub reload_interval: Duration,
    /// What one request and one client may take (`--webhook-request-timeout`, …).
    pub limits: Limits,
    /// Where `/healthz` and `/readyz` are also served, over plain HTTP
    /// (`--webhook-health-address`); None: on the webhook port only.
    pub health_address: Option<SocketAddr>,
}

/// Serves the webhook over HTTPS on `address` until `shutdown` resolves. The certificate and key
/// are read now (an unusable pair is an error) and re-read when the files change.
pub async fn serve(
    address: SocketAddr,
    cert_path: &std::path::Path,
    key_path: &std::path::Path,
    state: State,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let cert = ReloadingCert::load(cert_path, key_path)?;
    let listener = tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| WebhookError::Bind { address, source })?;
    serve_on(listener, cert, Duration::from_secs(1), state, shutdown).await
}

/// Serves on an already bound listener with an already loaded certificate (tests bind port 0),
/// within the state's [`Limits`].
pub async fn serve_on(
    listener: tokio::net::TcpListener,
    cert: Arc<ReloadingCert>,
    reload_interval: Duration,
    state: State,
    shutdown: impl Future<Output = ()>,
) -> Result<(), WebhookError> {
    let tls = cert.server_config()?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut watch_stop = stop_rx.clone();
    let watcher = tokio::spawn(
        Arc::clone(&cert).watch(reload_interval, "webhook", async move {
            let _ = watch_stop.wait_for(|s| *s).await;
        }),
    );
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "admission webhook listening (HTTPS)");
    }
    let config = server::Listener::webhook(&state.limits);
    let metrics = state.metrics.clone();
    server::serve_tls(listener, tls, router(state), config, metrics, shutdown).await;
    let _ = stop_tx.send(true);
    let _ = watcher.await;
    Ok(())
}

/// Serves `/healthz` and `/readyz` over plain HTTP on an already bound listener until `shutdown`
/// resolves: the kubelet's probes, on a port of their own so that they never wait behind
/// clients of the webhook port.
pub async fn serve_health_on(
    listener: tokio::net::TcpListener,
    state: State,
    shutdown: impl Future<Output = ()>,
) {
    if let Ok(addr) = listener.local_addr() {
        tracing::info!(%addr, "webhook health endpoints listening (HTTP)");
    }
    server::serve_plain(
        listener,
        health_router(state),
        server::Listener::health(),
        // The health port's connections are not the webhook's: counted nowhere.
        Metrics::new(),
        shutdown,
    )
    .await
}

async fn bind(address: SocketAddr) -> Result<tokio::net::TcpListener, WebhookError> {
    tokio::net::TcpListener::bind(address)
        .await
        .map_err(|source| WebhookError::Bind { address, source })
}

/// Starts the webhook: what `sluice serve` calls when `--webhook-address` is given.
///
/// The certificate and key are loaded and the addresses (webhook, and health with
/// `--webhook-health-address`) bound before this returns, so an unusable certificate or a taken
/// address stops `sluice serve` at start with the reason. `index` is the handle the snapshot
/// owner keeps calling [`IndexHandle::replace`] on; the returned task ends when `shutdown`
/// resolves (after open connections finish).
pub async fn start(
    config: WebhookConfig,
    index: IndexHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<(), WebhookError>>, WebhookError> {
    let cert = ReloadingCert::load(&config.cert_path, &config.key_path)?;
    // Checked now as well: a key that does not match the certificate fails here, not per request.
    cert.server_config()?;
    let listener = bind(config.address).await?;
    let health = match config.health_address {
        Some(address) => Some(bind(address).await?),
        None => None,
    };
    let state = State::with_limits(config.settings, index, config.metrics, config.limits);
    let reload_interval = config.reload_interval;
    Ok(tokio::spawn(async move {
        let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
        let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
            let _ = rx.wait_for(|s| *s).await;
        };
        let health = health
            .map(|l| tokio::spawn(serve_health_on(l, state.clone(), stopped(stop_rx.clone()))));
        let served = serve_on(listener, cert, reload_interval, state, shutdown).await;
        // The health port answers until the webhook's connections have drained.
        let _ = stop_tx.send(true);
        if let Some(h) = health {
            let _ = h.await;
        }
        served
    }))
}
