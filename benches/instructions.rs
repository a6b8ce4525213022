//! Instructions of one full `dag::build`, counted by callgrind (valgrind): for the same binary and
//! input the count moves by ~0.2% from run to run (hash tables are seeded at random) however busy
//! the machine is, so two commits compare here where timings on a shared VM drift by tens of per
//! cent between minutes (docs/benchmarks.md, "Reading the numbers").
//!
//! `cargo bench --bench instructions` counts the build of the `dag` benchmark's 10k cluster
//! (`sluice::synth`): on one thread (`dag_build_one_thread_minstr_10k`, millions) and as sluice
//! builds it, on two threads (`dag_build_minstr_10k`, both threads' instructions: the whole
//! process less the same process stopped before the build); then the translation and encoding
//! of that model from nothing, as `Pipeline::publish` does at start (`translate_minstr_10k`, both
//! threads: the process that also encodes less the one that stops after the build). Time is not
//! counted here: cache misses cost a build more than its instructions do; what this tells is the
//! work, and, for the one-thread build, the data misses of a simulated 512 KiB second-level cache
//! (`dag_build_one_thread_l2_misses_k_10k`, thousands; callgrind's cache simulation, as
//! repeatable as its instruction count): the memory the build waits on.
//!
//! The benchmark runs itself under valgrind, the child building the snapshot and then the model
//! in `counted_dag_build`. The smoke run (`cargo test --all-targets`) does the same for a
//! 200-object cluster, or builds it in-process when valgrind is not installed.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use sluice::dag::{self, Dag, Options};
use sluice::store::Snapshot;
use sluice::translate;

/// Set in the child: `<routing objects>:<one|two|encode|none>`.
const CHILD: &str = "SLUICE_INSTRUCTIONS_CHILD";

#[derive(Clone, Copy)]
enum Build {
    /// `dag::build_on_one_thread`, counted on its own (callgrind's collection toggled on it).
    OneThread,
    /// `dag::build`, as sluice calls it: two threads from 2,000 routing objects on.
    AsSluice,
    /// `dag::build` as sluice calls it, then a new encoder's xDS snapshot of the model.
    Encode,
    /// No build: the rest of the process, to subtract.
    None,
}

impl Build {
    fn name(self) -> &'static str {
        match self {
            Build::OneThread => "one",
            Build::AsSluice => "two",
            Build::Encode => "encode",
            Build::None => "none",
        }
    }

    fn parse(s: &str) -> Option<Build> {
        [
            Build::OneThread,
            Build::AsSluice,
            Build::Encode,
            Build::None,
        ]
        .into_iter()
        .find(|b| b.name() == s)
    }
}

#[inline(never)]
fn counted_dag_build(snapshot: &Snapshot, options: &Options, build: Build) -> Option<Dag> {
    match build {
        Build::OneThread => Some(dag::build_on_one_thread(snapshot, options)),
        Build::AsSluice | Build::Encode => Some(dag::build(snapshot, options)),
        Build::None => None,
    }
}

/// The child: builds the cluster, then (maybe) the model. Nothing is dropped, so the count of a
/// run with a build less one without is the build's alone.
fn child(spec: &str) {
    let (n, build) = spec
        .split_once(':')
        .and_then(|(n, b)| Some((n.parse().ok()?, Build::parse(b)?)))
        .unwrap_or_else(|| panic!("{CHILD}={spec:?}: expected <objects>:<one|two|encode|none>"));
    let snapshot = common::cluster(n);
    let model = counted_dag_build(&snapshot, &Options::default(), build).map(Arc::new);
    if let Some(m) = &model {
        assert!(!m.vhosts.is_empty(), "the synthetic cluster routes");
    }
    let encoded = match (&model, build) {
        (Some(m), Build::Encode) => {
            let mut encoder = translate::incremental::Encoder::new(translate::Options::default());
            let (xds, _) = encoder.encode(m);
            assert!(
                !xds.of(translate::ResourceType::Cluster).is_empty(),
                "the model's clusters are encoded"
            );
            Some((xds, encoder))
        }
        _ => None,
    };
    std::mem::forget((std::hint::black_box((model, encoded)), snapshot));
}

/// What callgrind counted in one run of this binary as a child: instructions, and with
/// `cache_sim` the data misses of a simulated second-level cache.
struct Counts {
    instructions: u64,
    l2_data_misses: Option<u64>,
}

/// The simulated cache whose data misses are counted: 512 KiB, 8 ways, 64-byte lines, the size of
/// this VM's per-core L2 (callgrind simulates a first level and a last one; this is the last).
/// Misses of it are what a build waits on memory for, counted the same way on any machine.
const SIMULATED_L2: &str = "--LL=524288,8,64";

