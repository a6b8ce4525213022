//! The AdmissionReview wire format: reading a request body, answering it. Every body gets a
//! well-formed AdmissionReview back (the uid echoed whenever the body has one); unreadable requests
//! get HTTP 400 with a denial, readable ones HTTP 200 with the verdict.

use axum::http::StatusCode;
use base64::Engine as _;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::core::response::{StatusCause, StatusDetails, StatusSummary};
use kube::core::{DynamicObject, Status};
use serde_json::{Map, Value, json};

use super::State;
use super::admit::{Context, Decision, Endpoint, Request, decide};
use super::metrics::{RequestLabels, kind_label};
use sluice_core::api::Kind;
use sluice_core::api::status::reason;

pub const API_VERSION_V1: &str = "admission.k8s.io/v1";
pub const API_VERSION_V1BETA1: &str = "admission.k8s.io/v1beta1";
const REVIEW_KIND: &str = "AdmissionReview";

/// Most errors listed in one denial; the rest are counted.
const MAX_LISTED_ERRORS: usize = 50;
/// Longest text of one listed error, in bytes.
const MAX_ERROR_TEXT: usize = 1024;
/// Most warnings returned, and the longest one (the API server truncates longer ones anyway).
const MAX_WARNINGS: usize = 32;
const MAX_WARNING_TEXT: usize = 256;

/// An encoded answer plus what to count it as.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub body: Vec<u8>,
    pub labels: RequestLabels,
    /// A denial that rests on an object the index may not have seen yet (an IngressClass created
    /// just before the Ingress naming it): worth asking again once the index moves on.
    pub recheck: bool,
}

fn labels(
    endpoint: Endpoint,
    kind: Option<Kind>,
    operation: &'static str,
    verdict: &'static str,
) -> RequestLabels {
    RequestLabels {
        endpoint: endpoint.as_str(),
        kind: kind_label(kind),
        operation,
        verdict,
    }
}

/// Answers one request body.
pub fn answer(endpoint: Endpoint, body: &[u8], state: &State) -> Answer {
    match read(body) {
        Err(Unreadable { uid, message }) => Answer {
            status: StatusCode::BAD_REQUEST,
            body: encode_bad_request(&uid, API_VERSION_V1, &message),
            labels: RequestLabels {
                endpoint: endpoint.as_str(),
                kind: "unknown",
                operation: "unknown",
                verdict: "bad_request",
            },
            recheck: false,
        },
        Ok(Read::V1beta1 { uid }) => v1beta1_denial(endpoint, &uid),
        Ok(Read::V1(review)) => judge(endpoint, *review, state),
    }
}

/// A body that is not a well-formed AdmissionReview: its uid (empty when it has none that can
/// be echoed) and what is wrong.
struct Unreadable {
    uid: String,
    message: String,
}

impl Unreadable {
    fn new(uid: &str, message: impl Into<String>) -> Self {
        Unreadable {
            uid: uid.to_string(),
            message: message.into(),
        }
    }
}

/// A well-formed AdmissionReview.
enum Read {
    /// A `v1beta1` one, which sluice does not serve.
    V1beta1 { uid: String },
    /// A `v1` one: the request, with its objects apart.
    V1(Box<Review>),
}

/// The request of a `v1` AdmissionReview.
struct Review {
    req: AdmissionRequest<DynamicObject>,
    object: Option<Value>,
    old_object: Option<Value>,
}

/// Reads a request body as an AdmissionReview.
fn read(body: &[u8]) -> Result<Read, Unreadable> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        Unreadable::new(
            "",
            format!("request body is not a JSON AdmissionReview: {e}"),
        )
    })?;
    let Value::Object(mut review) = value else {
        return Err(Unreadable::new(
            "",
            "request body is not a JSON object (an AdmissionReview)",
        ));
    };
    let (api_version, uid) = envelope(&review)?;
    if api_version == API_VERSION_V1BETA1 {
        return Ok(Read::V1beta1 { uid });
    }
    let Some(Value::Object(mut request)) = review.remove("request") else {
        return Err(Unreadable::new("", "AdmissionReview has no request"));
    };
    if uid.is_empty() {
        return Err(Unreadable::new("", "AdmissionReview request has no uid"));
    }
    let object = request.remove("object");
    let old_object = request.remove("oldObject");
    let req = serde_json::from_value(Value::Object(request))
        .map_err(|e| Unreadable::new(&uid, format!("AdmissionReview request is malformed: {e}")))?;
    Ok(Read::V1(Box::new(Review {
        req,
        object,
        old_object,
    })))
}

