//! charts/sluice against the real apiserver, with the pinned Helm (e2e/tools/helm): `helm lint`,
//! `helm install` and `helm upgrade` of a release serving another ingress class; the installed
//! RBAC and webhook configurations checked against config/ (which the other e2e tests run
//! with); the generated certificates checked; then sluice and Envoy run as the release's
//! Deployments would run them (their arguments, the release's ServiceAccount, its certificates,
//! the bootstrap its init container writes), out of cluster since the e2e control plane has no
//! kubelet, and a request reaches a backend through them over mutual TLS xDS.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use serde_json::Value;

use crate::support::{
    Env, Envoy, Sluice, curl_get, env, free_port, output_ok, repo_root, wait_for, wait_status,
    write_kubeconfig,
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
/// Service has no endpoints here) do not outlive the test.
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

/// A container's `args` as a process here runs them: the pod's paths (`paths`: from, to) moved
/// to folders here, each `--flag=0.0.0.0:PORT` on loopback at a free port and each
/// `--http-port`/`--https-port` at a free port (the ports chosen in `ports`, by flag).
fn localize(
    args: &[Value],
    paths: &[(&str, PathBuf)],
    ports: &mut BTreeMap<String, u16>,
) -> Vec<String> {
    args.iter()
        .map(|a| {
            let mut a = a.as_str().unwrap().to_string();
            for (from, to) in paths {
                a = a.replace(from, &format!("{}/", to.display()));
            }
            if let Some((flag, value)) = a.split_once('=') {
                if let Some(port) = value.strip_prefix("0.0.0.0:") {
                    let local = free_port();
                    ports.insert(flag.to_string(), local);
                    assert!(port.parse::<u16>().is_ok(), "{a}");
                    a = format!("{flag}=127.0.0.1:{local}");
                } else if flag == "--http-port" || flag == "--https-port" {
                    let local = free_port();
                    ports.insert(flag.to_string(), local);
                    a = format!("{flag}={local}");
                }
            }
            assert!(
                !a.contains("/etc/") && !a.contains("/var/run/"),
                "a path of the pod left in {a}"
            );
            a
        })
        .collect()
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

/// With `hugePages: true`, sluice's heap is on transparent huge pages where the kernel gives them
/// to memory that asks (its `transparent_hugepage/enabled` at `always` or `madvise`).
fn check_huge_pages(sluice: &Sluice) {
    let mode =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if !(mode.contains("[always]") || mode.contains("[madvise]")) {
        eprintln!("transparent huge pages are off on this machine ({mode:?}): not checked");
        return;
    }
    let pid = sluice.pid().expect("sluice runs");
    let huge_kib = || -> u64 {
        let rollup = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
            .expect("sluice's smaps_rollup");
        (rollup.lines())
            .find_map(|l| l.strip_prefix("AnonHugePages:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0)
    };
    wait_for(
        std::time::Duration::from_secs(30),
        "huge pages in sluice's heap",
        || match huge_kib() {
            0 => Err(sluice.log_text()),
            _ => Ok(()),
        },
    );
}

/// Runs sluice and Envoy as the release's Deployments would run them, out of cluster, and checks
/// that routing objects of the release's namespace and class reach their backends through them.
pub fn serve_as_installed(env: &Env, rel: &Rel, ns: &str, dir: &Path, certs: &Certs) {
    // sluice as the Deployment runs it: its arguments, the release's ServiceAccount, its
    // certificates.
    let deployment = json(env, &["get", "deployment", "-n", ns, rel.fullname]);
    let pod = &deployment["spec"]["template"]["spec"];
    let mut ports = BTreeMap::new();
    let mut args = localize(
        pod["containers"][0]["args"].as_array().unwrap(),
        &[
            ("/etc/sluice/xds/", certs.server_dir.clone()),
            ("/etc/sluice/webhook/", certs.webhook_dir.clone()),
        ],
        &mut ports,
    );
    assert!(
        args.contains(&format!("--ingress-class-name={}", rel.class)),
        "{args:?}"
    );
    args.extend([
        "--listen-address=127.0.0.1".to_string(),
        format!("--namespace={ns}"),
        "--identity=chart-e2e".to_string(),
    ]);
    // Its environment variables of literal value (RUST_LOG aside: the test's log stays at info).
    let vars: Vec<(String, String)> = (pod["containers"][0]["env"].as_array().unwrap().iter())
        .filter(|v| v["name"] != "RUST_LOG")
        .filter_map(|v| Some((v["name"].as_str()?.into(), v["value"].as_str()?.into())))
        .collect();
    let kubeconfig = dir.join("kubeconfig");
    write_kubeconfig(env, rel.fullname, ns, &kubeconfig);
    let sluice = Sluice::spawn_with(env, rel.release, &args, &kubeconfig, &vars);
    if vars
        .iter()
        .any(|(k, v)| k == "_RJEM_MALLOC_CONF" && v == "thp:always")
    {
        check_huge_pages(&sluice);
    }
    let xds_port = ports["--xds-address"];
    let http_port = ports["--http-port"];

    // Its webhook serves the release's certificate, for the name the apiserver calls.
    let webhook_host = format!("{}-webhook.{ns}.svc", rel.fullname);
    let webhook_port = ports["--webhook-address"];
    wait_for(
        std::time::Duration::from_secs(30),
        "the release's webhook /readyz",
        || {
            let out = Command::new("curl")
                .args(["-sS", "--max-time", "3", "--noproxy", "*", "--cacert"])
                .arg(certs.webhook_dir.join("ca.crt"))
                .arg("--resolve")
                .arg(format!("{webhook_host}:{webhook_port}:127.0.0.1"))
                .arg(format!("https://{webhook_host}:{webhook_port}/readyz"))
                .output()
                .expect("curl runs");
            if out.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{}\n{}",
                    String::from_utf8_lossy(&out.stderr),
                    sluice.log_text()
                ))
            }
        },
    );

    // Envoy as the Envoy Deployment runs it: the init container's `sluice bootstrap`, then the
    // container's arguments.
    let envoy_deployment = json(
        env,
        &[
            "get",
            "deployment",
            "-n",
            ns,
            &format!("{}-envoy", rel.fullname),
        ],
    );
    let envoy_pod = &envoy_deployment["spec"]["template"]["spec"];
    let bootstrap_args: Vec<String> = localize(
        envoy_pod["initContainers"][0]["args"].as_array().unwrap(),
        &[
            ("/etc/envoy/xds/", certs.client_dir.clone()),
            ("/etc/envoy/", dir.to_path_buf()),
            ("/var/run/envoy/", dir.to_path_buf()),
        ],
        &mut ports,
    )
    .into_iter()
    .map(|a| match a.split_once('=') {
        // The Service's name resolves only in a cluster.
        Some(("--xds-address", _)) => format!("--xds-address=127.0.0.1:{xds_port}"),
        _ => a,
    })
    .collect();
    output_ok(
        Command::new(env!("CARGO_BIN_EXE_sluice")).args(&bootstrap_args),
        "the init container's sluice bootstrap",
    );
    let mut envoy_args = localize(
        envoy_pod["containers"][0]["args"].as_array().unwrap(),
        &[("/etc/envoy/", dir.to_path_buf())],
        &mut ports,
    );
    for a in &mut envoy_args {
        if a == "$(POD_NAME)" {
            *a = format!("{}-envoy", rel.release);
        }
    }
    envoy_args.extend(["--base-id".to_string(), free_port().to_string()]);
    let envoy = Envoy::spawn(env, &envoy_args, http_port, rel.release);

    // Objects in the release's namespace, which its webhooks skip (their Service has no
    // endpoints here).
    env.apply_ok(&env.backend_service(ns, "web", env.backend_ports[0]));
    env.apply_ok(&env.backend_service(ns, "shop", env.backend_ports[1]));
    env.apply_ok(&format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{name: root, namespace: {ns}}}
spec:
  virtualhost: {{fqdn: {ns}.example.com}}
  routes: [{{match: /, services: [{{name: web, port: 80}}]}}]
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {{name: shop, namespace: {ns}}}
spec:
  ingressClassName: {class}
  rules:
    - host: shop.{ns}.example.com
      http:
        paths: [{{path: /, pathType: Prefix, backend: {{service: {{name: shop, port: {{number: 80}}}}}}}}]
"#,
        class = rel.class
    ));
    // Status written by the release's identity (its ClusterRole, its Lease).
    wait_status(env, IR, ns, "root", "valid");
    envoy.wait_answer(
        &format!("{ns}.example.com"),
        "/",
        200,
        &format!("backend-{}", env.backend_ports[0]),
    );
    envoy.wait_answer(
        &format!("shop.{ns}.example.com"),
        "/",
        200,
        &format!("backend-{}", env.backend_ports[1]),
    );
    // Envoy's statistics on the port the chart annotates for scraping, and nothing else of its
    // admin interface.
    let stats = format!("http://127.0.0.1:{}", ports["--stats-address"]);
    let (code, text) = curl_get(&format!("{stats}/stats/prometheus"), &[]);
    assert_eq!(code, 200, "{text}");
    let web = format!("envoy_cluster_name=\"{ns}/web/");
    assert!(
        text.lines()
            .any(|l| l.starts_with("envoy_cluster_upstream_rq_total{") && l.contains(&web)),
        "no request count of {ns}/web in:\n{text}"
    );
    assert_eq!(curl_get(&format!("{stats}/config_dump"), &[]).0, 404);
    let lease = json(env, &["get", "lease", "-n", ns, "sluice-leader"]);
    assert_eq!(lease["spec"]["holderIdentity"], "chart-e2e");
}
