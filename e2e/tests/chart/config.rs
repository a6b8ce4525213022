//! The release's RBAC, webhook configurations and NetworkPolicy, checked against config/ and
//! the chart's values.

use super::*;

/// The YAML documents of a file of config/.
pub fn config_docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo_root().join("config").join(file)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|de| serde::Deserialize::deserialize(de).unwrap())
        .collect()
}

pub fn config_doc(file: &str, kind: &str) -> Value {
    config_docs(file)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("config/{file} has no {kind}"))
}

/// The installed RBAC grants what config/rbac.yaml grants.
pub fn check_rbac(env: &Env, rel: &Rel, ns: &str) {
    let want = config_doc("rbac.yaml", "ClusterRole");
    let got = json(env, &["get", "clusterrole", rel.fullname]);
    assert_eq!(got["rules"], want["rules"], "ClusterRole rules");
    let want = config_doc("rbac.yaml", "Role");
    let got = json(
        env,
        &[
            "get",
            "role",
            "-n",
            ns,
            &format!("{}-leader-election", rel.fullname),
        ],
    );
    assert_eq!(got["rules"], want["rules"], "Role rules");
    let binding = json(env, &["get", "clusterrolebinding", rel.fullname]);
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": rel.fullname, "namespace": ns}])
    );
}

/// The installed webhook configurations are config/webhooks.yaml's: every field that file sets,
/// with the release's class in the class condition, its Service, its namespace skipped, and the
/// timeouts of the values. Returns the caBundle (the same in every webhook).
pub fn check_webhooks(env: &Env, rel: &Rel, ns: &str, timeout: u64) -> String {
    let mut bundles = Vec::new();
    for want_config in config_docs("webhooks.yaml") {
        let kind = want_config["kind"].as_str().unwrap();
        let got_config = json(env, &["get", &kind.to_lowercase(), rel.fullname]);
        let got_hooks = got_config["webhooks"].as_array().unwrap();
        let want_hooks = want_config["webhooks"].as_array().unwrap();
        assert_eq!(got_hooks.len(), want_hooks.len(), "{kind}: webhooks");
        for want in want_hooks {
            let name = want["name"].as_str().unwrap();
            let got = got_hooks
                .iter()
                .find(|h| h["name"] == name)
                .unwrap_or_else(|| panic!("{kind}: no webhook {name}"));
            for (field, want_value) in want.as_object().unwrap() {
                let mut want_value = want_value.clone();
                match field.as_str() {
                    "clientConfig" => {
                        let service = &got[field]["service"];
                        assert_eq!(service["namespace"], ns, "{name}");
                        assert_eq!(
                            service["name"],
                            format!("{}-webhook", rel.fullname),
                            "{name}"
                        );
                        assert_eq!(service["port"], 443, "{name}");
                        assert_eq!(service["path"], want_value["service"]["path"], "{name}");
                        bundles.push(got[field]["caBundle"].as_str().unwrap().to_string());
                        continue;
                    }
                    "namespaceSelector" => {
                        want_value["matchExpressions"][0]["values"] =
                            serde_json::json!(["kube-system", ns]);
                    }
                    // The values' timeout; the mutating webhook's at most 3 s, as in config/.
                    "timeoutSeconds" if kind == "MutatingWebhookConfiguration" => {
                        want_value = serde_json::json!(timeout.min(3));
                    }
                    "timeoutSeconds" => want_value = serde_json::json!(timeout),
                    "matchConditions" => {
                        let text = want_value.to_string();
                        assert!(
                            kind != "ValidatingWebhookConfiguration"
                                || name != "validate.sluice.dev"
                                || text.contains("'sluice'"),
                            "config/webhooks.yaml names no class"
                        );
                        want_value = serde_json::from_str(
                            &text.replace("'sluice'", &format!("'{}'", rel.class)),
                        )
                        .unwrap();
                    }
                    _ => {}
                }
                assert_eq!(&got[field], &want_value, "{kind} {name}: {field}");
            }
        }
    }
    assert!(bundles.windows(2).all(|w| w[0] == w[1]), "caBundles differ");
    bundles.pop().unwrap()
}

/// The release's NetworkPolicy, as the apiserver stored it: sluice's Pods, the webhook port from
/// any source (no `webhook.networkPolicy.apiServer` given), the other ports from anywhere. A
/// render with peers restricts the webhook port to them; `enabled: false` renders none.
pub fn check_network_policy(env: &Env, rel: &Rel, ns: &str) {
    let np = json(env, &["get", "networkpolicy", "-n", ns, rel.fullname]);
    let spec = &np["spec"];
    assert_eq!(
        spec["podSelector"]["matchLabels"]["app.kubernetes.io/component"], "sluice",
        "{np}"
    );
    assert_eq!(spec["policyTypes"], serde_json::json!(["Ingress"]), "{np}");
    let rules = spec["ingress"].as_array().unwrap();
    let ports = |rule: &Value| -> Vec<String> {
        (rule["ports"].as_array().unwrap().iter())
            .map(|p| p["port"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(ports(&rules[0]), ["webhook"], "{np}");
    assert!(rules[0]["from"].is_null(), "{np}");
    assert_eq!(
        ports(&rules[1]),
        ["webhook-health", "xds", "metrics"],
        "{np}"
    );
    assert!(rules[1]["from"].is_null(), "{np}");

    let template = [
        "template",
        rel.release,
        "charts/sluice",
        "-n",
        ns,
        "--kube-version",
        "1.34.0",
    ];
    let peers = [
        "--set",
        "webhook.networkPolicy.apiServer[0].ipBlock.cidr=0.0.0.0/0",
        "--set",
        "webhook.networkPolicy.apiServer[0].ipBlock.except[0]=10.244.0.0/16",
        "--show-only",
        "templates/networkpolicy.yaml",
    ];
    let text = helm(&[&template[..], &peers[..]].concat());
    assert!(
        text.contains(
            "      from:\n        - ipBlock:\n            cidr: 0.0.0.0/0\n            except:\n            - 10.244.0.0/16\n    - ports:\n        - port: webhook-health"
        ),
        "{text}"
    );
    let off = ["--set", "webhook.networkPolicy.enabled=false"];
    let text = helm(&[&template[..], &off[..]].concat());
    assert!(!text.contains("kind: NetworkPolicy"), "{text}");
}

pub fn strings(list: &Value) -> Vec<String> {
    (list
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter())
    .map(|v| v.as_str().expect("a string").to_string())
    .collect()
}
