//! Defaults for Ingress (POST /mutate): `pathType` on every path that has none and, on CREATE,
//! `spec.ingressClassName` when neither the field nor the class annotation names a class.
//!
//! The patch works on the raw JSON the API server sent, so it only touches what it adds. It is
//! idempotent (the patched object yields no patch), absent when nothing changes, never empty.

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, Patch, PatchOperation};
use serde_json::{Map, Value};

use super::index::Index;
use super::{AdmissionSettings, INGRESS_CLASS_ANNOTATION};

/// Builds a JSON pointer from unescaped tokens (`~` and `/` in a token are escaped as RFC 6901 says).
pub fn pointer<'a>(tokens: impl IntoIterator<Item = &'a str>) -> PointerBuf {
    PointerBuf::from_tokens(tokens)
}

fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

fn unset(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s.is_empty(),
        Some(_) => false,
    }
}

/// The class sluice gives a new Ingress without one: the single IngressClass marked default, else
/// `--default-ingress-class` when no class is marked default. With several defaults nothing is
/// chosen (validation then refuses the Ingress, as seed 001 asks).
pub fn default_class<'a>(index: &'a Index, settings: &'a AdmissionSettings) -> Option<&'a str> {
    match index.default_ingress_classes() {
        [one] => Some(one.as_str()),
        [] => settings.default_ingress_class.as_deref(),
        _ => None,
    }
}

