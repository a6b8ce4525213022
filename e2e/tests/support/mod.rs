//! Helpers for the e2e tests: the environment e2e/run.sh exports, real kubectl, sluice processes
//! (start, SIGTERM, kill -9, count their status writes from the log), polling with deadlines.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use serde_json::Value;

mod envoy;
mod pods;
mod sluice;
mod webhooks;

pub use envoy::*;
#[allow(unused_imports)] // not used by the benchmarks
pub use pods::*;
pub use sluice::*;
pub use webhooks::*;

/// What e2e/run.sh exported.
pub struct Env {
    pub kubectl: PathBuf,
    pub work: PathBuf,
    pub pki: PathBuf,
    pub backend_ip: String,
    pub backend_ports: Vec<u16>,
    pub envoy: PathBuf,
}

fn var(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| {
        panic!("{name} is not set: run the e2e tests through `make e2e` (e2e/run.sh)")
    })
}

static INSTALL: Once = Once::new();

/// The environment; the first call installs crds/ and config/ (except the webhooks).
pub fn env() -> Env {
    let env = Env {
        kubectl: var("SLUICE_E2E_KUBECTL").into(),
        work: var("SLUICE_E2E_WORK").into(),
        pki: var("SLUICE_E2E_PKI").into(),
        backend_ip: var("SLUICE_E2E_BACKEND_IP"),
        backend_ports: var("SLUICE_E2E_BACKEND_PORTS")
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect(),
        envoy: var("SLUICE_E2E_ENVOY").into(),
    };
    var("KUBECONFIG");
    INSTALL.call_once(|| {
        let root = repo_root();
        env.apply_crds(&["-f", root.join("crds").to_str().unwrap()]);
        for f in ["namespace.yaml", "rbac.yaml", "ingressclass.yaml"] {
            env.kubectl_ok(&["apply", "-f", root.join("config").join(f).to_str().unwrap()]);
        }
        write_kubeconfig(&env, "sluice", "sluice-system", &env.sluice_kubeconfig());
    });
    env
}

/// Writes to `path` a kubeconfig for the ServiceAccount `namespace/account` (a token from the
/// TokenRequest API). sluice runs as the ServiceAccount of config/rbac.yaml, so every e2e test
/// also checks that the ClusterRole and Role grant enough — and the watches, status writes and
/// Lease work with exactly those rights.
pub fn write_kubeconfig(env: &Env, account: &str, namespace: &str, path: &Path) {
    let token = env.kubectl_ok(&["create", "token", account, "-n", namespace, "--duration=6h"]);
    let server = env.kubectl_ok(&[
        "config",
        "view",
        "--minify",
        "-o",
        "jsonpath={.clusters[0].cluster.server}",
    ]);
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: e2e\n  cluster:\n    server: {server}\n    certificate-authority: {ca}\nusers:\n- name: sluice\n  user:\n    token: {token}\ncontexts:\n- name: sluice\n  context: {{cluster: e2e, user: sluice, namespace: {namespace}}}\ncurrent-context: sluice\n",
        server = server.trim(),
        ca = env.pki.join("ca.crt").display(),
        token = token.trim(),
    );
    std::fs::write(path, config).expect("write the kubeconfig");
}

pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The result of one kubectl run.
#[derive(Debug)]
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Env {
    /// The kubeconfig sluice processes use (ServiceAccount sluice-system/sluice).
    pub fn sluice_kubeconfig(&self) -> PathBuf {
        self.work.join("sluice.kubeconfig")
    }

    pub fn kubectl_in(&self, args: &[&str], stdin: Option<&str>) -> Out {
        let mut cmd = Command::new(&self.kubectl);
        cmd.args(args)
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("kubectl runs");
        if let Some(input) = stdin {
            child
                .stdin
                .take()
                .unwrap()
                .write_all(input.as_bytes())
                .unwrap();
        }
        let out = child.wait_with_output().expect("kubectl finishes");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub fn kubectl(&self, args: &[&str]) -> Out {
        self.kubectl_in(args, None)
    }

    /// `kubectl apply` with `args` (files of CustomResourceDefinitions), then waits until every
    /// CustomResourceDefinition is established.
    pub fn apply_crds(&self, args: &[&str]) {
        self.kubectl_ok(&[&["apply"], args].concat());
        self.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ]);
    }

    /// Installs the Gateway API CRDs e2e/run.sh fetched (`SLUICE_E2E_GATEWAY_API`), with a
    /// server-side apply.
    pub fn install_gateway_api_crds(&self) {
        let crds = std::env::var("SLUICE_E2E_GATEWAY_API")
            .expect("SLUICE_E2E_GATEWAY_API (e2e/run.sh sets it)");
        let crds = Path::new(&crds).join("crds.yaml");
        self.apply_crds(&[
            "--server-side",
            "--force-conflicts",
            "-f",
            crds.to_str().unwrap(),
        ]);
    }

    /// Runs kubectl and panics with its stderr when it fails.
    pub fn kubectl_ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.ok, "kubectl {args:?} failed: {}", out.stderr);
        out.stdout
    }

    /// `kubectl apply -f -`.
    pub fn apply(&self, yaml: &str) -> Out {
        self.kubectl_in(&["apply", "-f", "-"], Some(yaml))
    }

    pub fn apply_ok(&self, yaml: &str) {
        let out = self.apply(yaml);
        assert!(out.ok, "kubectl apply failed: {}\n{yaml}", out.stderr);
    }

    /// A fresh namespace for one test. (There is no namespace controller in the e2e control
    /// plane, so namespaces are never deleted; the name carries the process id.)
    pub fn namespace(&self, name: &str) -> String {
        let name = format!("{name}-{}", std::process::id());
        self.kubectl_ok(&["create", "namespace", &name]);
        name
    }

    /// The object as JSON (None when it does not exist).
    pub fn get(&self, resource: &str, namespace: &str, name: &str) -> Option<Value> {
        let out = self.kubectl(&["get", resource, "-n", namespace, name, "-o", "json"]);
        if !out.ok {
            assert!(
                out.stderr.contains("NotFound"),
                "kubectl get {resource} {namespace}/{name}: {}",
                out.stderr
            );
            return None;
        }
        Some(serde_json::from_str(&out.stdout).expect("kubectl prints JSON"))
    }

    /// A Service `name` on port 80 backed by an EndpointSlice with the backend at `port` in the
    /// test's network namespace.
    pub fn backend_service(&self, namespace: &str, name: &str, port: u16) -> String {
        let ip = &self.backend_ip;
        format!(
            r#"
apiVersion: v1
kind: Service
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  ports: [{{name: http, port: 80, targetPort: {port}}}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: {name}-1
  namespace: {namespace}
  labels: {{kubernetes.io/service-name: {name}}}
addressType: IPv4
ports: [{{name: http, port: {port}, protocol: TCP}}]
endpoints:
  - addresses: ["{ip}"]
    conditions: {{ready: true}}
"#
        )
    }
}

