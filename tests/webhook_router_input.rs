//! The webhook through `router().oneshot(...)` with the JSON fixtures in tests/fixtures/admission:
//! injection-shaped values and every kind of bad input.

mod webhook_support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use sluice::webhook::{MAX_BODY_BYTES, State};
use webhook_support::*;

// ---- injection-shaped values ----

#[tokio::test]
async fn injection_shaped_values_are_denied_or_carried_as_literal_data() {
    let state = mk_state();
    let reply = post_fixture(&state, "/validate", "httproute_injection_shaped").await;
    reply.assert_denied(422);
    let msg = reply.message();
    assert!(msg.contains("spec.rules[0].matches[1].headers[0].value: regular expression of 100000 bytes is longer than the 1024 bytes allowed"), "{reply}");
    assert!(msg.contains(r#"spec.rules[0].filters[0].requestHeaderModifier.set[2].value: "ok\r\nInjected: yes" must not contain control characters such as newlines"#), "{reply}");
    // `;`, `{}`, quotes, `$(...)`, backticks and `%ENVIRONMENT(...)%` are data: no rule objects to them.
    assert!(
        !msg.contains("set[0]") && !msg.contains("set[1]") && !msg.contains("matches[0]"),
        "{reply}"
    );
    // The answer never carries raw user input: no raw newline, no 100k-character value.
    assert!(!msg.contains('\n') && !msg.contains('\r'), "{reply}");
    assert!(
        reply.body.len() < 16 * 1024,
        "answer of {} bytes",
        reply.body.len()
    );
}

#[tokio::test]
async fn injection_shaped_ingressroute_values_are_denied_with_bounded_answers() {
    let state = mk_state();
    let ir = post_fixture(&state, "/validate", "ir_v1_injection_shaped").await;
    ir.assert_denied(422);
    assert!(!ir.message().contains('\n'), "{ir}");
    assert!(
        ir.body.len() < 16 * 1024,
        "answer of {} bytes",
        ir.body.len()
    );
    for e in field_errors_of(&fixture("ir_v1_injection_shaped")) {
        assert!(ir.message().contains(&e), "{e:?} missing from {ir}");
    }
}

// ---- bad input ----

async fn assert_bad_request(state: &State, body: Vec<u8>, uid: &str, what: &str) -> Reply {
    let reply = post(state, "/validate", body).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{what}: {reply}");
    reply.assert_well_formed();
    assert!(!reply.allowed(), "{what}: {reply}");
    assert_eq!(reply.uid(), uid, "{what}: {reply}");
    assert_eq!(reply.code(), 400, "{what}: {reply}");
    reply
}

#[tokio::test]
async fn malformed_json_gets_a_400_admission_review() {
    let state = mk_state();
    let reply = assert_bad_request(
        &state,
        b"{\"apiVersion\": admission".to_vec(),
        "",
        "malformed",
    )
    .await;
    assert!(
        reply
            .message()
            .starts_with("request body is not a JSON AdmissionReview: "),
        "{reply}"
    );
    for body in [
        &b""[..],
        b"[]",
        b"\"AdmissionReview\"",
        b"null",
        b"{}",
        b"{\"kind\":\"AdmissionReview\",\"apiVersion\":\"v1\"}",
    ] {
        assert_bad_request(&state, body.to_vec(), "", &String::from_utf8_lossy(body)).await;
    }
    let wrong = br#"{"kind":"AdmissionReview","apiVersion":"v1","request":{"uid":"u-7"}}"#;
    let reply = assert_bad_request(&state, wrong.to_vec(), "u-7", "wrong apiVersion").await;
    assert_eq!(
        reply.message(),
        r#"expected kind AdmissionReview with apiVersion admission.k8s.io/v1, got kind "AdmissionReview" apiVersion "v1""#
    );
}

#[tokio::test]
async fn truncated_bodies_get_a_400_at_every_cut() {
    let state = mk_state();
    let full = fixture_bytes("ir_v1beta1_valid");
    let trimmed = String::from_utf8(full.clone()).unwrap().trim_end().len();
    for cut in (0..trimmed).step_by(37) {
        assert_bad_request(&state, full[..cut].to_vec(), "", &format!("cut at {cut}")).await;
    }
}

#[tokio::test]
async fn non_utf8_bodies_get_a_400() {
    let state = mk_state();
    let mut body = fixture_bytes("ir_v1beta1_valid");
    let at = body.windows(4).position(|w| w == b"shop").unwrap();
    body[at] = 0xff;
    body[at + 1] = 0xfe;
    let reply = assert_bad_request(&state, body, "", "non-UTF-8").await;
    assert!(
        reply.message().contains("invalid unicode") || reply.message().contains("UTF-8"),
        "{reply}"
    );
}

#[tokio::test]
async fn reviews_without_request_or_uid_get_a_400() {
    let state = mk_state();
    let r = assert_bad_request(
        &state,
        fixture_bytes("review_without_request"),
        "",
        "no request",
    )
    .await;
    assert_eq!(r.message(), "AdmissionReview has no request");
    let r = assert_bad_request(&state, fixture_bytes("review_without_uid"), "", "no uid").await;
    assert_eq!(r.message(), "AdmissionReview request has no uid");
    let uid = uid_of("review_unknown_operation");
    let r = assert_bad_request(
        &state,
        fixture_bytes("review_unknown_operation"),
        &uid,
        "PATCH",
    )
    .await;
    assert!(
        r.message()
            .starts_with("AdmissionReview request is malformed: unknown variant `PATCH`"),
        "{r}"
    );
}

#[tokio::test]
async fn create_without_an_object_is_denied_with_the_uid() {
    let reply = post_fixture(&mk_state(), "/validate", "create_without_object").await;
    reply.assert_denied(400);
    assert_eq!(reply.uid(), uid_of("create_without_object"));
    assert!(
        reply
            .message()
            .ends_with("request.object: is required; CREATE and UPDATE requests carry the object"),
        "{reply}"
    );
}

#[tokio::test]
async fn v1beta1_reviews_are_refused_in_their_own_version() {
    let reply = post_fixture(&mk_state(), "/validate", "review_v1beta1").await;
    reply.assert_well_formed();
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(reply.review["apiVersion"], "admission.k8s.io/v1beta1");
    assert_eq!(reply.uid(), uid_of("review_v1beta1"));
    assert!(!reply.allowed());
    assert_eq!(
        reply.message(),
        r#"sluice serves admission.k8s.io/v1 AdmissionReviews only; register its webhooks with admissionReviewVersions: ["v1"]"#
    );
}

/// An IngressRoute of about `bytes` bytes: many routes.
fn mk_large_review(bytes: usize) -> Vec<u8> {
    let mut review = fixture("ir_v1beta1_valid");
    let route =
        json!({"match": "/r/0000000", "services": [{"name": "web", "port": 80, "weight": 1}]});
    let per_route = serde_json::to_vec(&route).unwrap().len() + 1;
    let routes: Vec<Value> = (0..bytes / per_route)
        .map(|i| json!({"match": format!("/r/{i:07}"), "services": [{"name": "web", "port": 80, "weight": 1}]}))
        .collect();
    review["request"]["object"]["spec"]["routes"] = Value::Array(routes);
    serde_json::to_vec(&review).unwrap()
}

#[tokio::test]
async fn objects_of_three_megabytes_are_reviewed() {
    let state = mk_state();
    let body = mk_large_review(3 * 1024 * 1024);
    assert!(body.len() > 3 * 1000 * 1000 && body.len() < MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    reply.assert_well_formed();
    reply.assert_allowed();
    assert_eq!(reply.uid(), uid_of("ir_v1beta1_valid"));
}

#[tokio::test]
async fn updates_of_three_megabyte_objects_are_reviewed() {
    let state = mk_state();
    let mut review: Value = serde_json::from_slice(&mk_large_review(3 * 1024 * 1024)).unwrap();
    review["request"]["operation"] = json!("UPDATE");
    review["request"]["oldObject"] = review["request"]["object"].clone();
    let body = serde_json::to_vec(&review).unwrap();
    assert!(body.len() > 6 * 1000 * 1000 && body.len() < MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    reply.assert_allowed();
    assert_eq!(reply.uid(), uid_of("ir_v1beta1_valid"));
}

#[tokio::test]
async fn bodies_over_the_limit_get_a_413() {
    let state = mk_state();
    let body = mk_large_review(MAX_BODY_BYTES + 1024);
    assert!(body.len() > MAX_BODY_BYTES);
    let reply = post(&state, "/validate", body).await;
    assert_eq!(reply.status, StatusCode::PAYLOAD_TOO_LARGE, "{reply}");
    reply.assert_well_formed();
    assert!(!reply.allowed());
    assert_eq!(reply.code(), 413);
}

#[tokio::test]
async fn deep_nesting_gets_a_400_not_a_stack_overflow() {
    let state = mk_state();
    let review = String::from_utf8(fixture_bytes("ir_v1beta1_valid")).unwrap();
    let deep = format!("{}1{}", "[".repeat(200_000), "]".repeat(200_000));
    let body = review.replacen(
        "\"strategy\": \"WeightedLeastRequest\"",
        &format!("\"strategy\": {deep}"),
        1,
    );
    assert!(body.len() > 400_000);
    let reply = assert_bad_request(&state, body.into_bytes(), "", "deep nesting").await;
    assert!(
        reply.message().contains("recursion limit exceeded"),
        "{reply}"
    );
    // Nesting the parser accepts but the schema does not: a denial naming the field.
    let shallow = format!("{}1{}", "[".repeat(100), "]".repeat(100));
    let body = review.replacen(
        "\"strategy\": \"WeightedLeastRequest\"",
        &format!("\"strategy\": {shallow}"),
        1,
    );
    let reply = post(&state, "/validate", body.into_bytes()).await;
    reply.assert_denied(422);
    assert!(
        reply
            .message()
            .contains("spec.strategy: invalid type: sequence"),
        "{reply}"
    );
}
