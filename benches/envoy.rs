//! A new route through a real Envoy, without a cluster: how the time from sluice publishing a
//! route to Envoy serving it divides between sluice and Envoy (`envoy_*` keys).
//!
//! sluice's ADS server (the production `xds::serve` over loopback gRPC) serves the pipeline's
//! snapshots of the synthetic cluster (`crates/core/src/synth.rs`: 10k routing objects, 6,000 plain-HTTP
//! hosts, as many as the cluster benchmark's propagation) to a real Envoy started with the
//! bootstrap `sluice bootstrap` writes and the flags docs/xds.md recommends. Then, one at a time,
//! a root IngressRoute with a new host is added to the snapshot and published, as the cluster-mode
//! rebuild loop does for a create, and the new host is requested through Envoy every 0.2 ms
//! until its backend (on 127.0.0.1) answers 200. Envoy's log (microsecond timestamps) tells when
//! it received the route configuration, when it had built its route table from it, and when it
//! accepted it; the first 200 comes once its worker has swapped in the new table (and freed the
//! one it replaces).
//!
//! Then a bounded load (a fixed number of requests on a few kept-alive connections) measures the
//! CPU time Envoy spends per request, from its /proc counters.
//!
//! All of it twice: with one HTTP route configuration, as sluice serves by default, and with
//! route shards (`--http-route-shards`, docs/xds.md "Route shards"), where a new host is an
//! update of its shard's configuration alone and every request runs the shard filter's Lua.
//! The `envoy_*` keys are the first; `envoy_shards16_*` the second.
//!
//! No request goes anywhere but 127.0.0.1: the synthetic hosts route to addresses that are never
//! requested, and the new hosts to the local backend.
//!
//! `cargo bench --bench envoy` runs 10k objects; any other way (`cargo test --all-targets`) a
//! smoke run with 200 objects that records nothing.

mod common;
#[path = "../tests/envoy_support/mod.rs"]
mod envoy_support;

use envoy_support::harness;

use std::io::{Read, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::envoy::{Envoy, updates};
use sluice::app::Pipeline;
use sluice::manifest::{Document, parse_documents};
use sluice::store::Snapshot;
use sluice::{dag, translate};

/// The status of `GET /` for `host` through Envoy's HTTP listener on 127.0.0.1:`port`, or None
/// when there is no answer (Envoy not listening yet).
fn status(port: u16, host: &str) -> Option<u16> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut head = [0u8; 16];
    let n = s.read(&mut head).ok()?;
    std::str::from_utf8(&head[..n])
        .ok()?
        .split(' ')
        .nth(1)?
        .parse()
        .ok()
}

/// Adds the objects of a YAML stream to the snapshot.
fn insert_yaml(snap: &mut Snapshot, yaml: &str) {
    for (_, doc) in parse_documents("bench.yaml", yaml).expect("benchmark objects parse") {
        match doc {
            Document::Object(o) => snap.insert(o),
            other => panic!("benchmark object not read: {other:?}"),
        }
    }
}

/// A root IngressRoute of its own host, routing `/` to the backend.
fn new_root(k: usize) -> (String, String) {
    let host = format!("new-{k}.prop.example.com");
    let yaml = format!(
        r#"
apiVersion: contour.heptio.com/v1beta1
kind: IngressRoute
metadata: {{namespace: prop, name: new-{k}}}
spec:
  virtualhost: {{fqdn: {host}}}
  routes: [{{match: /, services: [{{name: backend, port: 80}}]}}]
"#
    );
    (host, yaml)
}

/// Route shards of the second run.
const SHARDS: u16 = 16;

/// What one run measured.
struct Run {
    /// Publish → first 200, ms, per new host.
    served: Vec<f64>,
    /// Envoy's steps of each update (p50 over the run), when its log marked every update.
    phases: Option<[f64; 4]>,
    /// The longest wait for Envoy's main thread before it took an update in, ms.
    received_max: Option<f64>,
    /// Envoy's CPU time per request of the bounded load, µs.
    cpu_us_per_request: f64,
}

