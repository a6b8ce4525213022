use std::collections::BTreeMap;

use super::{LabelSelector, Selector};

fn selector(yaml: &str) -> Selector {
    serde_norway::from_str(yaml).expect("selector YAML")
}

fn parse(yaml: &str) -> Result<LabelSelector, String> {
    LabelSelector::parse(
        "spec.listeners[0].allowedRoutes.namespaces.selector",
        &selector(yaml),
    )
    .map_err(|e| e.to_string())
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    (pairs.iter())
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn match_labels_and_expressions_must_all_hold() {
    let s = parse(
        r#"
matchLabels: {team: shop}
matchExpressions:
- {key: env, operator: In, values: [prod, staging]}
- {key: legacy, operator: DoesNotExist}
"#,
    )
    .unwrap();
    assert!(s.matches(&labels(&[("team", "shop"), ("env", "prod")])));
    assert!(s.matches(&labels(&[("team", "shop"), ("env", "staging"), ("x", "y")])));
    assert!(!s.matches(&labels(&[("team", "shop")])), "env missing");
    assert!(!s.matches(&labels(&[("team", "shop"), ("env", "dev")])));
    assert!(!s.matches(&labels(&[("team", "web"), ("env", "prod")])));
    let legacy = labels(&[("team", "shop"), ("env", "prod"), ("legacy", "")]);
    assert!(!s.matches(&legacy), "a label set to \"\" exists");
}

#[test]
fn not_in_holds_for_an_absent_label_and_exists_for_any_value() {
    let not_in = parse("matchExpressions: [{key: env, operator: NotIn, values: [prod]}]").unwrap();
    assert!(not_in.matches(&labels(&[])));
    assert!(not_in.matches(&labels(&[("env", "dev")])));
    assert!(!not_in.matches(&labels(&[("env", "prod")])));
    let exists = parse("matchExpressions: [{key: env, operator: Exists}]").unwrap();
    assert!(exists.matches(&labels(&[("env", "")])));
    assert!(!exists.matches(&labels(&[("other", "x")])));
}

#[test]
fn an_empty_selector_selects_every_namespace() {
    let s = parse("{}").unwrap();
    assert!(s.matches(&labels(&[])));
    assert!(s.matches(&labels(&[("a", "b")])));
}

#[test]
fn a_broken_selector_names_the_field_the_value_and_the_fix() {
    let cases = [
        (
            "matchExpressions: [{key: env, operator: Equals, values: [a]}]",
            r#"spec.listeners[0].allowedRoutes.namespaces.selector.matchExpressions[0].operator: "Equals" is not an operator; use In, NotIn, Exists or DoesNotExist"#,
        ),
        (
            "matchExpressions: [{key: env, operator: In}]",
            "selector.matchExpressions[0].values: is required; operator In needs at least one value",
        ),
        (
            "matchExpressions: [{key: env, operator: Exists, values: [a]}]",
            "selector.matchExpressions[0].values: must be empty for operator Exists",
        ),
        (
            "matchLabels: {\"team one\": x}",
            r#"selector.matchLabels: "team one" is not a label name"#,
        ),
        (
            "matchLabels: {team: \"a/b\"}",
            r#"selector.matchLabels["team"]: "a/b" is not a label name"#,
        ),
        (
            "matchExpressions: [{key: \"Example.com/team\", operator: Exists}]",
            r#"selector.matchExpressions[0].key: "Example.com" must be a valid DNS subdomain name"#,
        ),
        (
            "matchExpressions: [{key: \"example.com/\", operator: Exists}]",
            r#"selector.matchExpressions[0].key: "example.com/" is not a label key"#,
        ),
        (
            "matchExpressions: [{key: env, operator: NotIn, values: [\"-x\"]}]",
            r#"selector.matchExpressions[0].values[0]: "-x" is not a label name"#,
        ),
    ];
    for (yaml, want) in cases {
        let got = parse(yaml).expect_err(yaml);
        assert!(got.contains(want), "{yaml}\n got: {got}\nwant: {want}");
    }
    // Prefixed keys and values with every allowed character are fine.
    parse(
        "matchLabels: {kubernetes.io/metadata.name: team-a, example.com/Tier: A_b.c-1, empty: \"\"}",
    )
    .unwrap();
}
