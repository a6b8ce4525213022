//! The full rebuild a change triggers, over synthetic clusters: `dag::build`, then
//! `translate::build`, then `xds::Snapshot::from_resources` (what `Pipeline::publish` does), with
//! each phase timed on its own so the profile is visible. Prints the times at 1k and 10k routing
//! objects and the 10k/1k ratio (linear scaling gives ~10; O(n²) would give ~100). Writes its keys
//! into target/bench/results.json.
//!
//! Each iteration replaces the previous iteration's model and xDS snapshot, which are then dropped,
//! as a long-running sluice drops the previous state when it publishes a new one; the drop is timed
//! as its own phase and counted in the total.
//!
//! `cargo bench --bench dag` runs the full sizes. Run any other way (`cargo test --all-targets` runs
//! it in the test profile) it does a small smoke run so the benchmark cannot rot, and records nothing.

mod common;

use std::time::Instant;

use sluice::dag::{self, Dag, Options};
use sluice::synth::{Shape, snapshot};
use sluice::{translate, xds};

/// Per-phase times of one iteration, in ms.
#[derive(Clone, Copy, Default)]
struct Times {
    dag: f64,
    translate: f64,
    encode: f64,
    drop: f64,
    total: f64,
}

/// Median of each phase on its own (so the phases need not add up to the total exactly).
#[derive(Clone, Copy, Default)]
struct Medians {
    dag_only: f64,
    dag: f64,
    translate: f64,
    encode: f64,
    drop: f64,
    total: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn row(n: usize, runs: usize) -> Medians {
    let snap = snapshot(Shape {
        routing_objects: n,
        endpoints_per_service: 5,
        unrelated_secrets: n,
    });
    let options = Options::default();
    let translate_options = translate::Options::default();
    let endpoints: usize = snap.endpoint_slices.values().map(|s| s.ready.len()).sum();

    // dag::build alone, the previous model dropped as it is replaced (outside the timing, as in
    // the benchmark's first version, so the number stays comparable).
    let mut prev: Dag = dag::build(&snap, &options);
    assert!(prev.vhosts.len() >= n / 2, "synthetic cluster routes");
    let dag_only = median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                let d = std::hint::black_box(dag::build(&snap, &options));
                let ms = ms_since(t);
                prev = d;
                ms
            })
            .collect(),
    );
    drop(prev);

    // The full rebuild, phase by phase, replacing (and so dropping) the previous result.
    let mut prev_dag = dag::build(&snap, &options);
    let mut prev_xds =
        xds::Snapshot::from_resources(&translate::build(&prev_dag, &translate_options));
    assert!(
        !prev_xds.of(translate::ResourceType::Cluster).is_empty(),
        "synthetic cluster has clusters"
    );
    let times: Vec<Times> = (0..runs)
        .map(|_| {
            let t0 = Instant::now();
            let d = dag::build(&snap, &options);
            let t1 = Instant::now();
            let resources = translate::build(&d, &translate_options);
            let t2 = Instant::now();
            let x = xds::Snapshot::from_resources(&resources);
            let t3 = Instant::now();
            drop(resources);
            prev_dag = std::hint::black_box(d);
            prev_xds = std::hint::black_box(x);
            let t4 = Instant::now();
            let ms = |a: Instant, b: Instant| (b - a).as_secs_f64() * 1e3;
            Times {
                dag: ms(t0, t1),
                translate: ms(t1, t2),
                encode: ms(t2, t3),
                drop: ms(t3, t4),
                total: ms(t0, t4),
            }
        })
        .collect();
    drop((prev_dag, prev_xds));
    let phase = |f: fn(&Times) -> f64| median(times.iter().map(f).collect());
    let m = Medians {
        dag_only,
        dag: phase(|t| t.dag),
        translate: phase(|t| t.translate),
        encode: phase(|t| t.encode),
        drop: phase(|t| t.drop),
        total: phase(|t| t.total),
    };
    println!(
        "{n:>6} routing objects, {:>6} services, {:>6} endpoints (median of {runs}):",
        snap.services.len(),
        endpoints
    );
    println!(
        "  dag::build alone                      {:8.2} ms",
        m.dag_only
    );
    println!(
        "  full rebuild                          {:8.2} ms = dag {:.2} + translate {:.2} + encode {:.2} + drop previous {:.2}",
        m.total, m.dag, m.translate, m.encode, m.drop
    );
    m
}

fn main() {
    let smoke = common::smoke();
    let (small, large, runs) = if smoke {
        (100, 1_000, 3)
    } else {
        (1_000, 10_000, 9)
    };
    // Exploration knob (profiling one size): DAG_BENCH_ONLY=10000 [DAG_BENCH_RUNS=1] runs that size
    // alone and records nothing.
    if let Ok(n) = std::env::var("DAG_BENCH_ONLY") {
        let runs = std::env::var("DAG_BENCH_RUNS")
            .ok()
            .and_then(|r| r.parse().ok())
            .unwrap_or(runs);
        row(n.parse().expect("DAG_BENCH_ONLY is a number"), runs);
        return;
    }
    let a = row(small, runs);
    let b = row(large, runs);
    let factor = large / small;
    let ratio = b.total / a.total;
    let dag_ratio = b.dag_only / a.dag_only;
    println!(
        "scaling {large}/{small} ({factor}x objects): full rebuild {ratio:.1}x time, dag::build alone {dag_ratio:.1}x"
    );
    if !smoke {
        let r2 = |v: f64| serde_json::json!((v * 100.0).round() / 100.0);
        let mut results = serde_json::Map::new();
        results.insert("dag_build_ms_10k".into(), r2(b.total));
        results.insert("dag_only_build_ms_10k".into(), r2(b.dag_only));
        results.insert("translate_ms_10k".into(), r2(b.translate + b.encode));
        results.insert("dag_scaling_ratio_10k_1k".into(), r2(ratio));
        results.insert("dag_only_scaling_ratio_10k_1k".into(), r2(dag_ratio));
        common::write_results(results);
    }
}
