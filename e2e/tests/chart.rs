//! charts/sluice against the real apiserver, with the pinned Helm (e2e/tools/helm): `helm lint`,
//! `helm install` and `helm upgrade` of a release serving another ingress class; the installed
//! RBAC and webhook configurations checked against config/ (which the other e2e tests run
//! with); the generated certificates checked; then the release's own Pods run (the pod runner,
//! docs/e2e.md "Pods": sluice's and Envoy's Deployments as the chart renders them, with their
//! arguments, environment, Secret volumes, ServiceAccount token, init container and emptyDir,
//! readiness probes and Services): the apiserver calls the chart's webhook in the sluice Pods,
//! an Ingress gets the Envoy Service's address, and requests through the Envoy Service reach
//! backend Pods, Envoy configured by sluice over mutual TLS xDS through sluice's Service.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::support::{
    Env, PodNet, curl_get, env, output_ok, pods, repo_root, wait_for, wait_status,
};

/// A release of the chart in a test.
pub struct Rel {
    pub release: &'static str,
    /// The name of the release's objects (the chart's `sluice.fullname`).
    pub fullname: &'static str,
    /// The ingress class the release serves, not sluice's default.
    pub class: &'static str,
}

const EDGE: Rel = Rel {
    release: "edge",
    fullname: "edge-sluice",
    class: "edge-public",
};
const IR: &str = "ingressroutes.contour.heptio.com";

pub fn helm_path() -> std::ffi::OsString {
    std::env::var_os("SLUICE_E2E_HELM")
        .expect("SLUICE_E2E_HELM is not set: run the e2e tests through `make e2e` (e2e/run.sh)")
}

pub fn helm(args: &[&str]) -> String {
    let out = output_ok(
        Command::new(helm_path())
            .args(args)
            .current_dir(repo_root()),
        &format!("helm {args:?}"),
    );
    String::from_utf8(out).unwrap()
}

/// The release while it lives: uninstalled on drop, so that its webhook configurations (whose
/// Service has no endpoints once the release's Pods are gone) do not outlive the test.
pub struct Release {
    pub name: &'static str,
    pub namespace: String,
}

impl Drop for Release {
    fn drop(&mut self) {
        let helm = std::env::var_os("SLUICE_E2E_HELM").unwrap_or_default();
        let _ = Command::new(helm)
            .args(["uninstall", self.name, "-n", &self.namespace])
            .output();
    }
}

pub fn json(env: &Env, args: &[&str]) -> Value {
    let text = env.kubectl_ok(&[args, &["-o", "json"]].concat());
    serde_json::from_str(&text).unwrap()
}

mod certs;
mod config;
mod pods;

pub use certs::*;
use config::*;
pub use pods::*;

#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn the_chart_installs_keeps_its_certificates_and_runs_as_rendered() {
    let env = env();
    let rel = &EDGE;
    helm(&["lint", "--strict", "charts/sluice"]);
    let ns = env.namespace("chart");
    let _release = Release {
        name: rel.release,
        namespace: ns.clone(),
    };
    helm(&[
        "install",
        rel.release,
        "charts/sluice",
        "-n",
        &ns,
        "--set",
        &format!("ingressClass.name={}", rel.class),
        "--set",
        "webhook.timeoutSeconds=7",
    ]);

    // What the chart generated.
    let dir = env.work.join(format!("chart-{ns}"));
    let certs = check_certificates(&env, rel, &ns, &dir);
    check_rbac(&env, rel, &ns);
    for name in [rel.fullname.to_string(), format!("{}-envoy", rel.fullname)] {
        let pdb = json(&env, &["get", "poddisruptionbudget", "-n", &ns, &name]);
        assert_eq!(pdb["spec"]["maxUnavailable"], 1, "{name}");
    }
    let ca_bundle = check_webhooks(&env, rel, &ns, 7);
    assert_eq!(
        ca_bundle, certs.webhook["ca.crt"],
        "caBundle is the webhook Secret's CA"
    );
    let class = json(&env, &["get", "ingressclass", rel.class]);
    assert_eq!(class["spec"]["controller"], "sluice.dev/ingress-controller");
    check_network_policy(&env, rel, &ns);

    // An upgrade keeps the certificates (the apiserver keeps trusting what the pods serve).
    helm(&[
        "upgrade",
        rel.release,
        "charts/sluice",
        "-n",
        &ns,
        "--reuse-values",
        "--set",
        "logLevel=debug",
        "--set",
        "hugePages=true",
    ]);
    let deployment = json(&env, &["get", "deployment", "-n", &ns, rel.fullname]);
    let env_vars = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    for (name, value) in [("RUST_LOG", "debug"), ("_RJEM_MALLOC_CONF", "thp:always")] {
        assert!(
            env_vars
                .iter()
                .any(|v| v["name"] == name && v["value"] == value),
            "the upgrade applied ({name}={value}): {env_vars:?}"
        );
    }
    same_certificates(&env, rel, &ns, &dir.join("after-upgrade"), &certs);
    assert_eq!(
        check_webhooks(&env, rel, &ns, 7),
        ca_bundle,
        "caBundle after the upgrade"
    );

    serve_as_installed(&env, rel, &ns, &dir, &certs);
}

const APART: Rel = Rel {
    release: "apart",
    fullname: "apart-sluice",
    class: "apart-public",
};

