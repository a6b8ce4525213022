//! `dag::build` over synthetic clusters: prints the build time at 1k and 10k routing objects and the
//! ratio (linear scaling gives ~10; O(n²) would give ~100). Writes its keys into
//! target/bench/results.json.
//!
//! `cargo bench --bench dag` runs the full sizes. Run any other way (`cargo test --all-targets` runs
//! it in the test profile) it does a small smoke run so the benchmark cannot rot, and records nothing.

use std::time::Instant;

use sluice::dag::{self, Options};
use sluice::synth::{Shape, snapshot};

fn median_ms(runs: usize, mut f: impl FnMut()) -> f64 {
    let mut times: Vec<f64> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(|a, b| a.total_cmp(b));
    times[times.len() / 2]
}

fn main() {
    // `cargo bench` passes --bench; anything else is a smoke run.
    let smoke = !std::env::args().any(|a| a == "--bench");
    let (small, large, runs) = if smoke {
        (100, 1_000, 3)
    } else {
        (1_000, 10_000, 9)
    };
    let options = Options::default();
    let mut results = serde_json::Map::new();
    let row = |n: usize| -> f64 {
        let snap = snapshot(Shape {
            routing_objects: n,
            endpoints_per_service: 5,
            unrelated_secrets: n,
        });
        let built = dag::build(&snap, &options);
        assert!(built.vhosts.len() >= n / 2, "synthetic cluster routes");
        let ms = median_ms(runs, || {
            std::hint::black_box(dag::build(&snap, &options));
        });
        println!(
            "dag::build  {n:>6} routing objects, {:>6} services, {:>6} endpoints: {ms:8.2} ms (median of {runs})",
            snap.services.len(),
            snap.endpoint_slices
                .values()
                .map(|s| s.endpoints.len())
                .sum::<usize>()
        );
        ms
    };
    let a = row(small);
    let b = row(large);
    let ratio = b / a;
    println!(
        "scaling {large}/{small}: {ratio:.1}x time for {}x objects",
        large / small
    );
    if !smoke {
        results.insert(
            "dag_only_build_ms_10k".into(),
            serde_json::json!((b * 100.0).round() / 100.0),
        );
        results.insert(
            "dag_only_scaling_ratio_10k_1k".into(),
            serde_json::json!((ratio * 100.0).round() / 100.0),
        );
        write_results(results);
    }
}

/// Merges keys into target/bench/results.json (other benchmarks write their own keys).
fn write_results(new: serde_json::Map<String, serde_json::Value>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/bench");
    std::fs::create_dir_all(&dir).expect("target/bench is writable");
    let path = dir.join("results.json");
    let mut all: serde_json::Map<String, serde_json::Value> = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    all.extend(new);
    std::fs::write(&path, serde_json::to_string_pretty(&all).unwrap())
        .expect("results.json is writable");
}