fn main() {
    let smoke = common::smoke();
    let (objects, steps) = if smoke { (200, 3) } else { (10_000, 40) };
    let rt = common::runtime(2);
    let one = run(&rt, smoke, objects, steps, 1);
    let sharded = run(&rt, smoke, objects, steps, SHARDS);
    let p50 = |r: &Run| common::quantile(&r.served, 0.5);
    let p99 = |r: &Run| common::quantile(&r.served, 0.99);
    println!(
        "new host → first 200, {SHARDS} shards against one configuration: p50 {:.3} of it, \
         Envoy's route table step {}",
        p50(&sharded) / p50(&one),
        match (&sharded.phases, &one.phases) {
            (Some(s), Some(o)) => format!("{:.3} of it", s[1] / o[1]),
            _ => "not split".into(),
        }
    );
    println!(
        "Envoy's CPU per request: {:.1} µs with one configuration, {:.1} µs with {SHARDS} shards \
         (+{:.1} µs, {:.3} of it)",
        one.cpu_us_per_request,
        sharded.cpu_us_per_request,
        sharded.cpu_us_per_request - one.cpu_us_per_request,
        sharded.cpu_us_per_request / one.cpu_us_per_request
    );
    if !smoke {
        let mut results = serde_json::Map::new();
        for (prefix, r) in [("envoy", &one), ("envoy_shards16", &sharded)] {
            let mut put = |key: &str, v: f64| {
                results.insert(format!("{prefix}_{key}"), common::round3(v));
            };
            put("new_host_p50_ms_10k", p50(r));
            put("new_host_p99_ms_10k", p99(r));
            put("cpu_us_per_request", r.cpu_us_per_request);
            if let (Some(phases), Some(max)) = (r.phases, r.received_max) {
                for (key, v) in [
                    "received_p50_ms_10k",
                    "route_table_p50_ms_10k",
                    "accepted_p50_ms_10k",
                    "worker_p50_ms_10k",
                ]
                .iter()
                .zip(phases)
                {
                    put(key, v);
                }
                put("received_max_ms_10k", max);
            }
        }
        common::write_results(results);
    }
}