/// `webhook.separateDeployment=true` (docs/webhook.md, "Two layouts"): the webhook's own
/// Deployment runs `sluice serve --role webhook` under a ServiceAccount that may not read
/// Secrets; its Pods watch no Secret, become ready, and the apiserver calls them: a bad
/// IngressRoute is refused at `kubectl apply`. sluice's Deployment runs without the webhook.
#[test]
#[ignore = "needs the e2e control plane: make e2e"]
fn the_chart_runs_the_webhook_apart_without_access_to_secrets() {
    let env = env();
    let rel = &APART;
    let ns = env.namespace("chart-apart");
    let _release = Release {
        name: rel.release,
        namespace: ns.clone(),
    };
    helm(&[
        "install",
        rel.release,
        "charts/sluice",
        "-n",
        &ns,
        "--set",
        &format!("ingressClass.name={}", rel.class),
        "--set",
        "webhook.separateDeployment=true",
        "--set",
        "envoy.enabled=false",
    ]);
    let net: PodNet = pods();
    let webhook_name = format!("{}-webhook", rel.fullname);

    // The webhook's ServiceAccount may read the kinds its index needs, and no Secret; sluice's
    // may (it gives Envoy the TLS keys).
    let can_i = |verb: &str, resource: &str, sa: &str| {
        let out = env.kubectl(&[
            "auth",
            "can-i",
            verb,
            resource,
            "--all-namespaces",
            &format!("--as=system:serviceaccount:{ns}:{sa}"),
        ]);
        out.stdout.trim().to_string()
    };
    for verb in ["get", "list", "watch"] {
        assert_eq!(
            can_i(verb, "secrets", &webhook_name),
            "no",
            "{verb} secrets"
        );
    }
    assert_eq!(
        can_i("list", "ingressroutes.contour.heptio.com", &webhook_name),
        "yes"
    );
    assert_eq!(
        can_i("watch", "ingressclasses.networking.k8s.io", &webhook_name),
        "yes"
    );
    assert_eq!(
        can_i(
            "patch",
            "ingressroutes.contour.heptio.com/status",
            &webhook_name
        ),
        "no"
    );
    assert_eq!(can_i("list", "secrets", rel.fullname), "yes");

    // The webhook's Pods: the webhook role, its ServiceAccount's token, ready (the index of the
    // first complete lists is in), and watching nothing but the index's kinds.
    let (deployment, webhooks) = rolled_out(&env, rel, &ns, &webhook_name, "webhook");
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], webhook_name.as_str());
    let args = strings(&spec["containers"][0]["args"]);
    assert_eq!(args[..2], ["serve", "--role=webhook"]);
    for pod in &webhooks {
        let p = net.process(pod, "webhook");
        assert_eq!(p.argv[1..], args[..], "{}", pod_name(pod));
        assert!(
            has_token(&net.pod_dir(pod)),
            "{} has no token",
            pod_name(pod)
        );
        let logs = env.kubectl(&["logs", "-n", &ns, pod_name(pod)]).stdout;
        let watching: Vec<&str> = logs.lines().filter(|l| l.contains("watching")).collect();
        assert!(
            watching.iter().any(|l| l.contains("IngressRoute")),
            "{}",
            crate::support::tail(&logs)
        );
        for kind in ["Secret", "Service", "EndpointSlice", "Namespace"] {
            assert!(
                !watching
                    .iter()
                    .any(|l| l.contains(&format!("={kind}")) || l.contains(&format!("m{kind}"))),
                "{} watches {kind}: {watching:?}",
                pod_name(pod)
            );
        }
    }
    // sluice's Deployment runs without the webhook.
    let (deployment, _) = rolled_out(&env, rel, &ns, rel.fullname, "sluice");
    let main_args = strings(&deployment["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert!(
        !main_args.iter().any(|a| a.starts_with("--webhook")),
        "{main_args:?}"
    );

    // The apiserver calls the webhook's Pods through the webhook Service: a bad IngressRoute
    // of another namespace is refused with sluice's message.
    let app = AppNamespace {
        env: &env,
        name: env.namespace("chart-apart-app"),
    };
    let app_ns = app.name.as_str();
    let bad = format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: bad, namespace: {app_ns}}}
spec:
  virtualhost: {{fqdn: bad.{app_ns}.example.com}}
  routes: [{{match: finance, services: [{{name: web, port: 80}}]}}]
"#
    );
    let out = wait_for(
        Duration::from_secs(30),
        "the webhook's answer to a bad IngressRoute",
        || {
            let out = env.apply(&bad);
            if !out.ok && out.stderr.contains("must start with") {
                Ok(out)
            } else {
                Err(format!("ok={} {}", out.ok, out.stderr))
            }
        },
    );
    assert!(
        out.stderr
            .contains(r#"spec.routes[0].match: "finance" must start with "/""#),
        "{}",
        out.stderr
    );
    assert!(
        env.get(IR, app_ns, "bad").is_none(),
        "the bad IngressRoute was stored"
    );
    // A good one is admitted.
    env.apply_ok(&format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: root, namespace: {app_ns}}}
spec:
  virtualhost: {{fqdn: {app_ns}.example.com}}
  routes: [{{match: /, services: [{{name: web, port: 80}}]}}]
"#
    ));
}
