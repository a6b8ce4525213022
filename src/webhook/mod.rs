//! The admission webhook: immediate, exact and harmless answers at `kubectl apply` time.
//!
//! - `POST /validate`: the single-object rules `dag::build` and `sluice validate` use
//!   ([`crate::validate::validate_object`]) plus order-independent cross-object rules read from an
//!   in-memory [`Index`] (a root claiming a host another root owns, a root outside
//!   `--root-namespaces`, Ingress class rules of seed 001). Deprecated usage gets warnings.
//! - `POST /mutate`: Ingress defaults (`pathType`, `ingressClassName`) as a JSON patch.
//! - `GET /healthz`, `GET /readyz` (ready once the index has been loaded).
//!
//! The request path never performs I/O: no API calls, no files, no exec; it decodes, checks and
//! answers. See docs/webhook.md for the decisions (ratcheting on update, v1beta1, scope).

pub mod admit;
pub mod index;
pub mod metrics;
pub mod mutate;
pub mod review;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State as AxumState};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

pub use admit::Endpoint;
pub use index::{Index, IndexHandle};
pub use metrics::Metrics;
pub use tls::{ReloadingCert, TlsError};

pub use crate::validate::ingress::{CLASS_ANNOTATION as INGRESS_CLASS_ANNOTATION, PathType};
/// Largest request body accepted: objects can reach ~3 MB (the API server's request limit) and an
/// UPDATE review carries the old object too; anything larger is answered 413 without being read
/// further.
pub const MAX_BODY_BYTES: usize = 8 * 1024 * 1024;
/// Bodies larger than this are decoded on the blocking pool so they do not stall other requests.
const OFFLOAD_BYTES: usize = 256 * 1024;
/// How long a denial the index may be behind on ([`review::Answer::recheck`]) waits for the index
/// to catch up, and how often it looks: longer than the rebuild loop's debounce window.
const RECHECK_FOR: Duration = Duration::from_millis(1500);
const RECHECK_EVERY: Duration = Duration::from_millis(50);

/// The Gateway API controllerName sluice's GatewayClasses carry (`--gateway-controller-name`), in
/// the form of the IngressClass controller `sluice.dev/ingress-controller`.
pub use crate::dag::DEFAULT_GATEWAY_CONTROLLER_NAME;

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
}

impl State {
    pub fn new(settings: AdmissionSettings, index: IndexHandle, metrics: Metrics) -> State {
        State {
            settings: Arc::new(settings),
            index,
            metrics,
        }
    }
}

/// The webhook's routes (no TLS; see [`serve`]).
pub fn router(state: State) -> Router {
    Router::new()
        .route("/validate", post(validate))
        .route("/mutate", post(mutate))
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(readyz))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn readyz(AxumState(state): AxumState<State>) -> Response {
    if state.index.is_ready() {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "index not loaded yet").into_response()
    }
}

async fn validate(
    AxumState(state): AxumState<State>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(Endpoint::Validate, state, body).await
}

async fn mutate(
    AxumState(state): AxumState<State>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    handle(Endpoint::Mutate, state, body).await
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

async fn handle(endpoint: Endpoint, state: State, body: Result<Bytes, BytesRejection>) -> Response {
    let started = Instant::now();
    let failure = |status: StatusCode, message: String| {
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
        (labels, status, message)
    };
    let outcome = match body {
        // Too large (413) or unreadable: answered without reading further.
        Err(rejection) => Err(failure(rejection.status(), rejection.body_text())),
        Ok(body) => {
            let large = body.len() > OFFLOAD_BYTES;
            let st = state.clone();
            // No rule may panic on user data; should one ever do, the request still gets an answer.
            let run = move || {
                std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    review::answer(endpoint, &body, &st)
                }))
            };
            let mut result = if large {
                tokio::task::spawn_blocking(run.clone()).await.ok()
            } else {
                Some(run())
            };
            // A denial the index may be behind on (it follows the cluster through a debounced
            // watch): asked again as the index moves, for a bounded time.
            let deadline = Instant::now() + RECHECK_FOR;
            while matches!(&result, Some(Ok(a)) if a.recheck) && Instant::now() < deadline {
                let seen = state.index.load();
                tokio::time::sleep(RECHECK_EVERY).await;
                if !Arc::ptr_eq(&seen, &state.index.load()) {
                    result = Some(run());
                }
            }
            match result {
                Some(Ok(answer)) => Ok(answer),
                _ => Err(failure(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal error while reviewing the request".into(),
                )),
            }
        }
    };
    match outcome {
        Ok(answer) => {
            state.metrics.observe(answer.labels, started.elapsed());
            json_response(answer.status, answer.body)
        }
        Err((labels, status, message)) => {
            state.metrics.observe(labels, started.elapsed());
            json_response(status, review::encode_failure(status.as_u16(), &message))
        }
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
}

