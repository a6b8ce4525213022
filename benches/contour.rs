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
//!    apiserver's path) with `--ingress-status-address` and an Envoy on its xDS; times its start
//!    → every existing Ingress's status written, waits until Envoy serves every existing host,
//!    creates one new Ingress at a time and times create → first 200 through Envoy, then creates a
//!    burst of 1,000 at once and times the creates, the last create → every status written and →
//!    every new host served; then takes its webhooks out of the apiserver and times a second
//!    burst the same way, which says what the webhooks cost the creates;
//! 3. stops sluice and its Envoy and deletes the Ingresses its phase created, so Contour starts
//!    on the same 5,000;
//! 4. **Contour**: installs its CustomResourceDefinitions, starts `contour serve` (its defaults
//!    but for leader election, off, and its client's request budget, raised to sluice's status
//!    write budget) with an Envoy on `contour bootstrap`'s configuration, and does the same.
//!
//! Keys (full run), `side_by_side_{sluice,contour}_…_5k`: `existing_status_s`,
//! `propagation_{p50,p99}_ms`, the controller's CPU per create (`cpu_ms_per_create`),
//! `burst_create_s`, `burst_status_s`, `burst_served_s`, and its RSS (`rss_mib`,
//! `rss_peak_mib`); sluice's second burst, `side_by_side_sluice_burst_create_without_webhooks_s_5k`
//! and `side_by_side_sluice_burst_status_without_webhooks_s_5k`; and Contour's
//! over sluice's: `side_by_side_propagation_p50_ratio_5k`, `side_by_side_burst_status_ratio_5k`,
//! `side_by_side_existing_status_ratio_5k`. The two phases run one after the other, not at once:
//! two controllers rebuilding side by side on two vCPUs would measure each other.

mod common;
#[allow(dead_code)]
#[path = "../e2e/tests/support/mod.rs"]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::networking::v1::{Ingress, IngressClass};
use kube::api::{Api, DeleteParams, ListParams, PostParams};

use common::apiserver::{
    create_all, create_namespaces, first_200, first_200_within, ms, obj, service, wait_until,
};
use common::process::{cpu_seconds, rss_mib};

/// Sizes of one run.
struct Sizes {
    ingresses: usize,
    services: usize,
    samples: usize,
    burst: usize,
}

const FULL: Sizes = Sizes {
    ingresses: 5_000,
    services: 1_000,
    samples: 30,
    burst: 1_000,
};

const SMOKE: Sizes = Sizes {
    ingresses: 100,
    services: 10,
    samples: 3,
    burst: 20,
};

/// Namespaces the workload is spread over.
const NAMESPACES: usize = 10;

/// The ingress class both controllers are told to serve.
const CLASS: &str = "side-by-side";

/// The label that names the set an Ingress belongs to ([`set_name`]): `base` (the workload both
/// controllers take in at their start), `{controller}-samples`, `{controller}-burst` and
/// `sluice-burst-unhooked` (what a phase creates, deleted before the next phase starts).
const SET: &str = "sbs-set";

/// What a phase's second burst is called: sluice's, created with its webhooks out of the
/// apiserver's path.
const UNHOOKED: &str = "burst-unhooked";

/// What each controller writes to Ingress `status.loadBalancer` (`--ingress-status-address`),
/// one address each (documentation range, RFC 5737): Contour finds sluice's address on the
/// base Ingresses and has to write every one of them again, as sluice did from none.
const SLUICE_ADDRESS: &str = "192.0.2.1";
const CONTOUR_ADDRESS: &str = "192.0.2.2";

/// Contour's Kubernetes client budget (`--kubernetes-client-qps`, `--kubernetes-client-burst`):
/// sluice's default status write budget (`--status-write-qps 500`, `--status-write-burst
/// 1000`). Contour's own default is client-go's 5 requests a second, which would hold 5,000
/// status writes for over 16 minutes: a setting, not the controller's speed.
const CONTOUR_CLIENT_QPS: &str = "500";
const CONTOUR_CLIENT_BURST: &str = "1000";

fn namespace_of(i: usize) -> String {
    format!("sbs-{}-{}", std::process::id(), i % NAMESPACES)
}

/// The value of [`SET`] for the set `what` of this run.
fn set_name(what: &str) -> String {
    format!("{what}-{}", std::process::id())
}

