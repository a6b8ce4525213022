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

/// Whether `s` matches the label set `pairs`.
fn matches(s: &LabelSelector, pairs: &[(&str, &str)]) -> bool {
    let labels: BTreeMap<&str, &str> = pairs.iter().copied().collect();
    s.matches(|k| labels.get(k).copied())
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
    assert!(matches(&s, &[("team", "shop"), ("env", "prod")]));
    assert!(matches(
        &s,
        &[("team", "shop"), ("env", "staging"), ("x", "y")]
    ));
    assert!(!matches(&s, &[("team", "shop")]), "env missing");
    assert!(!matches(&s, &[("team", "shop"), ("env", "dev")]));
    assert!(!matches(&s, &[("team", "web"), ("env", "prod")]));
    let legacy = [("team", "shop"), ("env", "prod"), ("legacy", "")];
    assert!(!matches(&s, &legacy), "a label set to \"\" exists");
}

#[test]
fn not_in_holds_for_an_absent_label_and_exists_for_any_value() {
    let not_in = parse("matchExpressions: [{key: env, operator: NotIn, values: [prod]}]").unwrap();
    assert!(matches(&not_in, &[]));
    assert!(matches(&not_in, &[("env", "dev")]));
    assert!(!matches(&not_in, &[("env", "prod")]));
    let exists = parse("matchExpressions: [{key: env, operator: Exists}]").unwrap();
    assert!(matches(&exists, &[("env", "")]));
    assert!(!matches(&exists, &[("other", "x")]));
}

#[test]
fn an_empty_selector_selects_every_namespace() {
    let s = parse("{}").unwrap();
    assert!(matches(&s, &[]));
    assert!(matches(&s, &[("a", "b")]));
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
