//! Bounded fuzzing on stable: thousands of mutated AdmissionReviews from a fixed seed through the
//! router (decode + validate + answer) and through `decode_value` + `validate_object` directly.
//! Complements the cargo-fuzz target in fuzz/ (nightly); runs in `make test` every time.
//!
//! Invariants: no panic (a panic inside the handler would show as HTTP 500), every answer a
//! well-formed AdmissionReview with HTTP 200, 400 or 413, the uid echoed whenever the body is a v1
//! review with one, and the same body always gets the same answer.
//!
//! `SLUICE_FUZZ_CASES` (default 4000) and `SLUICE_FUZZ_SECONDS` (default 60) bound the run;
//! `SLUICE_FUZZ_SEED` picks another sequence.

mod rng;
mod webhook_support;

use std::time::{Duration, Instant};

use axum::http::StatusCode;
use rng::Rng;
use serde_json::Value;
use sluice::manifest::{Document, decode_value};
use sluice::validate::validate_object;
use webhook_support::*;

const NASTY: &[&str] = &[
    "",
    "/",
    "//",
    "finance",
    "/a/../b",
    "%ENVIRONMENT(HOME)%",
    "; rm -rf /",
    "{}",
    "\"",
    "'",
    "a\nb",
    "a\r\nX-Injected: 1",
    "\u{0}",
    "é/ü",
    "*",
    "*.example.com",
    "EXAMPLE.COM",
    "-bad-",
    "(",
    "(?=x)",
    "a{2,1}",
    "\\",
    "${jndi:ldap://x}",
    "`id`",
    "$(id)",
    "%",
    "%zz",
    "9999999999",
    "Passthrough",
    "Terminate",
    "HTTPS",
    "TLS",
    "HTTP",
    "TCP",
    "RegularExpression",
    "Exact",
    "PathPrefix",
    "Prefix",
    "ImplementationSpecific",
    "CREATE",
    "UPDATE",
    "DELETE",
    "CONNECT",
];

fn nasty_value(rng: &mut Rng) -> Value {
    match rng.below(12) {
        0 => Value::Null,
        1 => Value::Bool(rng.below(2) == 0),
        2 => Value::from(rng.next() as i64),
        3 => Value::from(-1),
        4 => Value::from(0),
        5 => Value::from(70000),
        6 => serde_json::json!([]),
        7 => serde_json::json!({}),
        8 => Value::String("a".repeat(rng.below(3000))),
        9 => {
            let depth = rng.below(200);
            serde_json::from_str(&format!("{}{}", "[".repeat(depth), "]".repeat(depth)))
                .unwrap_or(Value::Null)
        }
        _ => Value::String(rng.pick(NASTY).to_string()),
    }
}

/// Mutates one random node of a JSON tree.
fn mutate_tree(v: &mut Value, rng: &mut Rng, depth: usize) {
    let descend = depth < 12 && rng.below(4) != 0;
    match v {
        Value::Object(map) if !map.is_empty() && descend => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let k = rng.pick(&keys).clone();
            match rng.below(10) {
                0 => {
                    map.remove(&k);
                }
                1 => {
                    map.insert(format!("{k}x"), nasty_value(rng));
                }
                _ => mutate_tree(map.get_mut(&k).unwrap(), rng, depth + 1),
            }
        }
        Value::Array(items) if !items.is_empty() && descend => {
            let i = rng.below(items.len());
            match rng.below(8) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let dup = items[i].clone();
                    items.push(dup);
                }
                _ => mutate_tree(&mut items[i], rng, depth + 1),
            }
        }
        _ => *v = nasty_value(rng),
    }
}

fn mutate_bytes(b: &mut Vec<u8>, rng: &mut Rng, other: &[u8]) {
    for _ in 0..=rng.below(4) {
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b.remove(i);
            }
            2 => {
                let i = rng.below(b.len() + 1);
                b.insert(i, *rng.pick(b"{}[]\",:\\\n\x00\xff0123456789-"));
            }
            3 => {
                let cut = rng.below(b.len() + 1);
                b.truncate(cut);
            }
            4 if !other.is_empty() => {
                // Splice a chunk of another fixture in.
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from).min(512);
                let at = rng.below(b.len() + 1);
                b.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => {}
        }
    }
}

