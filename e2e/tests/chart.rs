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

/// The YAML documents of a file of config/.
fn config_docs(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(repo_root().join("config").join(file)).unwrap();
    serde_norway::Deserializer::from_str(&text)
        .map(|de| serde::Deserialize::deserialize(de).unwrap())
        .collect()
}

fn config_doc(file: &str, kind: &str) -> Value {
    config_docs(file)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("config/{file} has no {kind}"))
}

/// Writes the data of Secret `name` as files into `dir`, decoded.
pub fn secret_files(env: &Env, ns: &str, name: &str, dir: &Path) -> BTreeMap<String, String> {
    let secret = json(env, &["get", "secret", "-n", ns, name]);
    assert_eq!(secret["type"], "kubernetes.io/tls", "{name}");
    std::fs::create_dir_all(dir).unwrap();
    let mut data = BTreeMap::new();
    for (key, value) in secret["data"].as_object().unwrap() {
        let value = value.as_str().unwrap();
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(value)
            .unwrap();
        std::fs::write(dir.join(key), bytes).unwrap();
        data.insert(key.clone(), value.to_string());
    }
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        assert!(data.contains_key(key), "Secret {name} has no {key}");
    }
    data
}

/// `openssl verify` of `dir`/tls.crt against `dir`/ca.crt for `purpose`, and for `host` when given.
pub fn verify_certificate(dir: &Path, purpose: &str, host: Option<&str>) {
    let mut cmd = Command::new("openssl");
    cmd.arg("verify")
        .arg("-CAfile")
        .arg(dir.join("ca.crt"))
        .args(["-purpose", purpose]);
    if let Some(host) = host {
        cmd.args(["-verify_hostname", host]);
    }
    cmd.arg(dir.join("tls.crt"));
    output_ok(&mut cmd, &format!("openssl verify of {}", dir.display()));
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
fn check_webhooks(env: &Env, rel: &Rel, ns: &str, timeout: u64) -> String {
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

/// The release's three certificate Secrets, as written into folders of `dir` and as the
/// Secrets' data.
pub struct Certs {
    pub webhook_dir: PathBuf,
    pub server_dir: PathBuf,
    pub client_dir: PathBuf,
    pub webhook: BTreeMap<String, String>,
    pub server: BTreeMap<String, String>,
    pub client: BTreeMap<String, String>,
}

/// Reads the release's certificate Secrets into `dir` and checks them: each certificate verifies
/// against its Secret's CA for its use and names, the two xDS Secrets share one CA and the
/// webhook's CA is another.
pub fn check_certificates(env: &Env, rel: &Rel, ns: &str, dir: &Path) -> Certs {
    let fullname = rel.fullname;
    let webhook_dir = dir.join("webhook");
    let server_dir = dir.join("xds-server");
    let client_dir = dir.join("xds-client");
    let webhook = secret_files(env, ns, &format!("{fullname}-webhook"), &webhook_dir);
    let server = secret_files(env, ns, &format!("{fullname}-xds-server"), &server_dir);
    let client = secret_files(env, ns, &format!("{fullname}-xds-client"), &client_dir);
    verify_certificate(
        &webhook_dir,
        "sslserver",
        Some(&format!("{fullname}-webhook.{ns}.svc")),
    );
    verify_certificate(
        &server_dir,
        "sslserver",
        Some(&format!("{fullname}.{ns}.svc")),
    );
    verify_certificate(&client_dir, "sslclient", None);
    assert_eq!(server["ca.crt"], client["ca.crt"], "one xDS CA");
    assert_ne!(
        server["ca.crt"], webhook["ca.crt"],
        "the webhook's CA is its own"
    );
    Certs {
        webhook_dir,
        server_dir,
        client_dir,
        webhook,
        server,
        client,
    }
}

/// The release's certificate Secrets are still `certs`.
pub fn same_certificates(env: &Env, rel: &Rel, ns: &str, dir: &Path, certs: &Certs) {
    let fullname = rel.fullname;
    for (name, data) in [
        ("webhook", &certs.webhook),
        ("xds-server", &certs.server),
        ("xds-client", &certs.client),
    ] {
        let now = secret_files(env, ns, &format!("{fullname}-{name}"), dir);
        assert_eq!(&now, data, "Secret {fullname}-{name} changed");
    }
}

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

/// The release's NetworkPolicy, as the apiserver stored it: sluice's Pods, the webhook port from
/// any source (no `webhook.networkPolicy.apiServer` given), the other ports from anywhere. A
/// render with peers restricts the webhook port to them; `enabled: false` renders none.
fn check_network_policy(env: &Env, rel: &Rel, ns: &str) {
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

/// With `hugePages: true`, sluice's heap is on transparent huge pages where the kernel gives them
/// to memory that asks (its `transparent_hugepage/enabled` at `always` or `madvise`).
fn check_huge_pages(env: &Env, ns: &str, pod: &str, pid: u32) {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !(mode.contains("[always]") || mode.contains("[madvise]")) {
        eprintln!("transparent huge pages are off on this machine ({mode:?}): not checked");
        return;
    }
    let huge_kib = || -> u64 {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .expect("sluice's smaps_rollup");
        (rollup.lines())
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    wait_for(
        Duration::from_secs(30),
        "huge pages in sluice's heap",
        || match huge_kib() {
            0 => Err(env.kubectl(&["logs", "-n", ns, pod, "--tail=20"]).stdout),
            _ => Ok(()),
        },
    );
}

fn strings(list: &Value) -> Vec<String> {
    (list
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter())
    .map(|v| v.as_str().expect("a string").to_string())
    .collect()
}

/// Waits until Deployment `name` has rolled out (`kubectl rollout status`: every replica of the
/// current template updated and available, the old ones gone) and returns its Ready Pods.
fn rolled_out(env: &Env, rel: &Rel, ns: &str, name: &str, component: &str) -> (Value, Vec<Value>) {
    env.kubectl_ok(&[
        "rollout",
        "status",
        "deployment",
        name,
        "-n",
        ns,
        "--timeout=120s",
    ]);
    let deployment = json(env, &["get", "deployment", "-n", ns, name]);
    let replicas = deployment["spec"]["replicas"].as_u64().unwrap() as usize;
    let selector = format!(
        "app.kubernetes.io/instance={},app.kubernetes.io/component={component}",
        rel.release
    );
    let pods = env.ready_pods(ns, &selector, replicas);
    (deployment, pods)
}

/// A Pod's Secret volume (`volume`) holds the files of the Secret (as written to `secret`).
fn same_files(volume: &Path, secret: &Path) {
    for key in ["ca.crt", "tls.crt", "tls.key"] {
        let got = std::fs::read(volume.join(key))
            .unwrap_or_else(|e| panic!("{}/{key}: {e}", volume.display()));
        assert_eq!(
            got,
            std::fs::read(secret.join(key)).unwrap(),
            "{}/{key}",
            volume.display()
        );
    }
}

/// Whether a Pod's volumes (`dir`: its directory of the pod runner) hold a ServiceAccount token.
fn has_token(dir: &Path) -> bool {
    (std::fs::read_dir(dir.join("volumes"))
        .into_iter()
        .flatten()
        .flatten())
    .any(|d| d.path().join("token").is_file())
}

fn pod_name(pod: &Value) -> &str {
    pod["metadata"]["name"].as_str().unwrap()
}

fn pod_ip(pod: &Value) -> &str {
    pod["status"]["podIP"].as_str().unwrap()
}

/// A namespace of the test's backends and routing objects, deleted on drop.
struct AppNamespace<'a> {
    env: &'a Env,
    name: String,
}

impl Drop for AppNamespace<'_> {
    fn drop(&mut self) {
        let _ = self
            .env
            .kubectl(&["delete", "namespace", &self.name, "--wait=false"]);
    }
}

/// A Deployment of one podecho Pod (docs/e2e.md, "Pods") and its Service `name` on port 80.
fn backend(ns: &str, name: &str) -> String {
    format!(
        r#"
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: {ns}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: {name}}}}}
  template:
    metadata: {{labels: {{app: {name}}}}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
        - name: echo
          image: sluice-e2e/podecho:1
          args: ["--port", "8080"]
          ports: [{{name: http, containerPort: 8080}}]
          env:
            - {{name: POD_NAME, valueFrom: {{fieldRef: {{fieldPath: metadata.name}}}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {ns}}}
spec:
  selector: {{app: {name}}}
  ports: [{{name: www, port: 80, targetPort: http}}]
"#
    )
}