/// Runs `cmd` to its end and returns its stdout; panics, with its stderr, when it cannot run or
/// exits unsuccessfully (`what` names it).
pub fn output_ok(cmd: &mut Command, what: &str) -> Vec<u8> {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("{what} does not run: {e}"));
    assert!(
        out.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// Polls `f` every 250 ms until it returns Some, or panics after `timeout` naming `what` and the
/// last observation.
pub fn wait_for<T>(timeout: Duration, what: &str, mut f: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        match f() {
            Ok(v) => return v,
            Err(last) if Instant::now() >= deadline => {
                panic!("timed out after {timeout:?} waiting for {what}; last: {last}")
            }
            Err(_) => std::thread::sleep(Duration::from_millis(250)),
        }
    }
}

/// The condition of a type in `.status.conditions`.
pub fn condition<'a>(obj: &'a Value, type_: &str) -> Option<&'a Value> {
    obj.pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c["type"] == type_)
}

/// Waits until the object's status says `current` with both conditions at `generation` (and
/// `Valid`/`Ready` True exactly when current is valid); returns the object.
pub fn wait_status(env: &Env, resource: &str, ns: &str, name: &str, current: &str) -> Value {
    wait_for(
        Duration::from_secs(30),
        &format!("{resource} {ns}/{name} to be {current} at its generation"),
        || {
            let obj = env
                .get(resource, ns, name)
                .ok_or_else(|| "not found".to_string())?;
            let generation = &obj["metadata"]["generation"];
            let status = &obj["status"];
            // Route v1alpha1 spells the values with a capital (`Valid`), IngressRoute in lower case.
            let want = if current.eq_ignore_ascii_case("valid") {
                "True"
            } else {
                "False"
            };
            let ok = status["currentStatus"] == current
                && status["observedGeneration"] == *generation
                && ["Valid", "Ready"].iter().all(|t| {
                    condition(&obj, t).is_some_and(|c| {
                        c["status"] == want && c["observedGeneration"] == *generation
                    })
                });
            if ok { Ok(obj) } else { Err(status.to_string()) }
        },
    )
}

/// GET `url` with curl and these extra headers: (status code, body); status 0 when nothing
/// answered.
#[allow(dead_code)] // not used by the benchmarks
pub fn curl_get(url: &str, headers: &[String]) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "--max-time", "3", "--noproxy", "*"]);
    for h in headers {
        cmd.arg("-H").arg(h);
    }
    let out = cmd
        .args(["-w", "\n%{http_code}"])
        .arg(url)
        .output()
        .expect("curl runs");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", "0"));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

/// The last lines of a log, for failure messages.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}

#[path = "../../../tests/envoy_support/ports.rs"]
mod ports;

pub use ports::free_port;

/// The flags that make a sluice serve xDS and Envoy's listener on loopback.
pub struct Ports {
    pub xds: u16,
    pub http: u16,
    pub admin: u16,
}

impl Ports {
    pub fn new() -> Ports {
        Ports {
            xds: free_port(),
            http: free_port(),
            admin: free_port(),
        }
    }

    pub fn serve_flags(&self) -> Vec<String> {
        vec![
            "--xds-address".into(),
            format!("127.0.0.1:{}", self.xds),
            "--listen-address".into(),
            "127.0.0.1".into(),
            "--http-port".into(),
            self.http.to_string(),
            "--https-port".into(),
            free_port().to_string(),
        ]
    }
}
