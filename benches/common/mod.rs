//! Shared by the benchmarks: smoke detection, statistics and the results file.

#![allow(dead_code)] // each benchmark uses a different part

use std::path::PathBuf;

pub mod apiserver;
pub mod envoy;
pub mod process;
pub mod reference;

// The allocator the sluice binary uses (src/main.rs), so in-process measurements match it.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// `cargo bench` passes `--bench`; run any other way (`cargo test --all-targets` runs benchmarks in
/// the test profile) a benchmark does a short smoke run and records nothing.
pub fn smoke() -> bool {
    !std::env::args().any(|a| a == "--bench")
}

/// The benchmarks' synthetic cluster (`sluice::synth`) of `n` routing objects: a Service with an
/// EndpointSlice of 5 endpoints per object, and `n` unrelated Secrets.
pub fn cluster(n: usize) -> sluice::store::Snapshot {
    sluice::synth::snapshot(sluice::synth::Shape {
        routing_objects: n,
        endpoints_per_service: 5,
        unrelated_secrets: n,
    })
}

/// A multi-threaded tokio runtime of `threads` workers, for the servers and clients a benchmark
/// runs in process.
pub fn runtime(threads: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .enable_all()
        .build()
        .expect("a tokio runtime")
}

/// sluice's ADS server (the production `xds::serve`) on a free loopback port, serving the
/// pipeline's snapshots on `rt`: its port, and the sender that stops its streams when dropped or
/// told so.
pub fn serve_xds(
    rt: &tokio::runtime::Runtime,
    pipeline: &sluice::app::Pipeline,
) -> (u16, tokio::sync::watch::Sender<bool>) {
    serve_snapshots(rt, pipeline.xds())
}

/// [`serve_xds`] of the xDS snapshots `snapshots` receives, however they are made.
pub fn serve_snapshots(
    rt: &tokio::runtime::Runtime,
    snapshots: tokio::sync::watch::Receiver<std::sync::Arc<sluice::xds::Snapshot>>,
) -> (u16, tokio::sync::watch::Sender<bool>) {
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let server = sluice::xds::server::AdsServer::new(snapshots, stop_rx);
    let listener = rt
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .expect("bind the xDS server on loopback");
    let port = listener.local_addr().expect("xDS server address").port();
    rt.spawn(sluice::xds::server::serve(
        listener,
        server,
        None,
        std::future::pending(),
    ));
    (port, stop_tx)
}

/// The value at quantile `q` (0..=1) of unsorted samples (nearest rank).
pub fn quantile(samples: &[f64], q: f64) -> f64 {
    assert!(!samples.is_empty(), "no samples");
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

/// Rounds to 3 decimals for the results file.
pub fn round3(x: f64) -> serde_json::Value {
    serde_json::json!((x * 1000.0).round() / 1000.0)
}

pub fn results_path() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench/results.json")
}

/// Merges keys into target/bench/results.json (every benchmark writes its own keys).
pub fn write_results(new: serde_json::Map<String, serde_json::Value>) {
    let path = results_path();
    std::fs::create_dir_all(path.parent().unwrap()).expect("target/bench is writable");
    let mut all: serde_json::Map<String, serde_json::Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.extend(new);
    std::fs::write(&path, serde_json::to_string_pretty(&all).unwrap() + "\n")
        .expect("results.json is writable");
}

/// The route shards of this run (docs/xds.md, "Route shards"): `BENCH_HTTP_ROUTE_SHARDS`
/// (`auto` or a number), sluice's default `auto` when unset; and the prefix of the keys the run
/// records: `shardsN_` for a number N, none for `auto`.
pub fn route_shards() -> (sluice::translate::RouteShards, String) {
    let Ok(value) = std::env::var("BENCH_HTTP_ROUTE_SHARDS") else {
        return (Default::default(), String::new());
    };
    let shards = value
        .parse()
        .unwrap_or_else(|e| panic!("BENCH_HTTP_ROUTE_SHARDS={value}: {e}"));
    let prefix = match shards {
        sluice::translate::RouteShards::Fixed(n) => format!("shards{n}_"),
        sluice::translate::RouteShards::Auto(_) => String::new(),
    };
    (shards, prefix)
}

/// Prefixes every key of `r` with `prefix`.
pub fn prefixed(
    r: serde_json::Map<String, serde_json::Value>,
    prefix: &str,
) -> serde_json::Map<String, serde_json::Value> {
    (r.into_iter())
        .map(|(k, v)| (format!("{prefix}{k}"), v))
        .collect()
}