/// The release's own Pods, run by the pod runner as the chart renders them: sluice's Deployment
/// (its arguments and environment, its ServiceAccount's token, the xDS and webhook Secrets, its
/// readiness probe on the webhook port) and Envoy's (the init container's `sluice bootstrap`
/// into the emptyDir, Envoy's arguments, the client Secret, its probe); then the apiserver calls
/// the chart's webhook in those Pods, and routing objects of another namespace reach backend Pods
/// through the Envoy Service, Envoy configured by sluice over mutual TLS xDS through sluice's
/// Service. `certs`: the release's certificates as the test read them from its Secrets, which
/// the Pods' volumes must hold; `_dir`: the test's folder (the Pods need none of it).
pub fn serve_as_installed(env: &Env, rel: &Rel, ns: &str, _dir: &Path, certs: &Certs) {
    let net: PodNet = pods();
    let fullname = rel.fullname;

    // sluice: every replica runs the Deployment's container as rendered, as its user, with the
    // kubelet's environment (the API at the Service default/kubernetes, a token of the release's
    // ServiceAccount).
    let (deployment, sluices) = rolled_out(env, rel, ns, fullname, "sluice");
    let spec = &deployment["spec"]["template"]["spec"];
    assert_eq!(spec["serviceAccountName"], fullname);
    let container = &spec["containers"][0];
    let args = strings(&container["args"]);
    assert!(
        args.contains(&format!("--ingress-class-name={}", rel.class)),
        "{args:?}"
    );
    let literal_env: Vec<(String, String)> = (container["env"].as_array().unwrap().iter())
        .filter_map(|v| Some((v["name"].as_str()?.into(), v["value"].as_str()?.into())))
        .collect();
    let kubernetes = json(env, &["get", "service", "-n", "default", "kubernetes"]);
    let api_ip = kubernetes["spec"]["clusterIP"].as_str().unwrap();
    for pod in &sluices {
        let p = net.process(pod, "sluice");
        assert_eq!(
            p.argv[1..],
            args[..],
            "{} runs its container's args",
            pod_name(pod)
        );
        assert_eq!(
            Some(p.uid as u64),
            spec["securityContext"]["runAsUser"].as_u64()
        );
        // allowPrivilegeEscalation: false, readOnlyRootFilesystem: true.
        assert!(p.no_new_privs && p.read_only_root, "{}", pod_name(pod));
        for (k, v) in &literal_env {
            assert_eq!(p.env.get(k), Some(v), "{k} of {}", pod_name(pod));
        }
        assert_eq!(
            p.env.get("POD_NAME").map(String::as_str),
            Some(pod_name(pod))
        );
        assert_eq!(p.env.get("POD_NAMESPACE").map(String::as_str), Some(ns));
        assert_eq!(
            p.env.get("KUBERNETES_SERVICE_HOST").map(String::as_str),
            Some(api_ip)
        );
        assert!(
            has_token(&net.pod_dir(pod)),
            "{} has no token",
            pod_name(pod)
        );
        same_files(&net.pod_dir(pod).join("volumes/xds-tls"), &certs.server_dir);
        same_files(
            &net.pod_dir(pod).join("volumes/webhook-tls"),
            &certs.webhook_dir,
        );
    }
    if literal_env
        .iter()
        .any(|(k, v)| k == "_RJEM_MALLOC_CONF" && v == "thp:always")
    {
        let pod = &sluices[0];
        check_huge_pages(env, ns, pod_name(pod), net.process(pod, "sluice").pid);
    }
    // Ready only once the readiness probe (/readyz over plain HTTP on the port named
    // webhook-health) passed: the webhook Service's endpoints are these Pods, ready, on the
    // webhook port; and each serves the release's certificate for the Service's name.
    let want: BTreeSet<String> = sluices.iter().map(|p| pod_ip(p).to_string()).collect();
    let webhook_port = (container["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "webhook")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    wait_for(
        Duration::from_secs(30),
        "the webhook Service's ready endpoints",
        || {
            let slices = json(
                env,
                &[
                    "get",
                    "endpointslices",
                    "-n",
                    ns,
                    "-l",
                    &format!("kubernetes.io/service-name={fullname}-webhook"),
                ],
            );
            let mut got = BTreeSet::new();
            for s in slices["items"].as_array().unwrap() {
                if s["ports"][0]["port"].as_u64() != Some(webhook_port) {
                    continue;
                }
                for ep in s["endpoints"].as_array().unwrap_or(&Vec::new()) {
                    if ep["conditions"]["ready"] == true {
                        got.extend(strings(&ep["addresses"]));
                    }
                }
            }
            if got == want {
                Ok(())
            } else {
                Err(format!("{got:?}, want {want:?}"))
            }
        },
    );
    let webhook_host = format!("{fullname}-webhook.{ns}.svc");
    for ip in &want {
        let out = Command::new("curl")
            .args(["-sS", "--max-time", "3", "--noproxy", "*", "--cacert"])
            .arg(certs.webhook_dir.join("ca.crt"))
            .arg("--resolve")
            .arg(format!("{webhook_host}:{webhook_port}:{ip}"))
            .arg(format!("https://{webhook_host}:{webhook_port}/readyz"))
            .output()
            .expect("curl runs");
        assert!(
            out.status.success(),
            "{ip}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // Envoy: the init container wrote the bootstrap into the emptyDir (sluice's xDS Service by
    // name, with the client certificate of the Secret Envoy mounts), then Envoy started with
    // the container's command and args.
    let envoy_name = format!("{fullname}-envoy");
    let (envoy_deployment, envoys) = rolled_out(env, rel, ns, &envoy_name, "envoy");
    let espec = &envoy_deployment["spec"]["template"]["spec"];
    let init_args = strings(&espec["initContainers"][0]["args"]);
    let xds_host = format!("{fullname}.{ns}.svc");
    assert!(
        init_args.contains(&format!("--xds-address={xds_host}:8001")),
        "{init_args:?}"
    );
    let econtainer = &espec["containers"][0];
    let command = strings(&econtainer["command"]);
    assert_eq!(command, ["envoy"]);
    for pod in &envoys {
        let bootstrap_file = net.pod_dir(pod).join("volumes/bootstrap/bootstrap.json");
        let bootstrap: Value =
            serde_json::from_str(&std::fs::read_to_string(&bootstrap_file).unwrap()).unwrap();
        let xds = &bootstrap["static_resources"]["clusters"][0];
        let address = &xds["load_assignment"]["endpoints"][0]["lb_endpoints"][0]["endpoint"]["address"]
            ["socket_address"];
        assert_eq!(address["address"], xds_host.as_str(), "{xds}");
        assert_eq!(address["port_value"], 8001, "{xds}");
        assert_eq!(
            xds["transport_socket"]["name"], "envoy.transport_sockets.tls",
            "{xds}"
        );
        let p = net.process(pod, "envoy");
        let want_argv: Vec<String> = strings(&econtainer["args"])
            .into_iter()
            .map(|a| a.replace("$(POD_NAME)", pod_name(pod)))
            .collect();
        assert_eq!(p.argv[1..], want_argv[..], "{}", pod_name(pod));
        assert_eq!(
            Some(p.uid as u64),
            espec["securityContext"]["runAsUser"].as_u64()
        );
        assert!(p.no_new_privs && p.read_only_root, "{}", pod_name(pod));
        same_files(&net.pod_dir(pod).join("volumes/xds-tls"), &certs.client_dir);
        // automountServiceAccountToken: false.
        assert!(
            !has_token(&net.pod_dir(pod)),
            "{} has a token",
            pod_name(pod)
        );
    }
    // Each Envoy's xDS stream reached a sluice replica (through the xDS Service's ClusterIP,
    // over mutual TLS: sluice serves only clients of its --xds-ca).
    wait_for(
        Duration::from_secs(30),
        "an xDS stream per Envoy in sluice's logs",
        || {
            let opened: usize = (sluices.iter())
                .map(|p| {
                    (env.kubectl(&["logs", "-n", ns, pod_name(p)]).stdout)
                        .matches("xDS stream opened")
                        .count()
                })
                .sum();
            if opened >= envoys.len() {
                Ok(())
            } else {
                Err(format!("{opened} streams"))
            }
        },
    );

    // The Envoy Service's address (the runner's LoadBalancer).
    let envoy_ip = wait_for(
        Duration::from_secs(30),
        "the Envoy Service's load-balancer address",
        || {
            let svc = json(env, &["get", "service", "-n", ns, &envoy_name]);
            svc["status"]["loadBalancer"]["ingress"][0]["ip"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| svc["status"].to_string())
        },
    );

    // Objects of another namespace, which the webhooks check (they skip the release's own):
    // a bad one is refused by the chart's webhook, in the sluice Pods, which the apiserver calls
    // at an endpoint of the webhook Service.
    let app = AppNamespace {
        env,
        name: env.namespace("chart-app"),
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
    let out = env.apply(&bad);
    assert!(!out.ok, "a bad IngressRoute was accepted");
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

    env.apply_ok(&backend(app_ns, "web"));
    env.apply_ok(&backend(app_ns, "shop"));
    env.apply_ok(&format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: root, namespace: {app_ns}}}
spec:
  virtualhost: {{fqdn: {app_ns}.example.com}}
  routes: [{{match: /, services: [{{name: web, port: 80}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: shop, namespace: {app_ns}}}
spec:
  ingressClassName: {class}
  rules:
    - host: shop.{app_ns}.example.com
      http:
        paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: shop, port: {{number: 80}}}}}}}}]
