//! `helm template` of charts/sluice with `webhook.separateDeployment` (docs/webhook.md, "Two
//! layouts"): the webhook Deployment runs `sluice serve --role webhook` under a ServiceAccount
//! whose ClusterRole reads exactly the kinds the webhook role watches and no Secrets; the main
//! Deployment runs without the webhook; the webhook Service and the NetworkPolicy select the
//! webhook's Pods. Uses the pinned Helm the e2e tools build (e2e/.cache/helm/*/helm, or
//! SLUICE_E2E_HELM); without one the test says so and passes, except in CI (`CI` set), where it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Without helm the render cannot be checked: said, and refused in CI (`.ci/run` builds helm
/// before `make test`), so CI never passes these tests without checking anything.
fn no_helm() {
    assert!(
        std::env::var_os("CI").is_none(),
        "no helm (e2e/.cache/helm/*/helm, SLUICE_E2E_HELM) in CI: .ci/run builds it before make test"
    );
    eprintln!("no helm (e2e/.cache/helm/*/helm, SLUICE_E2E_HELM): not checked; make e2e builds it");
}

fn helm_binary() -> Option<PathBuf> {
    if let Some(h) = std::env::var_os("SLUICE_E2E_HELM") {
        return Some(h.into());
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir(repo().join("e2e/.cache/helm"))
        .ok()?
        .filter_map(|e| Some(e.ok()?.path().join("helm")))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found.pop()
}

/// The documents of a render, as JSON values.
fn render(helm: &Path, set: &[&str]) -> Vec<Value> {
    let mut cmd = Command::new(helm);
    cmd.current_dir(repo()).args([
        "template",
        "r",
        "charts/sluice",
        "-n",
        "edge",
        "--kube-version",
        "1.34.0",
    ]);
    for s in set {
        cmd.args(["--set", s]);
    }
    let out = cmd.output().expect("running helm");
    assert!(
        out.status.success(),
        "helm template: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .filter_map(|doc| {
            let v: Value = serde::Deserialize::deserialize(doc).unwrap();
            (!v.is_null()).then_some(v)
        })
        .collect()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> Option<&'a Value> {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
}

fn get<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    find(docs, kind, name).unwrap_or_else(|| panic!("no {kind} {name} in the render"))
}

fn args(deployment: &Value) -> Vec<String> {
    deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap().to_string())
        .collect()
}