fn fixture_names() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .filter_map(|e| {
            let p = e.unwrap().path();
            (p.extension()? == "json")
                .then(|| p.file_stem().unwrap().to_string_lossy().into_owned())
        })
        .collect();
    names.sort();
    names
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn expected_uid(body: &[u8]) -> Option<String> {
    let v: Value = serde_json::from_slice(body).ok()?;
    if v.get("apiVersion")? != "admission.k8s.io/v1"
        && v.get("apiVersion")? != "admission.k8s.io/v1beta1"
    {
        return None;
    }
    if v.get("kind")? != "AdmissionReview" {
        return None;
    }
    let uid = v.get("request")?.get("uid")?.as_str()?;
    (!uid.is_empty()).then(|| uid.to_string())
}

#[tokio::test]
async fn mutated_reviews_never_panic_and_always_get_a_well_formed_answer() {
    let cases = env_or("SLUICE_FUZZ_CASES", 4000);
    let budget = Duration::from_secs(env_or("SLUICE_FUZZ_SECONDS", 60));
    let mut rng = Rng(env_or("SLUICE_FUZZ_SEED", 0x5EED_0F5A_1CE0_0000).max(1));
    let names = fixture_names();
    assert!(names.len() > 30);
    let fixtures: Vec<Vec<u8>> = names.iter().map(|n| fixture_bytes(n)).collect();
    let trees: Vec<Value> = fixtures
        .iter()
        .map(|b| serde_json::from_slice(b).unwrap())
        .collect();
    let state = mk_state();
    let started = Instant::now();
    let mut done = 0u64;
    let mut by_status = std::collections::BTreeMap::<u16, u64>::new();
    while done < cases && started.elapsed() < budget {
        let k = rng.below(fixtures.len());
        let body = if rng.below(2) == 0 {
            let mut b = fixtures[k].clone();
            let other = rng.pick(&fixtures).clone();
            mutate_bytes(&mut b, &mut rng, &other);
            b
        } else {
            let mut t = trees[k].clone();
            for _ in 0..=rng.below(3) {
                // Mostly inside the object, so most cases reach the rules.
                let inside = rng.below(10) < 7;
                match t
                    .get_mut("request")
                    .and_then(|r| r.get_mut("object"))
                    .filter(|o| o.is_object() && inside)
                {
                    Some(object) => mutate_tree(object, &mut rng, 0),
                    None => mutate_tree(&mut t, &mut rng, 0),
                }
            }
            // The object alone through the shared rules, outside the router too.
            if let Ok(Document::Object(o)) = decode_value(t["request"]["object"].clone()) {
                let _ = validate_object(&o);
            }
            serde_json::to_vec(&t).unwrap()
        };
        let path = if rng.below(3) == 0 {
            "/mutate"
        } else {
            "/validate"
        };
        let reply = post(&state, path, body.clone()).await;
        assert!(
            matches!(
                reply.status,
                StatusCode::OK | StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE
            ),
            "case {done}: {reply}\ninput: {}",
            String::from_utf8_lossy(&body)
        );
        reply.assert_well_formed();
        if let Some(uid) = expected_uid(&body) {
            assert_eq!(
                reply.uid(),
                uid,
                "case {done}: {reply}\ninput: {}",
                String::from_utf8_lossy(&body)
            );
        }
        if done.is_multiple_of(50) {
            let again = post(&state, path, body.clone()).await;
            assert_eq!(
                again.body, reply.body,
                "case {done}: answers differ for one input"
            );
        }
        *by_status.entry(reply.status.as_u16()).or_default() += 1;
        done += 1;
    }
    eprintln!(
        "fuzzed {done} reviews in {:?}: {by_status:?}",
        started.elapsed()
    );
    assert!(
        done >= cases.min(500),
        "only {done} cases ran within {budget:?}"
    );
    // Both outcomes were exercised: readable (200) and unreadable (400) reviews.
    assert!(
        by_status.get(&200).copied().unwrap_or(0) > 0
            && by_status.get(&400).copied().unwrap_or(0) > 0
    );
}