/// One run: sluice's ADS server over the synthetic cluster with `shards` route shards, a new
/// Envoy, `steps` new hosts one at a time, then the bounded load.
fn run(
    rt: &tokio::runtime::Runtime,
    smoke: bool,
    objects: usize,
    steps: usize,
    shards: u16,
) -> Run {
    println!("-- {shards} HTTP route configuration(s)");
    let backend = rt.block_on(envoy_support::backend::Backend::start("backend"));
    let (http_port, https_port, admin_port) = (
        envoy_support::free_port(),
        envoy_support::free_port(),
        envoy_support::free_port(),
    );
    let mut snap = common::cluster(objects);
    // The Service the new hosts route to: one endpoint, the local backend.
    insert_yaml(
        &mut snap,
        &harness::docs(&[
            harness::service("prop", "backend", 80, "http"),
            harness::slice("prop", "backend", "http", backend.port, "abc"),
        ]),
    );
    let pipeline = Pipeline::new(
        dag::Options::default(),
        translate::Options {
            listen_address: "127.0.0.1".into(),
            http_port,
            https_port,
            route_shards: translate::RouteShards::Fixed(shards),
            ..Default::default()
        },
    );
    let model = pipeline.publish(&snap);
    let (xds_port, _stop_xds) = common::serve_xds(rt, &pipeline);

    let envoy = Envoy::start(&envoy_support::envoy_bin(), xds_port, admin_port);
    // Envoy holds the synthetic cluster once it serves a first new host.
    let t = Instant::now();
    let (host, yaml) = new_root(0);
    insert_yaml(&mut snap, &yaml);
    pipeline.publish(&snap);
    while status(http_port, &host) != Some(200) {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "Envoy did not serve within 120 s; its log:\n{}",
            envoy.log()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "{objects} routing objects: {} virtual hosts, {} clusters; Envoy served the first new host \
         {:.1} s after it started",
        model.vhosts.len(),
        model.clusters.len(),
        t.elapsed().as_secs_f64()
    );
    std::thread::sleep(Duration::from_secs(if smoke { 0 } else { 2 }));

    // Per step: when publish began (seconds of the day) and the first 200 (ms after that).
    let mut samples = Vec::new();
    for k in 1..=steps {
        let (host, yaml) = new_root(k);
        insert_yaml(&mut snap, &yaml);
        let start = Instant::now();
        let day = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_secs_f64()
            % 86_400.0;
        pipeline.publish(&snap);
        loop {
            match status(http_port, &host) {
                Some(200) => break,
                Some(404) | None => {}
                Some(other) => panic!("{host} answered {other}"),
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "{host} not served within 30 s"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
        samples.push((day, start.elapsed().as_secs_f64() * 1e3));
        // Bounded: as many steps as asked for, 150 ms apart.
        std::thread::sleep(Duration::from_millis(150));
    }
    assert!(
        backend.hits() >= steps as u64,
        "the backend served the new hosts"
    );

    // Envoy's steps for each publish: the first update it received after the publish began.
    let log = envoy.log();
    let updates = updates(&log);
    let mut phases: [Vec<f64>; 4] = Default::default();
    for &(day, served_ms) in &samples {
        let Some(u) = updates.iter().find(|u| u.received >= day - 0.001) else {
            continue;
        };
        let served = day + served_ms / 1e3;
        let parts = [
            u.received - day,
            u.built - u.received,
            u.accepted - u.built,
            served - u.accepted,
        ];
        for (v, p) in phases.iter_mut().zip(parts) {
            v.push(p * 1e3);
        }
    }
    // The smoke run checks that Envoy's log still marks every update, so the split cannot rot.
    assert!(
        !smoke || phases[0].len() == samples.len(),
        "Envoy's log marked {} of {} updates:\n{log}",
        phases[0].len(),
        samples.len()
    );
    let served: Vec<f64> = samples.iter().map(|s| s.1).collect();
    println!(
        "new host → first 200 through Envoy: p50 {:.1} ms, p99 {:.1} ms ({} hosts)",
        common::quantile(&served, 0.5),
        common::quantile(&served, 0.99),
        served.len()
    );
    let names = [
        "publish → Envoy received the route configuration",
        "received → route table built (decode, checks, build)",
        "built → update accepted",
        "accepted → first 200 (worker swaps tables)",
    ];
    let split = phases[0].len() == samples.len();
    if split {
        for (name, v) in names.iter().zip(&phases) {
            println!(
                "  {name:<55} p50 {:7.1} ms  max {:7.1} ms",
                common::quantile(v, 0.5),
                common::quantile(v, 1.0)
            );
        }
    } else {
        println!(
            "  Envoy's log marked {} of {} updates: its steps are not split",
            phases[0].len(),
            samples.len()
        );
    }
    let requests = if smoke { 300 } else { 30_000 };
    let cpu_us_per_request = cpu_per_request(envoy.pid(), http_port, &new_root(1).0, requests);
    println!("Envoy's CPU per request over {requests} requests: {cpu_us_per_request:.1} µs");
    Run {
        served,
        phases: split.then(|| phases.each_ref().map(|v| common::quantile(v, 0.5))),
        received_max: split.then(|| common::quantile(&phases[0], 1.0)),
        cpu_us_per_request,
    }
}

/// Envoy's CPU time (user and system, from /proc) per request, µs, over `requests` requests
/// for `host` on 4 kept-alive HTTP/1.1 connections (each answer read before the next request).
fn cpu_per_request(pid: u32, port: u16, host: &str, requests: usize) -> f64 {
    const CONNECTIONS: usize = 4;
    let cpu = || {
        common::process::cpu_by_name(std::path::Path::new(&format!("/proc/{pid}/task")))
            .values()
            .sum::<f64>()
    };
    let before = cpu();
    std::thread::scope(|scope| {
        for _ in 0..CONNECTIONS {
            scope.spawn(|| {
                let mut conn = KeptAlive::connect(port);
                for _ in 0..requests / CONNECTIONS {
                    assert_eq!(conn.get(host), 200, "{host} through Envoy");
                }
            });
        }
    });
    (cpu() - before) * 1e6 / (requests / CONNECTIONS * CONNECTIONS) as f64
}

/// One kept-alive HTTP/1.1 connection to Envoy's HTTP listener.
struct KeptAlive {
    stream: std::io::BufReader<std::net::TcpStream>,
}

impl KeptAlive {
    fn connect(port: u16) -> KeptAlive {
        let stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect to Envoy");
        stream
            .set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        stream.set_nodelay(true).expect("nodelay");
        KeptAlive {
            stream: std::io::BufReader::new(stream),
        }
    }

    /// `GET /` for `host`: the answer's status, its body read to its end.
    fn get(&mut self, host: &str) -> u16 {
        use std::io::BufRead;
        write!(
            self.stream.get_mut(),
            "GET / HTTP/1.1\r\nHost: {host}\r\n\r\n"
        )
        .expect("send");
        let mut line = String::new();
        self.stream.read_line(&mut line).expect("status line");
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        let mut length = 0;
        loop {
            line.clear();
            self.stream.read_line(&mut line).expect("header");
            if line == "\r\n" || line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().expect("content-length");
            }
        }
        let mut body = vec![0; length];
        self.stream.read_exact(&mut body).expect("body");
        status
    }
}