fn host(i: usize) -> String {
    format!("ing-{i}.sbs-{}.example.com", std::process::id())
}

fn ingress(i: usize, services: usize, set: &str) -> Ingress {
    let svc = format!("svc-{}", i % services);
    let path = |p: &str| {
        serde_json::json!({
            "path": p, "pathType": "Prefix",
            "backend": {"service": {"name": svc, "port": {"number": 80}}},
        })
    };
    obj(serde_json::json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
        "metadata": {
            "name": format!("ing-{i}"), "namespace": namespace_of(i), "labels": {SET: set},
        },
        "spec": {
            "ingressClassName": CLASS,
            "rules": [{"host": host(i), "http": {"paths": [path("/"), path("/api")]}}],
        },
    }))
}

/// One controller's phase: its start → every base Ingress's status written (s); create → first
/// 200 of each new Ingress (ms), the controller's CPU per create (ms, from each create to 600 ms
/// after its first 200); a burst of new Ingresses created at once, last create → every status
/// written and → every host served (s); and its RSS after all that and its high-water mark since
/// its start (MiB).
struct Phase {
    existing_status_s: f64,
    propagation_ms: Vec<f64>,
    cpu_ms_per_create: f64,
    burst: Burst,
    rss_mib: f64,
    peak_mib: f64,
}

/// A burst of new Ingresses created at once (with the workload's parallelism): how long the
/// creates took, and from the last create's answer until every status was written and until
/// every new host was served (s).
struct Burst {
    create_s: f64,
    status_s: f64,
    served_s: f64,
    /// One pass over the burst's hosts once all are served: the floor of `served_s`.
    probe_pass_s: f64,
}

/// One controller under test: the name its sets and keys carry, its pid, the port its Envoy
/// serves plain HTTP on, and the address it writes to Ingress status.
struct Controller {
    name: &'static str,
    pid: u32,
    port: u16,
    address: &'static str,
}

/// Whether `ing` carries `address` in `status.loadBalancer`.
fn has_address(ing: &Ingress, address: &str) -> bool {
    ing.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_ref())
        .is_some_and(|list| list.iter().any(|i| i.ip.as_deref() == Some(address)))
}

/// Watches the Ingresses of `set` until `count` of them carry `address` in their status;
/// returns when that happened. Panics after `timeout`.
async fn wait_status(
    client: kube::Client,
    set: String,
    address: &'static str,
    count: usize,
    timeout: Duration,
) -> Instant {
    let ingresses: Api<Ingress> = Api::all(client);
    let what = format!("Ingresses with status {address}");
    let selector = format!("{SET}={set}");
    wait_until(ingresses, &selector, count, timeout, &what, |i| {
        has_address(i, address)
    })
    .await
}

/// Probes each host once it is served, four probes in flight at most (each retried every
/// millisecond until it answers 200); returns when the last answered.
async fn all_served(http: &reqwest::Client, port: u16, hosts: Vec<String>) -> Instant {
    futures::stream::iter(hosts)
        .map(|h| async move { first_200(http, port, &h).await })
        .buffer_unordered(4)
        .fold(Instant::now(), |last, t| async move { last.max(t) })
        .await
}

/// The phase of controller `c`, started at `started`, whose base statuses `existing` is waiting
/// for: once its Envoy serves the `base` Ingresses (numbered below `base`), `samples` new
/// Ingresses numbered from `first`, one at a time, then a burst of `burst` after them.
fn phase(
    rt: &tokio::runtime::Runtime,
    client: &kube::Client,
    c: &Controller,
    (started, existing): (Instant, tokio::task::JoinHandle<Instant>),
    base: usize,
    first: usize,
    sizes: &Sizes,
) -> Phase {
    let http = probe_client();
    let port = c.port;
    rt.block_on(async {
        // The controller took in the whole cluster when this answers (Ingresses are created in
        // order, and their order is not what either controller builds by).
        first_200_within(&http, port, &host(base - 1), Duration::from_secs(600)).await;
        first_200(&http, port, &host(0)).await;
        println!(
            "  Envoy served the existing hosts {:.1} s after the controller's start",
            started.elapsed().as_secs_f64()
        );
        let existing_status_s = (existing.await.expect("status watcher") - started).as_secs_f64();
        println!(
            "  every existing Ingress had its status {existing_status_s:.1} s after the start"
        );
        // As in the cluster benchmark: Envoy may still be taking in its first configuration.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let mut propagation_ms = Vec::new();
        let mut cpu_ms = 0.0;
        let samples = set_name(&format!("{}-samples", c.name));
        for i in first..first + sizes.samples {
            let ing = ingress(i, sizes.services, &samples);
            let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace_of(i));
            let cpu = cpu_seconds(c.pid);
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
            cpu_ms += (cpu_seconds(c.pid) - cpu) * 1e3;
        }

        let range = first + sizes.samples..first + sizes.samples + sizes.burst;
        let burst = burst(client, &http, c, "burst", range, sizes.services).await;

        let (rss_mib, peak_mib) = rss_mib(c.pid);
        Phase {
            existing_status_s,
            propagation_ms,
            cpu_ms_per_create: cpu_ms / sizes.samples as f64,
            burst,
            rss_mib,
            peak_mib,
        }
    })
}

