//! The Pods e2e/lib/pods.sh runs as processes on the kwok Node (docs/e2e.md, "Pods").

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::*;

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
