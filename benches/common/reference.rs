//! A fixed reference workload that uses none of sluice's code, timed beside a benchmark so a
//! result can be read against the speed of the machine in the same minute.
//!
//! The VMs the benchmarks run on change speed by half within minutes (the host's CPU, not the
//! code under test: docs/benchmarks.md). A time divided by the reference's time, measured in the
//! same run, stays comparable across such minutes where the time alone does not. The workload
//! is of the same kind as a full rebuild (many small allocations, hashing, sorting strings,
//! a tree built and walked, bytes written, everything freed), and it never changes: a change
//! of it makes every earlier ratio incomparable.

use std::collections::{BTreeMap, HashMap};
use std::hint::black_box;
use std::time::Instant;

/// How many host names the workload makes (each with three paths), on each of two threads: some
/// ten megabytes each, more than the caches hold, as a 10k rebuild's memory is.
const HOSTS: usize = 40_000;

/// The same in a smoke run (`common::smoke`), which only keeps the code working.
const SMOKE_HOSTS: usize = 500;

/// One run of the workload: `hosts` host names and their paths made, grouped in a hash map,
/// sorted, put in a B-tree, written out as length-prefixed bytes and freed. Returns the bytes'
/// length (so nothing is optimized away).
fn workload(hosts: usize) -> usize {
    // xorshift64: the same names in every run and on every machine.
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut by_host: HashMap<String, Vec<String>> = HashMap::new();
    for i in 0..hosts {
        let r = next();
        let host = format!("app-{:x}-{i}.ns{}.example.com", r >> 40, r % 97);
        let paths = by_host.entry(host).or_default();
        for p in 0..3 {
            paths.push(format!("/api/v{p}/{:x}", next() >> 48));
        }
    }
    let mut sorted: Vec<(String, Vec<String>)> = by_host.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (_, paths) in &mut sorted {
        paths.sort_unstable_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
    }
    let tree: BTreeMap<String, Vec<String>> = sorted.into_iter().collect();
    let mut out = Vec::new();
    for (host, paths) in &tree {
        out.extend_from_slice(&(host.len() as u32).to_le_bytes());
        out.extend_from_slice(host.as_bytes());
        for p in paths {
            out.extend_from_slice(&(p.len() as u16).to_le_bytes());
            out.extend_from_slice(p.as_bytes());
        }
    }
    let len = out.len();
    drop(black_box(tree));
    drop(black_box(out));
    len
}

/// The times of `runs` runs of the workload, in ms: each run the workload on two threads at once
/// (sluice's path from nothing uses both of the machine's two cores), timed until both end.
pub fn times(runs: usize) -> Vec<f64> {
    let hosts = if super::smoke() { SMOKE_HOSTS } else { HOSTS };
    let mut lengths = Vec::with_capacity(runs);
    let times = (0..runs)
        .map(|_| {
            let t = Instant::now();
            let (a, b) = std::thread::scope(|s| {
                let other = s.spawn(|| workload(hosts));
                let a = workload(hosts);
                (
                    a,
                    other
                        .join()
                        .expect("the reference workload's second thread"),
                )
            });
            assert_eq!(a, b);
            lengths.push(black_box(a));
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    assert!(
        lengths.windows(2).all(|w| w[0] == w[1]),
        "the reference workload does the same work every run"
    );
    times
}

/// The bytes the memory latency probe walks: more than a VM's share of a last-level cache,
/// as a 10k build's memory is.
const LATENCY_BYTES: usize = 64 << 20;

/// The same in a smoke run.
const SMOKE_LATENCY_BYTES: usize = 1 << 20;

/// The machine's memory latency, in ns: the time of one load that depends on the one before,
/// over `LATENCY_BYTES` of memory visited in an order no prefetcher follows (the median of five
/// walks of a million loads each).
///
/// The reference workload above fits in the caches of some VMs and not of others; a build of
/// 10k objects does not fit in any, and waits on memory for much of its time (docs/benchmarks.md,
/// "Reading the numbers"). This number tells how long that wait is on the machine of a run, so two
/// machines' results can be told apart by it. Each slot holds the next slot to visit: slot `i`
/// holds `(a * i + c) mod n`, a full-period linear congruential sequence (n a power of two, `c`
/// odd, `a` one more than a multiple of four), so the walk visits every slot once per cycle, each
/// step a distance from the last that changes from step to step.
pub fn memory_latency_ns() -> f64 {
    let bytes = if super::smoke() {
        SMOKE_LATENCY_BYTES
    } else {
        LATENCY_BYTES
    };
    let n = bytes / std::mem::size_of::<u32>();
    let mask = (n - 1) as u64;
    const A: u64 = 0x5851_F42D_4C95_7F2D; // ≡ 1 (mod 4)
    const C: u64 = 0x1405_7B7E_F767_814F; // odd
    let next: Vec<u32> = (0..n as u64)
        .map(|i| (A.wrapping_mul(i).wrapping_add(C) & mask) as u32)
        .collect();
    let loads = 1_000_000;
    let mut times: Vec<f64> = (0..5)
        .map(|_| {
            let mut at = 0u32;
            let t = Instant::now();
            for _ in 0..loads {
                at = next[at as usize];
            }
            black_box(at);
            t.elapsed().as_secs_f64() * 1e9 / loads as f64
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}