/// An AdmissionReview's apiVersion (v1 or v1beta1) and its request's uid (empty if none).
fn envelope(review: &Map<String, Value>) -> Result<(&'static str, String), Unreadable> {
    let api_version = review
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let kind = review.get("kind").and_then(Value::as_str).unwrap_or("");
    let uid = review
        .get("request")
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    let api_version = match api_version {
        API_VERSION_V1 if kind == REVIEW_KIND => API_VERSION_V1,
        API_VERSION_V1BETA1 if kind == REVIEW_KIND => API_VERSION_V1BETA1,
        _ => {
            return Err(Unreadable::new(
                &uid,
                format!(
                    "expected kind AdmissionReview with apiVersion {API_VERSION_V1}, got kind {} apiVersion {}",
                    sluice_core::validate::quote(kind),
                    sluice_core::validate::quote(api_version)
                ),
            ));
        }
    };
    Ok((api_version, uid))
}

/// The answer to a `v1beta1` AdmissionReview: a denial in the request's own version, so the API
/// server shows the reason to the user.
fn v1beta1_denial(endpoint: Endpoint, uid: &str) -> Answer {
    let d = Decision {
        code: 400,
        errors: vec![sluice_core::validate::FieldError::spec(
            "",
            format!(
                "sluice serves {API_VERSION_V1} AdmissionReviews only; register its webhooks with admissionReviewVersions: [\"v1\"]"
            ),
        )],
        ..Decision::default()
    };
    Answer {
        status: StatusCode::OK,
        body: encode_decision(uid, API_VERSION_V1BETA1, &d),
        labels: labels(endpoint, None, "unknown", "denied"),
        recheck: false,
    }
}

/// The verdict on a `v1` request, from the index as it is now.
fn judge(endpoint: Endpoint, review: Review, state: &State) -> Answer {
    let Review {
        req,
        object,
        old_object,
    } = review;
    let request_kind = Kind::from_type(
        &gvk_api_version(&req.kind.group, &req.kind.version),
        &req.kind.kind,
    );
    let index = state.index.load();
    let cx = Context {
        settings: &state.settings,
        options: state.index.options(),
        index: &index,
    };
    let d = decide(
        endpoint,
        Request {
            operation: &req.operation,
            kind: request_kind,
            name: &req.name,
            namespace: req.namespace.as_deref(),
            object,
            old_object,
        },
        &cx,
    );
    let verdict = match (d.allowed(), d.patch.is_some()) {
        (false, _) => "denied",
        (true, true) => "patched",
        (true, false) => "allowed",
    };
    let recheck = (d.errors.iter()).any(|e| e.reason == reason::INGRESS_CLASS_NOT_FOUND);
    Answer {
        status: StatusCode::OK,
        body: encode_decision(&req.uid, API_VERSION_V1, &d),
        labels: labels(endpoint, d.kind, operation_name(&req.operation), verdict),
        recheck,
    }
}

/// An operation as the metrics label it.
fn operation_name(operation: &kube::core::admission::Operation) -> &'static str {
    match operation {
        kube::core::admission::Operation::Create => "CREATE",
        kube::core::admission::Operation::Update => "UPDATE",
        kube::core::admission::Operation::Delete => "DELETE",
        kube::core::admission::Operation::Connect => "CONNECT",
    }
}

fn gvk_api_version(group: &str, version: &str) -> String {
    if group.is_empty() {
        version.to_string()
    } else {
        format!("{group}/{version}")
    }
}

