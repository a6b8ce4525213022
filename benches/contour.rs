//! sluice and Contour side by side: the same Ingresses in the same kube-apiserver, the same Envoy
//! release, the same machine and minute, one controller at a time.
//!
//! Runs inside an e2e control plane, like the cluster benchmark: `e2e/run.sh --bench contour` runs
//! it in full (`cargo bench --bench contour`) in a control plane of its own, and `make e2e` runs
//! the smoke sizes after the cluster benchmark's. Contour is the release pinned in `e2e/tools/contour/go.mod`, built from the Go
//! module proxy by `e2e/tools/contour/build.sh` (`SLUICE_E2E_CONTOUR` names the directory with the
//! binary and that release's CustomResourceDefinitions). Without that environment it says so and
//! exits.
//!
//! What it does, in order:
//! 1. creates the workload through the API: Services with EndpointSlices and 5,000 Ingresses
//!    (`networking.k8s.io/v1`, the kind both controllers serve), each its own host with two
//!    `Prefix` paths, `/` and `/api`, as the cluster benchmark's IngressRoutes have;
//! 2. **sluice**: starts it as the cluster benchmark does (leader, its admission webhooks in the
//!    apiserver's path) with an Envoy on its xDS, waits until Envoy serves every existing host,
//!    then creates one new Ingress at a time and times create → first 200 through Envoy;
//! 3. stops sluice and its Envoy and takes its webhooks out of the apiserver;
//! 4. **Contour**: installs its CustomResourceDefinitions, starts `contour serve` (its defaults,
//!    leader election off) with an Envoy on `contour bootstrap`'s configuration, waits the same
//!    way, and times the same kind of create.
//!
//! Keys (full run): `side_by_side_{sluice,contour}_propagation_{p50,p99}_ms_5k`, the controller's
//! CPU per create and RSS (`side_by_side_{sluice,contour}_{cpu_ms_per_create,rss_mib,
//! rss_peak_mib}_5k`), and `side_by_side_propagation_p50_ratio_5k`, Contour's p50 over sluice's. The two phases run one
//! after the other, not at once: two controllers rebuilding side by side on two vCPUs would
//! measure each other.

mod common;
#[allow(dead_code)]
#[path = "../e2e/tests/support.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::networking::v1::Ingress;
use kube::api::{Api, PostParams};

use common::apiserver::{
    create_all, create_namespaces, first_200, first_200_within, ms, obj, service,
};
use common::process::{cpu_seconds, rss_mib};

/// Sizes of one run.
struct Sizes {
    ingresses: usize,
    services: usize,
    samples: usize,
}

const FULL: Sizes = Sizes {
    ingresses: 5_000,
    services: 1_000,
    samples: 30,
};

const SMOKE: Sizes = Sizes {
    ingresses: 100,
    services: 10,
    samples: 3,
};

/// Namespaces the workload is spread over.
const NAMESPACES: usize = 10;

/// The ingress class both controllers are told to serve.
const CLASS: &str = "side-by-side";

fn namespace_of(i: usize) -> String {
    format!("sbs-{}-{}", std::process::id(), i % NAMESPACES)
}

fn host(i: usize) -> String {
    format!("ing-{i}.sbs-{}.example.com", std::process::id())
}

fn ingress(i: usize, services: usize) -> Ingress {
    let svc = format!("svc-{}", i % services);
    let path = |p: &str| {
        serde_json::json!({
            "path": p, "pathType": "Prefix",
            "backend": {"service": {"name": svc, "port": {"number": 80}}},
        })
    };
    obj(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {"name": format!("ing-{i}"), "namespace": namespace_of(i)},
        "spec": {
            "ingressClassName": CLASS,
            "rules": [{"host": host(i), "http": {"paths": [path("/"), path("/api")]}}],
        },
    }))
}

/// One controller's phase: create → first 200 of each new Ingress (ms), the controller's CPU
/// per create (ms, from each create to 600 ms after its first 200), and its RSS after the series
/// and its high-water mark since its start (MiB).
struct Phase {
    propagation_ms: Vec<f64>,
    cpu_ms_per_create: f64,
    rss_mib: f64,
    peak_mib: f64,
}

/// The phase of the controller `pid`, whose Envoy listens on `port`: once that Envoy serves every
/// Ingress numbered below `first`, `samples` new Ingresses numbered from `first`, one at a time.
fn phase(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    (pid, port): (u32, u16),
    first: usize,
    samples: usize,
    services: usize,
) -> Phase {
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client");
    rt.block_on(async {
        // The controller took in the whole cluster when this answers (Ingresses are created in
        // order, and their order is not what either controller builds by).
        let t = Instant::now();
        first_200_within(&http, port, &host(first - 1), Duration::from_secs(600)).await;
        first_200(&http, port, &host(0)).await;
        println!(
            "  Envoy served the existing hosts {:.1} s after the wait began",
            t.elapsed().as_secs_f64()
        );
        // As in the cluster benchmark: Envoy may still be taking in its first configuration.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut propagation_ms = Vec::new();
        let mut cpu_ms = 0.0;
        for i in first..first + samples {
            let ing = ingress(i, services);
            let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace_of(i));
            let cpu = cpu_seconds(pid);
            let start = Instant::now();
            api.create(&PostParams::default(), &ing)
                .await
                .expect("create");
            let done = first_200(&http, port, &host(i)).await;
            propagation_ms.push(ms(done - start));
            // Each create finds an idle controller and Envoy (Contour rebuilds at once after
            // 500 ms without changes, its holdoff's maximum); what the controller does for it
            // after the 200 (status, bookkeeping) is counted here too.
            tokio::time::sleep(Duration::from_millis(600)).await;
            cpu_ms += (cpu_seconds(pid) - cpu) * 1e3;
        }
        let (rss_mib, peak_mib) = rss_mib(pid);
        Phase {
            propagation_ms,
            cpu_ms_per_create: cpu_ms / samples as f64,
            rss_mib,
            peak_mib,
        }
    })
}