/// The defaults patch for an Ingress, or None when the object needs none.
pub fn ingress_patch(
    object: &Value,
    creating: bool,
    settings: &AdmissionSettings,
    index: &Index,
) -> Option<Patch> {
    let mut ops = Vec::new();
    let spec = object.get("spec");
    if let Some(rules) = spec.and_then(|s| s.get("rules")).and_then(Value::as_array) {
        for (i, rule) in rules.iter().enumerate() {
            let paths = rule
                .get("http")
                .and_then(|h| h.get("paths"))
                .and_then(Value::as_array);
            for (j, p) in paths.into_iter().flatten().enumerate() {
                if p.is_object() && unset(p.get("pathType")) {
                    let (i, j) = (i.to_string(), j.to_string());
                    ops.push(add(
                        pointer(["spec", "rules", &i, "http", "paths", &j, "pathType"]),
                        Value::String(settings.default_path_type.as_str().to_string()),
                    ));
                }
            }
        }
    }
    if creating {
        let annotated = object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(INGRESS_CLASS_ANNOTATION))
            .and_then(Value::as_str)
            .is_some_and(|c| !c.is_empty());
        let unclassed = unset(spec.and_then(|s| s.get("ingressClassName")));
        if !annotated
            && unclassed
            && let Some(class) = default_class(index, settings)
        {
            let class = Value::String(class.to_string());
            match spec {
                Some(Value::Object(_)) => {
                    ops.push(add(pointer(["spec", "ingressClassName"]), class));
                }
                None | Some(Value::Null) => {
                    let mut m = Map::new();
                    m.insert("ingressClassName".into(), class);
                    ops.push(add(pointer(["spec"]), Value::Object(m)));
                }
                // A spec that is not a mapping is for validation to refuse, not to patch.
                Some(_) => {}
            }
        }
    }
    (!ops.is_empty()).then_some(Patch(ops))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PathType;
    use serde_json::json;
    use sluice_core::dag::Options;
    use sluice_core::store::Snapshot;

    fn mk_settings(default_class: Option<&str>) -> AdmissionSettings {
        AdmissionSettings {
            default_path_type: PathType::ImplementationSpecific,
            default_ingress_class: default_class.map(str::to_string),
            ..AdmissionSettings::default()
        }
    }

    fn mk_index_with_defaults(names: &[&str]) -> Index {
        let mut s = Snapshot::default();
        for n in names {
            let v = json!({"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
                "metadata": {"name": n, "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
                "spec": {"controller": "example.com/c"}});
            match sluice_core::manifest::decode_value(v).unwrap() {
                sluice_core::manifest::Document::Object(o) => s.insert(o),
                d => panic!("{d:?}"),
            }
        }
        Index::build(&s, &Options::default())
    }

    fn mk_ingress() -> Value {
        json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"rules": [
            {"host": "a.example.com", "http": {"paths": [
                {"path": "/", "backend": {"service": {"name": "s", "port": {"number": 80}}}},
                {"path": "/x", "pathType": "Exact", "backend": {"service": {"name": "s", "port": {"number": 80}}}}
            ]}},
            {"host": "b.example.com"},
            {"http": {"paths": [{"path": "/y", "pathType": "", "backend": {"service": {"name": "s", "port": {"number": 80}}}}]}}
        ]}})
    }

    #[test]
    fn defaults_path_types_and_class_in_one_idempotent_patch() {
        let settings = mk_settings(Some("sluice"));
        let index = Index::default();
        let mut obj = mk_ingress();
        let patch = ingress_patch(&obj, true, &settings, &index).unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([
                {"op": "add", "path": "/spec/rules/0/http/paths/0/pathType", "value": "ImplementationSpecific"},
                {"op": "add", "path": "/spec/rules/2/http/paths/0/pathType", "value": "ImplementationSpecific"},
                {"op": "add", "path": "/spec/ingressClassName", "value": "sluice"}
            ])
        );
        json_patch::patch(&mut obj, &patch).unwrap();
        assert_eq!(obj["spec"]["rules"][1], json!({"host": "b.example.com"}));
        assert_eq!(
            obj["spec"]["rules"][0]["http"]["paths"][1]["pathType"],
            "Exact"
        );
        assert_eq!(ingress_patch(&obj, true, &settings, &index), None);
    }

    #[test]
    fn the_single_default_ingress_class_beats_the_flag() {
        let settings = mk_settings(Some("flag-class"));
        let obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web"}, "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
        let one = mk_index_with_defaults(&["cluster-default"]);
        let patch = ingress_patch(&obj, true, &settings, &one).unwrap();
        assert_eq!(
            serde_json::to_value(&patch).unwrap(),
            json!([{"op": "add", "path": "/spec/ingressClassName", "value": "cluster-default"}])
        );
        // Two defaults: nothing is chosen, not even the flag.
        let two = mk_index_with_defaults(&["a", "b"]);
        assert_eq!(ingress_patch(&obj, true, &settings, &two), None);
        // No default and no flag: nothing to do.
        assert_eq!(
            ingress_patch(&obj, true, &mk_settings(None), &Index::default()),
            None
        );
    }

    #[test]
    fn class_is_never_defaulted_on_update_or_with_the_annotation() {
        let settings = mk_settings(Some("sluice"));
        let index = Index::default();
        let bare = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web"}, "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
        assert_eq!(ingress_patch(&bare, false, &settings, &index), None);
        let annotated = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": {"name": "web", "annotations": {"kubernetes.io/ingress.class": "other"}},
            "spec": {"defaultBackend": {"service": {"name": "s", "port": {"number": 80}}}}});
        assert_eq!(ingress_patch(&annotated, true, &settings, &index), None);
    }

    #[test]
    fn a_missing_spec_gets_one_and_an_odd_spec_is_left_alone() {
        let settings = mk_settings(Some("sluice"));
        let mut obj = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "w"}});
        let patch = ingress_patch(&obj, true, &settings, &Index::default()).unwrap();
        json_patch::patch(&mut obj, &patch).unwrap();
        assert_eq!(obj["spec"], json!({"ingressClassName": "sluice"}));
        let odd = json!({"apiVersion": "networking.k8s.io/v1", "kind": "Ingress", "metadata": {"name": "w"}, "spec": "x"});
        assert_eq!(
            ingress_patch(&odd, true, &settings, &Index::default()),
            None
        );
    }

    #[test]
    fn pointers_escape_tokens() {
        assert_eq!(
            pointer(["metadata", "annotations", "a/b~c"]).to_string(),
            "/metadata/annotations/a~1b~0c"
        );
    }

    #[test]
    fn path_type_flag_is_used() {
        let settings = AdmissionSettings {
            default_path_type: PathType::Prefix,
            ..mk_settings(None)
        };
        let patch = ingress_patch(&mk_ingress(), false, &settings, &Index::default()).unwrap();
        let v = serde_json::to_value(&patch).unwrap();
        assert_eq!(v.as_array().unwrap().len(), 2);
        assert_eq!(v[0]["value"], "Prefix");
    }
}