fn strings(list: &Value) -> Vec<String> {
    (list.as_array().unwrap().iter())
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_separate_webhook_deployment_cannot_read_secrets() {
    let Some(helm) = helm_binary() else {
        no_helm();
        return;
    };
    let docs = render(&helm, &["webhook.separateDeployment=true"]);

    // The webhook's ClusterRole: get/list/watch on the kinds the webhook role watches, nothing
    // else.
    let role = get(&docs, "ClusterRole", "r-sluice-webhook");
    let mut granted = Vec::new();
    for rule in role["rules"].as_array().unwrap() {
        assert_eq!(strings(&rule["verbs"]), ["get", "list", "watch"], "{rule}");
        for group in strings(&rule["apiGroups"]) {
            for resource in strings(&rule["resources"]) {
                assert!(!resource.contains("secret") && resource != "*", "{rule}");
                granted.push((group.clone(), resource));
            }
        }
    }
    granted.sort();
    let mut watched: Vec<(String, String)> = sluice::k8s::kinds::WEBHOOK_WATCHED
        .iter()
        .map(|k| {
            let kind = k.kind().to_ascii_lowercase();
            let plural = if kind.ends_with('s') {
                format!("{kind}es")
            } else {
                format!("{kind}s")
            };
            (k.group().to_string(), plural)
        })
        .collect();
    watched.sort();
    assert_eq!(granted, watched);
    let binding = get(&docs, "ClusterRoleBinding", "r-sluice-webhook");
    assert_eq!(binding["roleRef"]["name"], "r-sluice-webhook");
    assert_eq!(binding["subjects"][0]["name"], "r-sluice-webhook");
    assert_eq!(binding["subjects"][0]["namespace"], "edge");
    // No other binding gives the webhook's ServiceAccount anything.
    for doc in &docs {
        if doc["kind"] == "ClusterRoleBinding" || doc["kind"] == "RoleBinding" {
            let bound = doc["subjects"].as_array().unwrap();
            if bound.iter().any(|s| s["name"] == "r-sluice-webhook") {
                assert_eq!(doc["metadata"]["name"], "r-sluice-webhook", "{doc}");
            }
        }
    }

    // The webhook Deployment: the webhook role, its own ServiceAccount, the certificate.
    let webhook = get(&docs, "Deployment", "r-sluice-webhook");
    let pod = &webhook["spec"]["template"];
    assert_eq!(pod["spec"]["serviceAccountName"], "r-sluice-webhook");
    assert_eq!(
        pod["metadata"]["labels"]["app.kubernetes.io/component"],
        "webhook"
    );
    let a = args(webhook);
    assert_eq!(a[..2], ["serve", "--role=webhook"]);
    for flag in [
        "--webhook-address=0.0.0.0:9443",
        "--webhook-health-address=0.0.0.0:9444",
        "--webhook-cert=/etc/sluice/webhook/tls.crt",
        "--metrics-address=0.0.0.0:8000",
    ] {
        assert!(a.iter().any(|x| x == flag), "{flag}: {a:?}");
    }
    assert!(!a.iter().any(|x| x.starts_with("--xds")), "{a:?}");
    assert_eq!(
        pod["spec"]["volumes"][0]["secret"]["secretName"],
        "r-sluice-webhook"
    );

    // The main Deployment serves no webhook and mounts no webhook certificate.
    let main = get(&docs, "Deployment", "r-sluice");
    let a = args(main);
    assert!(!a.iter().any(|x| x.starts_with("--webhook")), "{a:?}");
    assert!(!a.iter().any(|x| x.starts_with("--role")), "{a:?}");
    assert!(
        !main.to_string().contains("webhook-tls"),
        "the main Deployment mounts the webhook certificate"
    );

    // The webhook Service and the NetworkPolicy select the webhook's Pods.
    let service = get(&docs, "Service", "r-sluice-webhook");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/component"],
        "webhook"
    );
    let np = get(&docs, "NetworkPolicy", "r-sluice-webhook");
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "webhook"
    );
    let ports: Vec<&Value> = (np["spec"]["ingress"].as_array().unwrap().iter())
        .flat_map(|r| r["ports"].as_array().unwrap())
        .map(|p| &p["port"])
        .collect();
    assert_eq!(ports, ["webhook", "webhook-health", "metrics"]);
    assert!(find(&docs, "NetworkPolicy", "r-sluice").is_none());
    let pdb = get(&docs, "PodDisruptionBudget", "r-sluice-webhook");
    assert_eq!(
        pdb["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"],
        "webhook"
    );
}

#[test]
fn by_default_every_sluice_replica_serves_the_webhook() {
    let Some(helm) = helm_binary() else {
        no_helm();
        return;
    };
    let docs = render(&helm, &[]);
    assert!(find(&docs, "Deployment", "r-sluice-webhook").is_none());
    assert!(find(&docs, "ServiceAccount", "r-sluice-webhook").is_none());
    let a = args(get(&docs, "Deployment", "r-sluice"));
    assert!(
        a.iter().any(|x| x == "--webhook-address=0.0.0.0:9443"),
        "{a:?}"
    );
    let service = get(&docs, "Service", "r-sluice-webhook");
    assert_eq!(
        service["spec"]["selector"]["app.kubernetes.io/component"],
        "sluice"
    );
    let np = get(&docs, "NetworkPolicy", "r-sluice");
    assert_eq!(
        np["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/component"],
        "sluice"
    );
}

/// `gatewayServices` (on by default) passes `--gateway-services` and gives sluice's ClusterRole
/// create, patch and delete on Services and EndpointSlices; off, neither.
#[test]
fn gateway_services_give_sluice_write_access_to_services_only_when_on() {
    let Some(helm) = helm_binary() else {
        no_helm();
        return;
    };
    for (set, on) in [(&[][..], true), (&["gatewayServices=false"][..], false)] {
        let docs = render(&helm, set);
        let role = get(&docs, "ClusterRole", "r-sluice");
        let writes = |group: &str, resource: &str| {
            role["rules"].as_array().unwrap().iter().any(|rule| {
                strings(&rule["apiGroups"]).iter().any(|g| g == group)
                    && strings(&rule["resources"]).iter().any(|r| r == resource)
                    && strings(&rule["verbs"]).iter().any(|v| v == "patch")
            })
        };
        assert_eq!(writes("", "services"), on, "{set:?}");
        assert_eq!(writes("discovery.k8s.io", "endpointslices"), on, "{set:?}");
        let deployment = get(&docs, "Deployment", "r-sluice");
        let args = deployment.to_string();
        assert_eq!(args.contains("--gateway-services"), on, "{set:?}");
    }
}
