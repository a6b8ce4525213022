//! `crds/` is the output of `sluice crds`: this test fails when they drift apart.
//! Regenerate with `make crds` (or `UPDATE_GOLDEN=1 cargo test --test crds`).

use std::path::Path;

#[test]
fn checked_in_crds_match_the_types() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("crds");
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let mut expected_files = Vec::new();
    for (file, crd) in sluice::api::crds::all() {
        let want = sluice::api::crds::render(&crd);
        let path = dir.join(file);
        expected_files.push(file.to_string());
        if update {
            std::fs::write(&path, &want).unwrap();
            continue;
        }
        let got = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            got == want,
            "{} is out of date with the Rust types; run `make crds`",
            path.display()
        );
    }
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".yaml"))
        .collect();
    present.sort();
    expected_files.sort();
    assert_eq!(
        present, expected_files,
        "crds/ holds files `sluice crds` does not produce"
    );
}

#[test]
fn crd_schemas_are_structural_enough() {
    // Every property has a type or explicitly preserves unknown fields, and every list carrying CEL
    // rules on its items is bounded (keeps the apiserver's CEL cost estimate within budget).
    fn walk(v: &serde_json::Value, path: &str, problems: &mut Vec<String>) {
        let Some(obj) = v.as_object() else { return };
        let preserve =
            obj.get("x-kubernetes-preserve-unknown-fields") == Some(&serde_json::Value::Bool(true));
        if !obj.contains_key("type") && !preserve {
            problems.push(format!("{path}: no type"));
        }
        for key in ["anyOf", "oneOf", "allOf", "not"] {
            if obj.contains_key(key) {
                problems.push(format!("{path}: uses {key}"));
            }
        }
        if let Some(props) = obj.get("properties").and_then(|p| p.as_object()) {
            for (k, child) in props {
                walk(child, &format!("{path}.{k}"), problems);
            }
        }
        if let Some(items) = obj.get("items") {
            let item_has_rules = items.get("x-kubernetes-validations").is_some();
            if item_has_rules && !obj.contains_key("maxItems") {
                problems.push(format!(
                    "{path}: list with CEL rules on its items has no maxItems"
                ));
            }
            walk(items, &format!("{path}[]"), problems);
        }
    }
    for (file, crd) in sluice::api::crds::all() {
        let crd = serde_json::to_value(&crd).unwrap();
        for version in crd["spec"]["versions"].as_array().unwrap() {
            let mut problems = Vec::new();
            walk(&version["schema"]["openAPIV3Schema"], "", &mut problems);
            assert!(problems.is_empty(), "{file}: {problems:#?}");
            assert_eq!(
                version["subresources"]["status"],
                serde_json::json!({}),
                "{file}: status subresource"
            );
        }
    }
}
