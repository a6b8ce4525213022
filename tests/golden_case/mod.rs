//! The golden routing cases under tests/golden/dag: an input file holds Kubernetes objects and at
//! most one document `kind: GoldenCase` with build options and requests to resolve. Shared by the
//! model's golden test (tests/golden.rs) and the real-Envoy differential test
//! (tests/envoy_golden.rs).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use sluice::dag;

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GoldenCase {
    #[serde(default)]
    pub options: GoldenOptions,
    #[serde(default)]
    pub requests: Vec<GoldenRequest>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GoldenOptions {
    #[serde(default)]
    pub root_namespaces: Vec<String>,
    pub ingress_class_name: Option<String>,
}

#[derive(Deserialize, Serialize, Clone)]
pub struct GoldenRequest {
    pub host: String,
    pub path: String,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
}

impl GoldenCase {
    /// Splits an input file into its case (default when it has none) and the other documents.
    pub fn split(text: &str) -> (GoldenCase, String) {
        let mut case = GoldenCase::default();
        let mut kept = Vec::new();
        for doc in text.split("\n---") {
            let v: serde_json::Value =
                serde_norway::from_str(doc).unwrap_or(serde_json::Value::Null);
            if v.get("kind").and_then(|k| k.as_str()) == Some("GoldenCase") {
                case = serde_json::from_value(v).expect("GoldenCase document");
            } else {
                kept.push(doc);
            }
        }
        (case, kept.join("\n---"))
    }

    /// The build options the case asks for.
    pub fn dag_options(&self) -> dag::Options {
        dag::Options {
            root_namespaces: self.options.root_namespaces.clone(),
            ingress_class_name: self
                .options
                .ingress_class_name
                .clone()
                .unwrap_or_else(|| dag::DEFAULT_INGRESS_CLASS.to_string()),
            ..dag::Options::default()
        }
    }
}