/// A process this benchmark started, killed when dropped (and by e2e/run.sh's teardown, through
/// its pid file, if the benchmark dies first).
struct Process {
    child: Child,
    pid_file: PathBuf,
}

impl Process {
    fn spawn(cmd: &mut Command, work: &Path, name: &str) -> Process {
        let log = std::fs::File::create(work.join(format!("{name}.log"))).expect("a log file");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("the log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("{name} starts: {e}"));
        let pid_file = work.join(format!("test-{name}-{}.pid", child.id()));
        let _ = std::fs::write(&pid_file, child.id().to_string());
        Process { child, pid_file }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.pid_file);
    }
}

/// The bootstrap of Contour's Envoy, written by `contour bootstrap` for an xDS server on `xds`,
/// with a node name and cluster added (Contour's deployment gives its Envoys them as flags).
fn contour_bootstrap(contour: &Path, work: &Path, xds: u16) -> PathBuf {
    let path = work.join("contour-bootstrap.json");
    let out = Command::new(contour)
        .arg("bootstrap")
        .arg(&path)
        .args(["--xds-address", "127.0.0.1", "--xds-port", &xds.to_string()])
        .arg("--admin-address")
        .arg(work.join("contour-envoy-admin.sock"))
        .output()
        .expect("contour bootstrap runs");
    assert!(
        out.status.success(),
        "contour bootstrap: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&path).expect("contour wrote the bootstrap");
    let mut bootstrap: serde_json::Value = serde_json::from_str(&text).expect("bootstrap JSON");
    bootstrap["node"] = serde_json::json!({"id": "side-by-side", "cluster": "contour"});
    std::fs::write(&path, bootstrap.to_string()).expect("bootstrap written");
    path
}

/// Prints a phase and returns its keys (`side_by_side_{name}_…_5k`).
fn report(name: &str, p: &Phase) -> Vec<(String, f64)> {
    let samples = &p.propagation_ms;
    let (p50, p99) = (
        common::quantile(samples, 0.5),
        common::quantile(samples, 0.99),
    );
    println!(
        "{name}: create → first 200 through Envoy over {} creates: p50 {p50:.1} ms, p99 {p99:.1} ms \
         (min {:.1}, max {:.1}); {:.1} ms of the controller's CPU per create; RSS {:.1} MiB after \
         the creates, {:.1} MiB at most since its start",
        samples.len(),
        common::quantile(samples, 0.0),
        common::quantile(samples, 1.0),
        p.cpu_ms_per_create,
        p.rss_mib,
        p.peak_mib,
    );
    let key = |what: &str| format!("side_by_side_{}_{what}_5k", name.to_lowercase());
    vec![
        (key("propagation_p50_ms"), p50),
        (key("propagation_p99_ms"), p99),
        (key("cpu_ms_per_create"), p.cpu_ms_per_create),
        (key("rss_mib"), p.rss_mib),
        (key("rss_peak_mib"), p.peak_mib),
    ]
}

/// Whether the apiserver holds IngressRoutes or Ingresses already: sluice serves every
/// IngressRoute and Contour none, so a full run needs an apiserver without them.
fn holds_routing_objects(rt: &tokio::runtime::Runtime, client: &kube::Client) -> bool {
    use sluice::api::heptio_v1beta1::IngressRoute;
    let params = kube::api::ListParams::default().limit(1);
    rt.block_on(async {
        let irs = Api::<IngressRoute>::all(client.clone())
            .list_metadata(&params)
            .await
            .expect("list IngressRoutes");
        let ings = Api::<Ingress>::all(client.clone())
            .list_metadata(&params)
            .await
            .expect("list Ingresses");
        !irs.items.is_empty() || !ings.items.is_empty()
    })
}

fn main() {
    let smoke = common::smoke();
    let (Some(_), Some(contour_dir)) = (
        std::env::var_os("SLUICE_E2E_WORK"),
        std::env::var_os("SLUICE_E2E_CONTOUR"),
    ) else {
        println!(
            "side-by-side benchmark: no e2e control plane here; it runs inside `make e2e` (smoke) \
             and `e2e/run.sh --bench contour` (full)"
        );
        return;
    };
    let contour_dir = PathBuf::from(contour_dir);
    let sizes = if smoke { SMOKE } else { FULL };
    let rt = common::runtime(2);
    let env = support::env();
    let client = common::apiserver::admin_client(&rt);
    let run = std::process::id();

    // 1. The workload, in an apiserver of its own.
    assert!(
        smoke || !holds_routing_objects(&rt, &client),
        "the side-by-side benchmark needs an apiserver without IngressRoutes and Ingresses (sluice \
         would serve them, Contour not): run it as `e2e/run.sh --bench contour`"
    );
    let t = Instant::now();
    rt.block_on(async {
        create_namespaces(&client, (0..NAMESPACES).map(namespace_of)).await;
        let (services, slices): (Vec<_>, Vec<_>) = (0..sizes.services)
            .map(|s| {
                let port = env.backend_ports[s % env.backend_ports.len()];
                service(&namespace_of(s), &format!("svc-{s}"), &env.backend_ip, port)
            })
            .unzip();
        create_all(&client, services).await;
        create_all(&client, slices).await;
        let ingresses = (0..sizes.ingresses)
            .map(|i| ingress(i, sizes.services))
            .collect();
        create_all(&client, ingresses).await;
    });
    println!(
        "created {} Services with EndpointSlices and {} Ingresses (two paths each) in {:.1} s",
        sizes.services,
        sizes.ingresses,
        t.elapsed().as_secs_f64()
    );

    // 2. sluice.
    let sluice = {
        let ports = support::Ports::new();
        let webhooks = support::Webhooks::new(&env);
        let mut flags = ports.serve_flags();
        flags.extend(webhooks.serve_flags());
        flags.extend(["--ingress-class-name".to_string(), CLASS.to_string()]);
        let sluice = support::Sluice::start(&env, &format!("side-by-side-{run}"), &flags);
        webhooks.install();
        let envoy = support::Envoy::start(&env, &ports, &format!("side-by-side-sluice-{run}"));
        println!("sluice:");
        let pid = sluice.pid().expect("sluice runs");
        let samples = phase(
            &rt,
            &client,
            (pid, ports.http),
            sizes.ingresses,
            sizes.samples,
            sizes.services,
        );
        // 3. Envoy and sluice stop, and the webhooks go: the apiserver would otherwise call a
        // webhook that no longer answers on every Ingress create of the next phase.
        drop((envoy, sluice, webhooks));
        samples
    };

    // 4. Contour.
    let contour = {
        let crds = contour_dir.join("crds.yaml");
        env.kubectl_ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            crds.to_str().expect("a UTF-8 path"),
        ]);
        env.kubectl_ok(&[
            "wait",
            "--for=condition=Established",
            "crd",
            "--all",
            "--timeout=60s",
        ]);
        let port = support::free_port;
        let (xds, http, https, stats) = (port(), port(), port(), port());
        let binary = contour_dir.join("contour");
        let bootstrap = contour_bootstrap(&binary, &env.work, xds);
        let loopback = |flag: &str, port: u16| {
            [
                format!("--{flag}-address=127.0.0.1"),
                format!("--{flag}-port={port}"),
            ]
        };
        let mut serve = Command::new(&binary);
        serve
            .arg("serve")
            .arg(format!(
                "--kubeconfig={}",
                std::env::var("KUBECONFIG").expect("KUBECONFIG")
            ))
            .args(["--insecure", "--disable-leader-election"])
            .arg(format!("--ingress-class-name={CLASS}"))
            .args(loopback("xds", xds))
            .args(loopback("envoy-service-http", http))
            .args(loopback("envoy-service-https", https))
            .args(loopback("stats", stats))
            .args(loopback("health", port()))
            .args(loopback("http", port()))
            .args(loopback("debug-http", port()));
        let contour = Process::spawn(&mut serve, &env.work, &format!("contour-{run}"));
        let _envoy = support::Envoy::start_bootstrap(
            &env,
            &bootstrap,
            http,
            stats,
            &format!("side-by-side-contour-{run}"),
            false,
        );
        println!("Contour:");
        let samples = phase(
            &rt,
            &client,
            (contour.child.id(), http),
            sizes.ingresses + sizes.samples,
            sizes.samples,
            sizes.services,
        );
        drop(contour);
        // Kept for a look at what Contour did (its log is gone with the e2e work directory).
        let kept = common::results_path().with_file_name("side-by-side-contour.log");
        if std::fs::create_dir_all(kept.parent().expect("target/bench")).is_ok() {
            let _ = std::fs::copy(env.work.join(format!("contour-{run}.log")), &kept);
        }
        samples
    };

    let mut keys = report("sluice", &sluice);
    keys.extend(report("Contour", &contour));
    let p50 = |p: &Phase| common::quantile(&p.propagation_ms, 0.5);
    let ratio = p50(&contour) / p50(&sluice);
    println!("Contour's p50 over sluice's: {ratio:.2}");
    keys.push(("side_by_side_propagation_p50_ratio_5k".into(), ratio));
    if !smoke {
        let r = keys
            .into_iter()
            .map(|(k, v)| (k, common::round3(v)))
            .collect();
        common::write_results(r);
    }
}
