//! Fuzz target: any bytes as an AdmissionReview body through the webhook's answer function
//! (decode, the shared single-object rules, the cross-object rules, mutation, encoding), and any
//! JSON document through `decode_value` + `validate_object`. A panic, a hang or a crash is a bug.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use sluice::dag::Options;
use sluice::manifest::{Document, decode_value, parse_documents};
use sluice::store::Snapshot;
use sluice::validate::validate_object;
use sluice::webhook::{AdmissionSettings, Endpoint, IndexHandle, Metrics, State, review};

fn state() -> &'static State {
    static STATE: OnceLock<State> = OnceLock::new();
    STATE.get_or_init(|| {
        let text = include_str!("../../tests/fixtures/admission/index.yaml");
        let objects = parse_documents("index.yaml", text)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|(_, d)| match d {
                Document::Object(o) => Some(o),
                _ => None,
            });
        let options = Options {
            root_namespaces: vec!["shop".into(), "blog".into(), "app".into()],
            ..Options::default()
        };
        let index = IndexHandle::from_snapshot(&Snapshot::from_objects(objects), options);
        let settings = AdmissionSettings {
            default_ingress_class: Some("sluice".into()),
            gateway_controller_name: Some("sluice.example/gateway".into()),
            ..AdmissionSettings::default()
        };
        State::new(settings, index, Metrics::new())
    })
}

fuzz_target!(|data: &[u8]| {
    let state = state();
    for endpoint in [Endpoint::Validate, Endpoint::Mutate] {
        let answer = review::answer(endpoint, data, state);
        // Every answer is a JSON AdmissionReview.
        let v: serde_json::Value = serde_json::from_slice(&answer.body).expect("answer is JSON");
        assert_eq!(v["kind"], "AdmissionReview");
        assert!(v["response"]["allowed"].is_boolean());
    }
    if let Ok(value) = serde_json::from_slice::<serde_json::Value>(data) {
        let object = value.get("request").and_then(|r| r.get("object")).cloned().unwrap_or(value);
        if let Ok(Document::Object(o)) = decode_value(object) {
            let _ = validate_object(&o);
        }
    }
});