/// Counts one run of this binary as a child.
fn count(n: usize, build: Build, cache_sim: bool) -> Counts {
    let out = std::env::temp_dir().join(format!(
        "sluice-instructions-{}-{}.callgrind",
        std::process::id(),
        build.name()
    ));
    let mut cmd = Command::new("valgrind");
    cmd.arg("--tool=callgrind")
        .arg(format!("--callgrind-out-file={}", out.display()));
    if let Build::OneThread = build {
        cmd.arg("--toggle-collect=*counted_dag_build*");
    }
    if cache_sim {
        cmd.args(["--cache-sim=yes", SIMULATED_L2]);
    }
    let run = cmd
        .arg(std::env::current_exe().expect("the benchmark's own path"))
        .env(CHILD, format!("{n}:{}", build.name()))
        .output()
        .expect("valgrind runs");
    assert!(
        run.status.success(),
        "valgrind --tool=callgrind of a {n}-object build ({}) failed: {}\n{}",
        build.name(),
        run.status,
        String::from_utf8_lossy(&run.stderr)
    );
    let totals = read_totals(&out);
    let _ = std::fs::remove_file(&out);
    let event = |name: &str| totals.iter().find(|(e, _)| e == name).map(|&(_, v)| v);
    Counts {
        instructions: event("Ir").unwrap_or_else(|| panic!("callgrind counted no instructions")),
        // Read and write misses of the last level's data (`DLmr`, `DLmw`).
        l2_data_misses: cache_sim.then(|| {
            event("DLmr").expect("cache simulation's read misses")
                + event("DLmw").expect("cache simulation's write misses")
        }),
    }
}

/// The event totals of a callgrind output file: each name of its `events:` line with its value
/// on the `summary:` (or `totals:`) line.
fn read_totals(path: &Path) -> Vec<(String, u64)> {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("callgrind wrote no {}: {e}", path.display()));
    let line = |prefix: &str| text.lines().find_map(|l| l.strip_prefix(prefix));
    let names = line("events:").unwrap_or_else(|| panic!("no events in {}", path.display()));
    let values = line("summary:")
        .or_else(|| line("totals:"))
        .unwrap_or_else(|| panic!("no total in {}", path.display()));
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .map(|(name, v)| {
            let v = v
                .parse()
                .unwrap_or_else(|_| panic!("{name} total {v:?} in {}", path.display()));
            (name.to_string(), v)
        })
        .collect()
}

fn valgrind_installed() -> bool {
    Command::new("valgrind")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn main() {
    if let Ok(spec) = std::env::var(CHILD) {
        child(&spec);
        return;
    }
    let smoke = common::smoke();
    let n = if smoke { 200 } else { 10_000 };
    if !valgrind_installed() {
        assert!(
            smoke,
            "the instructions benchmark needs valgrind (Debian: apt-get install valgrind)"
        );
        println!(
            "instructions: valgrind not installed; building the {n}-object cluster in-process"
        );
        child(&format!("{n}:two"));
        return;
    }
    let one_counts = count(n, Build::OneThread, true);
    let one = one_counts.instructions;
    let misses = one_counts
        .l2_data_misses
        .expect("the one-thread count simulates the caches");
    let with = count(n, Build::AsSluice, false).instructions;
    let encoded = count(n, Build::Encode, false).instructions;
    let without = count(n, Build::None, false).instructions;
    assert!(
        with > without && one > 0 && misses > 0 && encoded > with,
        "a build counts instructions: one thread {one} (L2 data misses {misses}), process with \
         a build {with}, with a build and its encoding {encoded}, without {without}"
    );
    let two = with - without;
    let encode = encoded - with;
    let m = |x: u64| x as f64 / 1e6;
    println!(
        "{n} routing objects, dag::build (callgrind instructions): on one thread {:.1} M, \
         as sluice builds it {:.1} M (two threads from 2,000 objects: both threads' count); \
         then translate and encode from nothing {:.1} M (both threads)",
        m(one),
        m(two),
        m(encode)
    );
    println!(
        "on one thread, data misses of a simulated 512 KiB L2 (callgrind {SIMULATED_L2}): \
         {:.1} k, {:.2} per thousand instructions",
        misses as f64 / 1e3,
        misses as f64 * 1e3 / one as f64
    );
    if !smoke {
        let mut r = serde_json::Map::new();
        r.insert(
            "dag_build_one_thread_minstr_10k".into(),
            common::round3(m(one)),
        );
        r.insert("dag_build_minstr_10k".into(), common::round3(m(two)));
        r.insert("translate_minstr_10k".into(), common::round3(m(encode)));
        r.insert(
            "dag_build_one_thread_l2_misses_k_10k".into(),
            common::round3(misses as f64 / 1e3),
        );
        common::write_results(r);
    }
}