/// Cuts a text to at most `max` bytes on a character boundary.
fn bounded(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// A warning as the API server wants it: one printable line, bounded.
fn clean_warning(w: &str) -> String {
    let printable: String = w
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    bounded(&printable, MAX_WARNING_TEXT)
}

/// The denial text: the subject, then every error (`path: message`), joined by "; ".
pub fn denial_message(d: &Decision) -> String {
    let mut parts: Vec<String> = d
        .errors
        .iter()
        .take(MAX_LISTED_ERRORS)
        .map(|e| bounded(&e.to_string(), MAX_ERROR_TEXT))
        .collect();
    if d.errors.len() > MAX_LISTED_ERRORS {
        parts.push(format!(
            "and {} more problems",
            d.errors.len() - MAX_LISTED_ERRORS
        ));
    }
    if d.subject.is_empty() {
        parts.join("; ")
    } else {
        format!("{} is invalid: {}", d.subject, parts.join("; "))
    }
}

fn response_for(uid: &str) -> AdmissionResponse {
    let mut r = AdmissionResponse::invalid("");
    r.uid = uid.to_string();
    r.allowed = true;
    r.result = Status::default();
    r
}

fn encode_review(version: &str, response: AdmissionResponse) -> Vec<u8> {
    let mut response = match serde_json::to_value(&response) {
        Ok(v) => v,
        Err(_) => json!({"uid": response.uid, "allowed": false}),
    };
    // The wire format of `patch` is base64 (a Go []byte), not a JSON array of numbers.
    if let Some(Value::Array(bytes)) = response.get("patch") {
        let raw: Vec<u8> = bytes
            .iter()
            .filter_map(Value::as_u64)
            .filter_map(|b| u8::try_from(b).ok())
            .collect();
        if let Some(obj) = response.as_object_mut() {
            obj.insert(
                "patch".into(),
                Value::String(base64::engine::general_purpose::STANDARD.encode(raw)),
            );
        }
    }
    let mut review = Map::new();
    review.insert("apiVersion".into(), Value::String(version.to_string()));
    review.insert("kind".into(), Value::String(REVIEW_KIND.to_string()));
    review.insert("response".into(), response);
    serde_json::to_vec(&Value::Object(review)).unwrap_or_default()
}

fn encode_bad_request(uid: &str, version: &str, message: &str) -> Vec<u8> {
    encode_refusal(uid, version, 400, message)
}

fn encode_refusal(uid: &str, version: &str, code: u16, message: &str) -> Vec<u8> {
    let mut r = response_for(uid);
    r.allowed = false;
    let reason = match code {
        400 => "BadRequest",
        413 => "RequestEntityTooLarge",
        500..=599 => "InternalError",
        _ => "BadRequest",
    };
    r.result = Status {
        status: Some(StatusSummary::Failure),
        code,
        message: bounded(message, MAX_ERROR_TEXT),
        reason: reason.into(),
        ..Status::default()
    };
    encode_review(version, r)
}

/// An AdmissionReview refusing a request that could not be reviewed at all (too large, internal
/// error); the uid is unknown.
pub fn encode_failure(code: u16, message: &str) -> Vec<u8> {
    encode_refusal("", API_VERSION_V1, code, message)
}

/// Encodes a decision as an AdmissionReview answer.
pub fn encode_decision(uid: &str, version: &str, d: &Decision) -> Vec<u8> {
    let mut r = response_for(uid);
    if !d.allowed() {
        r.allowed = false;
        let causes = d
            .errors
            .iter()
            .take(MAX_LISTED_ERRORS)
            .map(|e| StatusCause {
                reason: if e.reason.is_empty() {
                    "FieldValueInvalid".into()
                } else {
                    e.reason.to_string()
                },
                message: bounded(&e.message, MAX_ERROR_TEXT),
                field: e.path.clone(),
            })
            .collect();
        r.result = Status {
            status: Some(StatusSummary::Failure),
            code: d.code,
            message: denial_message(d),
            reason: if d.code == 422 {
                "Invalid".into()
            } else {
                "BadRequest".into()
            },
            details: Some(StatusDetails {
                kind: d.kind.map(|k| k.kind().to_string()).unwrap_or_default(),
                group: d.kind.map(|k| k.group().to_string()).unwrap_or_default(),
                name: d.name.clone(),
                uid: String::new(),
                causes,
                retry_after_seconds: 0,
            }),
            ..Status::default()
        };
    }
    if !d.warnings.is_empty() {
        r.warnings = Some(
            d.warnings
                .iter()
                .take(MAX_WARNINGS)
                .map(|w| clean_warning(w))
                .collect(),
        );
    }
    if d.allowed()
        && let Some(patch) = d.patch.as_ref().filter(|p| !p.0.is_empty())
    {
        // Serializing a patch of strings cannot fail; if it ever did, answering without the
        // defaults is safer than failing the request.
        if let Ok(with) = r.clone().with_patch(patch.clone()) {
            r = with;
        }
    }
    encode_review(version, r)
}