impl WebhookConfig {
    /// The webhook configuration `sluice serve` flags select; None without `--webhook-address`.
    pub fn from_serve_args(
        args: &crate::cli::serve::ServeArgs,
        metrics: Metrics,
    ) -> Option<WebhookConfig> {
        let address = args.webhook_address?;
        Some(WebhookConfig {
            address,
            cert_path: args.webhook_cert.clone().unwrap_or_default(),
            key_path: args.webhook_key.clone().unwrap_or_default(),
            settings: AdmissionSettings {
                // clap restricts the flag to the three values; the fallback is the seed 001 default.
                default_path_type: PathType::parse(&args.default_path_type)
                    .unwrap_or(PathType::ImplementationSpecific),
                default_ingress_class: args.default_ingress_class.clone(),
                gateway_controller_name: Some(args.gateway_controller_name.clone()),
            },
            metrics,
            reload_interval: Duration::from_secs(1),
        })
    }
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

/// Serves on an already bound listener with an already loaded certificate (tests bind port 0).
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
    server::serve_tls(listener, tls, router(state), shutdown).await;
    let _ = stop_tx.send(true);
    let _ = watcher.await;
    Ok(())
}

/// Starts the webhook: what `sluice serve` calls when `--webhook-address` is given.
///
/// The certificate and key are loaded and the address bound before this returns, so an unusable
/// certificate or a taken address stops `sluice serve` at start with the reason. `index` is the
/// handle the snapshot owner keeps calling [`IndexHandle::replace`] on; the returned task ends
/// when `shutdown` resolves (after open connections finish).
pub async fn start(
    config: WebhookConfig,
    index: IndexHandle,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<tokio::task::JoinHandle<Result<(), WebhookError>>, WebhookError> {
    let cert = ReloadingCert::load(&config.cert_path, &config.key_path)?;
    // Checked now as well: a key that does not match the certificate fails here, not per request.
    cert.server_config()?;
    let listener = tokio::net::TcpListener::bind(config.address)
        .await
        .map_err(|source| WebhookError::Bind {
            address: config.address,
            source,
        })?;
    let state = State::new(config.settings, index, config.metrics);
    Ok(tokio::spawn(serve_on(
        listener,
        cert,
        config.reload_interval,
        state,
        shutdown,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(extra: &[&str]) -> AdmissionSettings {
        use clap::Parser;
        let args = [
            "sluice",
            "serve",
            "--webhook-address",
            "127.0.0.1:8443",
            "--webhook-cert",
            "tls.crt",
            "--webhook-key",
            "tls.key",
        ];
        let cli = crate::cli::Cli::try_parse_from(args.iter().chain(extra)).unwrap();
        let crate::cli::Command::Serve(serve) = cli.command else {
            panic!("not serve");
        };
        WebhookConfig::from_serve_args(&serve, Metrics::new())
            .expect("a webhook address")
            .settings
    }

    #[test]
    fn serve_scopes_gateway_api_admission_to_its_controller_name() {
        assert_eq!(
            settings(&[]).gateway_controller_name.as_deref(),
            Some("sluice.dev/gateway-controller")
        );
        let flag = ["--gateway-controller-name", "example.com/gw"];
        assert_eq!(
            settings(&flag).gateway_controller_name.as_deref(),
            Some("example.com/gw")
        );
    }
}