/// HTTP client of the probes through Envoy.
fn probe_client() -> reqwest::Client {
    reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(2))
        .build()
        .expect("an HTTP client")
}

/// Creates the Ingresses numbered `range` at once, as the set `{controller}-{what}`, with the
/// workload's parallelism, and times them ([`Burst`]).
async fn burst(
    client: &kube::Client,
    http: &reqwest::Client,
    c: &Controller,
    what: &str,
    range: std::ops::Range<usize>,
    services: usize,
) -> Burst {
    let set = set_name(&format!("{}-{what}", c.name));
    let statuses = tokio::spawn(wait_status(
        client.clone(),
        set.clone(),
        c.address,
        range.len(),
        Duration::from_secs(600),
    ));
    let ingresses = range.clone().map(|i| ingress(i, services, &set)).collect();
    let start = Instant::now();
    create_all(client, ingresses).await;
    let created = Instant::now();
    let hosts: Vec<String> = range.map(host).collect();
    let served = all_served(http, c.port, hosts.clone()).await;
    let status_done = statuses.await.expect("status watcher");
    let pass = Instant::now();
    all_served(http, c.port, hosts).await;
    Burst {
        create_s: (created - start).as_secs_f64(),
        status_s: status_done.saturating_duration_since(created).as_secs_f64(),
        served_s: served.saturating_duration_since(created).as_secs_f64(),
        probe_pass_s: pass.elapsed().as_secs_f64(),
    }
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
    let mut cmd = Command::new(contour);
    cmd.arg("bootstrap")
        .arg(&path)
        .args(["--xds-address", "127.0.0.1", "--xds-port", &xds.to_string()])
        .arg("--admin-address")
        .arg(work.join("contour-envoy-admin.sock"));
    support::output_ok(&mut cmd, "contour bootstrap");
    let text = std::fs::read_to_string(&path).expect("contour wrote the bootstrap");
    let mut bootstrap: serde_json::Value = serde_json::from_str(&text).expect("bootstrap JSON");
    bootstrap["node"] = serde_json::json!({"id": "side-by-side", "cluster": "contour"});
    std::fs::write(&path, bootstrap.to_string()).expect("bootstrap written");
    path
}

/// Prints a phase and returns its keys (`side_by_side_{name}_…_5k`).
fn report(name: &str, p: &Phase, burst: usize) -> Vec<(String, f64)> {
    let samples = &p.propagation_ms;
    let (p50, p99) = (
        common::quantile(samples, 0.5),
        common::quantile(samples, 0.99),
    );
    println!(
        "{name}: every existing Ingress's status {:.2} s after the start; create → first 200 \
         through Envoy over {} creates: p50 {p50:.1} ms, p99 {p99:.1} ms (min {:.1}, max {:.1}); \
         {:.1} ms of the controller's CPU per create; a burst of {burst} created in {:.2} s, every \
         status {:.3} s and every host served {:.3} s after the last create (one probe pass over \
         them {:.3} s); RSS {:.1} MiB after it all, {:.1} MiB at most since its start",
        p.existing_status_s,
        samples.len(),
        common::quantile(samples, 0.0),
        common::quantile(samples, 1.0),
        p.cpu_ms_per_create,
        p.burst.create_s,
        p.burst.status_s,
        p.burst.served_s,
        p.burst.probe_pass_s,
        p.rss_mib,
        p.peak_mib,
    );
    let key = |what: &str| format!("side_by_side_{}_{what}_5k", name.to_lowercase());
    vec![
        (key("existing_status_s"), p.existing_status_s),
        (key("propagation_p50_ms"), p50),
        (key("propagation_p99_ms"), p99),
        (key("cpu_ms_per_create"), p.cpu_ms_per_create),
        (key("burst_create_s"), p.burst.create_s),
        (key("burst_status_s"), p.burst.status_s),
        (key("burst_served_s"), p.burst.served_s),
        (key("rss_mib"), p.rss_mib),
        (key("rss_peak_mib"), p.peak_mib),
    ]
}