"#,
        class = rel.class
    ));
    // Status written by the leader Pod (the release's ClusterRole, its Lease); the Ingress
    // carries the Envoy Service's address (--envoy-service).
    wait_status(env, IR, app_ns, "root", "valid");
    wait_for(Duration::from_secs(30), "the Ingress's address", || {
        let ing = json(env, &["get", "ingress", "-n", app_ns, "shop"]);
        let ip = &ing["status"]["loadBalancer"]["ingress"][0]["ip"];
        if ip == envoy_ip.as_str() {
            Ok(())
        } else {
            Err(ing["status"].to_string())
        }
    });
    let lease = json(env, &["get", "lease", "-n", ns, "sluice-leader"]);
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or_default();
    assert!(
        sluices.iter().any(|p| pod_name(p) == holder),
        "the Lease is held by {holder:?}, not a sluice Pod"
    );

    // Requests through the Envoy Service (its load-balancer address, port 80) and through each
    // Envoy Pod's HTTP port reach the backend Pods.
    let mut entries = vec![format!("http://{envoy_ip}")];
    let http_port = (econtainer["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "http")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    entries.extend(
        envoys
            .iter()
            .map(|p| format!("http://{}:{http_port}", pod_ip(p))),
    );
    for entry in &entries {
        for (host, backend) in [
            (format!("{app_ns}.example.com"), "\"pod\": \"web-"),
            (format!("shop.{app_ns}.example.com"), "\"pod\": \"shop-"),
        ] {
            wait_for(
                Duration::from_secs(30),
                &format!("{host} through {entry} → {backend}"),
                || {
                    let (code, body) = curl_get(&format!("{entry}/"), &[format!("Host: {host}")]);
                    if code == 200 && body.contains(backend) {
                        Ok(())
                    } else {
                        Err(format!("{code} {body}"))
                    }
                },
            );
        }
    }
    // Envoy's statistics on each Pod's metrics port (the bootstrap's --stats-address), and
    // nothing else of its admin interface; its access log on its standard output, which
    // `kubectl logs` shows.
    let metrics_port = (econtainer["ports"].as_array().unwrap().iter())
        .find(|p| p["name"] == "metrics")
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap();
    let web = format!("envoy_cluster_name=\"{app_ns}/web/");
    for pod in &envoys {
        let stats = format!("http://{}:{metrics_port}", pod_ip(pod));
        let (code, text) = curl_get(&format!("{stats}/stats/prometheus"), &[]);
        assert_eq!(code, 200, "{text}");
        assert!(
            text.lines()
                .any(|l| l.starts_with("envoy_cluster_upstream_rq_total{") && l.contains(&web)),
            "no request count of {app_ns}/web in:\n{text}"
        );
        assert_eq!(curl_get(&format!("{stats}/config_dump"), &[]).0, 404);
        wait_for(
            Duration::from_secs(10),
            "an access log line in kubectl logs",
            || {
                let logs = env
                    .kubectl(&["logs", "-n", ns, pod_name(pod), "-c", "envoy"])
                    .stdout;
                let served = logs.lines().any(|l| {
                    serde_json::from_str::<Value>(l).is_ok_and(|v| {
                        v["authority"] == format!("shop.{app_ns}.example.com")
                            && v["response_code"] == 200
                    })
                });
                if served {
                    Ok(())
                } else {
                    Err(crate::support::tail(&logs))
                }
            },
        );
    }
}
