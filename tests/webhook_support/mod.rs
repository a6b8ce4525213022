//! Shared helpers of the webhook tests: the fixture index, requests through the router, and a
//! reader for AdmissionReview answers.
#![allow(dead_code)]

use std::path::PathBuf;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use base64::Engine as _;
use serde_json::Value;
use sluice::dag::Options;
use sluice::manifest::{Document, decode_value, parse_documents};
use sluice::store::Snapshot;
use sluice::validate::validate_object;
use sluice::webhook::{AdmissionSettings, IndexHandle, Metrics, PathType, State, router};
use tower::ServiceExt as _;

pub const GATEWAY_CONTROLLER: &str = "sluice.example/gateway";

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/admission")
}

pub fn fixture_bytes(name: &str) -> Vec<u8> {
    let path = fixture_dir().join(format!("{name}.json"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

pub fn fixture(name: &str) -> Value {
    serde_json::from_slice(&fixture_bytes(name)).unwrap()
}

pub fn mk_snapshot(file: &str) -> Snapshot {
    let path = fixture_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    let objects = parse_documents(file, &text)
        .unwrap()
        .into_iter()
        .map(|(_, d)| match d {
            Document::Object(o) => o,
            d => panic!("{file}: {d:?}"),
        });
    Snapshot::from_objects(objects)
}

pub fn mk_settings() -> AdmissionSettings {
    AdmissionSettings {
        default_path_type: PathType::ImplementationSpecific,
        default_ingress_class: Some("flag-class".into()),
        gateway_controller_name: Some(GATEWAY_CONTROLLER.into()),
    }
}

/// A state over an index built from a fixture snapshot.
pub fn mk_state_with(index_file: &str, options: Options) -> State {
    let index = IndexHandle::from_snapshot(&mk_snapshot(index_file), options);
    State::new(mk_settings(), index, Metrics::new())
}

pub fn mk_state() -> State {
    mk_state_with("index.yaml", Options::default())
}

/// An answer from the webhook.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub content_type: Option<String>,
    pub body: Vec<u8>,
    pub review: Value,
}

impl Reply {
    pub fn response(&self) -> &Value {
        &self.review["response"]
    }
    pub fn uid(&self) -> &str {
        self.response()["uid"]
            .as_str()
            .unwrap_or_else(|| panic!("no uid: {self}"))
    }
    pub fn allowed(&self) -> bool {
        self.response()["allowed"]
            .as_bool()
            .unwrap_or_else(|| panic!("no allowed: {self}"))
    }
    pub fn message(&self) -> &str {
        self.response()["status"]["message"].as_str().unwrap_or("")
    }
    pub fn code(&self) -> u64 {
        self.response()["status"]["code"].as_u64().unwrap_or(0)
    }
    pub fn warnings(&self) -> Vec<String> {
        self.response()["warnings"]
            .as_array()
            .map(|w| w.iter().map(|s| s.as_str().unwrap().to_string()).collect())
            .unwrap_or_default()
    }
    pub fn patch(&self) -> Option<json_patch::Patch> {
        let b64 = self
            .response()
            .get("patch")?
            .as_str()
            .unwrap_or_else(|| panic!("patch is not base64 text: {self}"));
        assert_eq!(self.response()["patchType"], "JSONPatch", "{self}");
        let raw = base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap();
        Some(serde_json::from_slice(&raw).unwrap())
    }
    pub fn assert_allowed(&self) {
        assert_eq!(self.status, StatusCode::OK, "{self}");
        assert!(self.allowed(), "expected allowed: {self}");
    }
    pub fn assert_denied(&self, code: u64) {
        assert_eq!(self.status, StatusCode::OK, "{self}");
        assert!(!self.allowed(), "expected denied: {self}");
        assert_eq!(self.code(), code, "{self}");
        assert!(!self.message().is_empty(), "{self}");
    }
    /// A well-formed AdmissionReview answer in every case.
    pub fn assert_well_formed(&self) {
        assert_eq!(
            self.content_type.as_deref(),
            Some("application/json"),
            "{self}"
        );
        assert_eq!(self.review["kind"], "AdmissionReview", "{self}");
        assert!(
            self.review["apiVersion"]
                .as_str()
                .unwrap()
                .starts_with("admission.k8s.io/"),
            "{self}"
        );
        assert!(self.response()["uid"].is_string(), "{self}");
        assert!(self.response()["allowed"].is_boolean(), "{self}");
    }
}

impl std::fmt::Display for Reply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "HTTP {} {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        )
    }
}

/// POSTs a body to the router (no network).
pub async fn post(state: &State, path: &str, body: Vec<u8>) -> Reply {
    let req = Request::post(path)
        .header("content-type", "application/json")
        .body(Body::from(body))
        .unwrap();
    let resp = router(state.clone()).oneshot(req).await.unwrap();
    let status = resp.status();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string());
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX)
        .await
        .unwrap()
        .to_vec();
    let review = serde_json::from_slice(&body).unwrap_or(Value::Null);
    Reply {
        status,
        content_type,
        body,
        review,
    }
}

pub async fn post_fixture(state: &State, path: &str, name: &str) -> Reply {
    post(state, path, fixture_bytes(name)).await
}

/// What `validate_object` (the rules `dag::build` and `sluice validate` share) says about the
/// object of a fixture, as `path: message` lines.
pub fn field_errors_of(review: &Value) -> Vec<String> {
    match decode_value(review["request"]["object"].clone()).unwrap() {
        Document::Object(o) => validate_object(&o)
            .errors
            .iter()
            .map(ToString::to_string)
            .collect(),
        Document::Rejected { error, .. } => vec![error.to_string()],
        Document::Skipped { .. } => Vec::new(),
    }
}

/// The uid of a fixture's AdmissionReview.
pub fn uid_of(name: &str) -> String {
    fixture(name)["request"]["uid"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Denied with code 422, the uid echoed, and every FieldError `validate_object` produces for the
/// same object listed in the message.
pub async fn assert_denied_with_shared_errors(state: &State, name: &str) -> Reply {
    let reply = post_fixture(state, "/validate", name).await;
    reply.assert_well_formed();
    reply.assert_denied(422);
    assert_eq!(reply.uid(), uid_of(name));
    let expected = field_errors_of(&fixture(name));
    assert!(
        !expected.is_empty(),
        "{name}: validate_object finds nothing wrong"
    );
    for e in &expected {
        assert!(
            reply.message().contains(e.as_str()),
            "{name}: {e:?} missing from {reply}"
        );
    }
    reply
}

/// A new AdmissionReview for an object (uid and everything else from a fixture).
pub fn mk_review_of(template: &str, object: Value) -> Vec<u8> {
    let mut review = fixture(template);
    review["request"]["object"] = object;
    serde_json::to_vec(&review).unwrap()
}
