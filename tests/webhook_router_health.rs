//! The webhook through `router().oneshot(...)`: health, readiness and the admission metrics.

mod webhook_support;

use axum::http::StatusCode;
use sluice::dag::Options;
use sluice::webhook::metrics::{RequestLabels, kind_label};
use sluice::webhook::{IndexHandle, Metrics, State};
use webhook_support::*;

// ---- health, readiness, metrics ----

async fn get(state: &State, path: &str) -> (StatusCode, String) {
    use tower::ServiceExt as _;
    let req = axum::http::Request::get(path)
        .body(axum::body::Body::empty())
        .unwrap();
    let resp = sluice::webhook::router(state.clone())
        .oneshot(req)
        .await
        .unwrap();
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap();
    (status, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn healthz_always_and_readyz_once_the_index_is_loaded() {
    let state = State::new(
        mk_settings(),
        IndexHandle::new(Options::default()),
        Metrics::new(),
    );
    assert_eq!(get(&state, "/healthz").await.0, StatusCode::OK);
    assert_eq!(
        get(&state, "/readyz").await.0,
        StatusCode::SERVICE_UNAVAILABLE
    );
    state.index.replace(&mk_snapshot("index.yaml"));
    assert_eq!(get(&state, "/readyz").await.0, StatusCode::OK);
}

#[tokio::test]
async fn requests_are_counted_by_kind_operation_and_verdict() {
    let mut registry = prometheus_client::registry::Registry::default();
    let metrics = Metrics::registered(&mut registry);
    let state = State::new(
        mk_settings(),
        IndexHandle::from_snapshot(&mk_snapshot("index.yaml"), Options::default()),
        metrics.clone(),
    );
    post_fixture(&state, "/validate", "gateway_conflicting_listeners").await;
    post_fixture(&state, "/validate", "gateway_conflicting_listeners").await;
    post_fixture(&state, "/mutate", "ingress_mutate_defaults").await;
    post(&state, "/validate", b"{".to_vec()).await;
    let denied = RequestLabels {
        endpoint: "validate",
        kind: kind_label(Some(sluice::api::Kind::Gateway)),
        operation: "CREATE",
        verdict: "denied",
    };
    assert_eq!(metrics.count(&denied), 2);
    let patched = RequestLabels {
        endpoint: "mutate",
        kind: kind_label(Some(sluice::api::Kind::Ingress)),
        operation: "CREATE",
        verdict: "patched",
    };
    assert_eq!(metrics.count(&patched), 1);
    let text = sluice::webhook::metrics::encode_text(&registry);
    assert!(text.contains(r#"sluice_webhook_admission_requests_total{endpoint="validate",kind="unknown",operation="unknown",verdict="bad_request"} 1"#), "{text}");
    assert!(
        text.contains(r#"sluice_webhook_admission_duration_seconds_count{endpoint="validate"} 3"#),
        "{text}"
    );
}