/// Deletes the Ingresses a phase created (sets `{name}-samples`, `{name}-burst` and
/// `{name}-burst-unhooked`) and waits
/// until they are gone, so the next controller starts on the base workload alone.
fn delete_phase_sets(rt: &tokio::runtime::Runtime, client: &kube::Client, name: &str) {
    let selector = format!(
        "{SET} in ({},{},{})",
        set_name(&format!("{name}-samples")),
        set_name(&format!("{name}-burst")),
        set_name(&format!("{name}-{UNHOOKED}"))
    );
    let params = ListParams::default().labels(&selector);
    rt.block_on(async {
        for n in 0..NAMESPACES {
            let api: Api<Ingress> = Api::namespaced(client.clone(), &namespace_of(n));
            api.delete_collection(&DeleteParams::default(), &params)
                .await
                .expect("delete a phase's Ingresses");
        }
        let all: Api<Ingress> = Api::all(client.clone());
        let deadline = Instant::now() + Duration::from_secs(120);
        while !all
            .list_metadata(&params.clone().limit(1))
            .await
            .expect("list Ingresses")
            .items
            .is_empty()
        {
            assert!(
                Instant::now() < deadline,
                "{selector}: still there after 120 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
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
        // The class both controllers serve: sluice's webhook refuses a new Ingress naming an
        // IngressClass that does not exist (seed 001). Kept from an earlier run of the smoke.
        let classes: Api<IngressClass> = Api::all(client.clone());
        let class: IngressClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "networking.k8s.io/v1", "kind": "IngressClass",
            "metadata": {"name": CLASS},
            "spec": {"controller": "sluice.dev/ingress-controller"},
        }))
        .expect("an IngressClass");
        match classes.create(&PostParams::default(), &class).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 409 => {}
            Err(e) => panic!("IngressClass {CLASS}: {e}"),
        }
        let (services, slices): (Vec<_>, Vec<_>) = (0..sizes.services)
            .map(|s| {
                let port = env.backend_ports[s % env.backend_ports.len()];
                service(&namespace_of(s), &format!("svc-{s}"), &env.backend_ip, port)
            })
            .unzip();
        create_all(&client, services).await;
        create_all(&client, slices).await;
        let ingresses = (0..sizes.ingresses)
            .map(|i| ingress(i, sizes.services, &set_name("base")))
            .collect();
        create_all(&client, ingresses).await;
    });
    println!(
        "created {} Services with EndpointSlices and {} Ingresses (two paths each) in {:.1} s",
        sizes.services,
        sizes.ingresses,
        t.elapsed().as_secs_f64()
    );

    // The base Ingresses' statuses with `address`, watched from before a controller starts.
    let existing = |address: &'static str| {
        let watch = wait_status(
            client.clone(),
            set_name("base"),
            address,
            sizes.ingresses,
            Duration::from_secs(900),
        );
        (Instant::now(), rt.spawn(watch))
    };

    // 2. sluice.
    let sluice = {
        let ports = support::Ports::new();
        let webhooks = support::Webhooks::for_class(&env, CLASS);
        let mut flags = ports.serve_flags();
        flags.extend(webhooks.serve_flags());
        flags.extend(
            [
                "--ingress-class-name",
                CLASS,
                "--ingress-status-address",
                SLUICE_ADDRESS,
            ]
            .map(String::from),
        );
        let existing = existing(SLUICE_ADDRESS);
        let sluice = support::Sluice::start(&env, &format!("side-by-side-{run}"), &flags);
        webhooks.install();
        let envoy = support::Envoy::start(&env, &ports, &format!("side-by-side-sluice-{run}"));
        println!("sluice:");
        let c = Controller {
            name: "sluice",
            pid: sluice.pid().expect("sluice runs"),
            port: ports.http,
            address: SLUICE_ADDRESS,
        };
        let phase = phase(
            &rt,
            &client,
            &c,
            existing,
            sizes.ingresses,
            sizes.ingresses,
            &sizes,
        );
        // The burst once more with sluice's webhooks out of the creates' path (the apiserver
        // would otherwise call a webhook that no longer answers on every Ingress create of the
        // next phase, too): what they cost the creates. Statuses are written as before.
        webhooks.uninstall();
        let first = sizes.ingresses + sizes.samples + sizes.burst;
        let unhooked = rt.block_on(burst(
            &client,
            &probe_client(),
            &c,
            UNHOOKED,
            first..first + sizes.burst,
            sizes.services,
        ));
        // 3. Envoy and sluice stop. What the phase created goes: Contour starts on the same
        // Ingresses sluice started on.
        drop((envoy, sluice, webhooks));
        delete_phase_sets(&rt, &client, c.name);
        (phase, unhooked)
    };
    let (sluice, unhooked) = sluice;

    // 4. Contour.
    let contour = {
        let crds = contour_dir.join("crds.yaml");
        env.apply_crds(&[
            "--server-side",
            "--force-conflicts",
            "-f",
            crds.to_str().expect("a UTF-8 path"),
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
            .arg(format!("--ingress-status-address={CONTOUR_ADDRESS}"))
            .arg(format!("--kubernetes-client-qps={CONTOUR_CLIENT_QPS}"))
            .arg(format!("--kubernetes-client-burst={CONTOUR_CLIENT_BURST}"))
            .args(loopback("xds", xds))
            .args(loopback("envoy-service-http", http))
            .args(loopback("envoy-service-https", https))
            .args(loopback("stats", stats))
            .args(loopback("health", port()))
            .args(loopback("http", port()))
            .args(loopback("debug-http", port()));
        let existing = existing(CONTOUR_ADDRESS);
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
        let c = Controller {
            name: "contour",
            pid: contour.child.id(),
            port: http,
            address: CONTOUR_ADDRESS,
        };
        // Numbered after sluice's sets, which are gone, so no host name is served twice.
        let first = sizes.ingresses + sizes.samples + 2 * sizes.burst;
        let phase = phase(&rt, &client, &c, existing, sizes.ingresses, first, &sizes);
        drop(contour);
        // Kept for a look at what Contour did (its log is gone with the e2e work directory).
        let kept = common::results_path().with_file_name("side-by-side-contour.log");
        if std::fs::create_dir_all(kept.parent().expect("target/bench")).is_ok() {
            let _ = std::fs::copy(env.work.join(format!("contour-{run}.log")), &kept);
        }
        phase
    };

    let mut keys = report("sluice", &sluice, sizes.burst);
    println!(
        "sluice without its webhooks in the apiserver's path: a burst of {} created in {:.2} s \
         (with them {:.2} s), every status {:.3} s and every host served {:.3} s after the last \
         create",
        sizes.burst, unhooked.create_s, sluice.burst.create_s, unhooked.status_s, unhooked.served_s,
    );
    keys.extend([
        (
            "side_by_side_sluice_burst_create_without_webhooks_s_5k".into(),
            unhooked.create_s,
        ),
        (
            "side_by_side_sluice_burst_status_without_webhooks_s_5k".into(),
            unhooked.status_s,
        ),
    ]);
    keys.extend(report("Contour", &contour, sizes.burst));
    let p50 = |p: &Phase| common::quantile(&p.propagation_ms, 0.5);
    let ratio = p50(&contour) / p50(&sluice);
    println!("Contour's p50 over sluice's: {ratio:.2}");
    keys.push(("side_by_side_propagation_p50_ratio_5k".into(), ratio));
    let ratio = contour.burst.status_s / sluice.burst.status_s;
    println!("Contour's burst status time over sluice's: {ratio:.2}");
    keys.push(("side_by_side_burst_status_ratio_5k".into(), ratio));
    let ratio = contour.existing_status_s / sluice.existing_status_s;
    println!("Contour's time to every existing status over sluice's: {ratio:.2}");
    keys.push(("side_by_side_existing_status_ratio_5k".into(), ratio));
    if !smoke {
        let r = keys
            .into_iter()
            .map(|(k, v)| (k, common::round3(v)))
            .collect();
        common::write_results(r);
    }
}
