//! Helpers for the e2e tests: the environment e2e/run.sh exports, real kubectl, sluice processes
//! (start, SIGTERM, kill -9, count their status writes from the log), polling with deadlines.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Once;
use std::time::{Duration, Instant};

use serde_json::Value;

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
        env.kubectl_ok(&["apply", "-f", root.join("crds").to_str().unwrap()]);
        env.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ]);
        for f in ["namespace.yaml", "rbac.yaml", "ingressclass.yaml"] {
            env.kubectl_ok(&["apply", "-f", root.join("config").join(f).to_str().unwrap()]);
        }
    });
    env
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
            let want = if current == "valid" { "True" } else { "False" };
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

/// One `sluice serve` process in cluster mode.
pub struct Sluice {
    child: Option<Child>,
    pid_file: PathBuf,
    pub log: PathBuf,
}

impl Sluice {
    /// Starts `sluice serve` with this identity and extra flags, logging to the work dir.
    pub fn start(env: &Env, identity: &str, extra: &[&str]) -> Sluice {
        let n = std::fs::read_dir(&env.work).map(|d| d.count()).unwrap_or(0);
        let log = env.work.join(format!("sluice-{identity}-{n}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args([
                "serve",
                "--namespace",
                "sluice-system",
                "--identity",
                identity,
            ])
            .args(extra)
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(file.try_clone().unwrap())
            .stderr(file)
            .spawn()
            .expect("sluice starts");
        // e2e/run.sh kills whatever is left on exit, even when this test process is killed.
        let pid_file = env.work.join(format!("test-sluice-{}.pid", child.id()));
        let _ = std::fs::write(&pid_file, child.id().to_string());
        Sluice {
            child: Some(child),
            pid_file,
            log,
        }
    }

    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Status writes this process made so far (one log line each).
    pub fn writes(&self) -> usize {
        self.log_text().matches("status written").count()
    }

    /// Lines of the log containing `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.log_text().matches(needle).count()
    }

    pub fn wait_log(&self, needle: &str, timeout: Duration) {
        wait_for(
            timeout,
            &format!("{needle:?} in {}", self.log.display()),
            || {
                if self.log_text().contains(needle) {
                    Ok(())
                } else {
                    Err(tail(&self.log_text()))
                }
            },
        );
    }

    pub fn is_leader(&self) -> bool {
        self.count("became leader") > self.count("lost the lease") + self.count("stepping down")
    }

    /// `kill -9`: no cleanup at all (the Lease stays held until it expires).
    pub fn kill9(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }

    /// SIGTERM and wait (then SIGKILL after 10 s).
    pub fn terminate(&mut self) {
        let Some(mut c) = self.child.take() else {
            return;
        };
        let _ = Command::new("kill")
            .args(["-TERM", &c.id().to_string()])
            .status();
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = c.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = c.kill();
        let _ = c.wait();
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

impl Drop for Sluice {
    fn drop(&mut self) {
        self.terminate();
    }
}

/// The last lines of a log, for failure messages.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(15)..].join("\n")
}
