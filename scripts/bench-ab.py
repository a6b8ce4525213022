#!/usr/bin/env python3
"""Compares two builds of one benchmark on a noisy machine: runs them alternately, in pairs, and
prints for each timing both medians and the median of the per-pair ratios (new / base), which
the machine's drift from minute to minute moves much less than either time.

Usage:
    scripts/bench-ab.py [--pairs N] [--match REGEX] BASE NEW [-- ARG ...]

BASE and NEW are benchmark binaries (for example two copies of
`target/release/deps/dag-<hash>` built at two commits, from `cargo bench --bench dag --no-run`);
each run gets ARG ... (default: `--bench`) and this script's environment, so the benchmarks'
own knobs apply (`DAG_BENCH_ONLY=10000 DAG_BENCH_RUNS=9 scripts/bench-ab.py base new`).
The order alternates (base first in odd pairs, new first in even ones), so a machine that
speeds up or slows down during the comparison favours neither.

A timing is every output line holding a number followed by "ms": its name is the text before
that number, its value the number (the first such number of the line); a name printed again
(the same timing at another size) is numbered (" #2"). --match keeps the
timings whose name matches REGEX. Exits non-zero when a run fails or a timing is missing
from a run.
"""
import argparse
import re
import statistics
import subprocess
import sys

TIMING = re.compile(r"^(?P<name>.*?)\s*(?P<value>\d+(?:\.\d+)?)\s*ms\b")


def timings(output, keep):
    """The timings of one run's output, by name, in the order they appear."""
    found = {}
    for line in output.splitlines():
        m = TIMING.match(line.strip())
        if not m:
            continue
        name = " ".join(m.group("name").rstrip(" :=").split())
        if not name or not keep.search(name):
            continue
        # A name printed again (the same timing at another size) gets its ordinal.
        n, k = name, 1
        while n in found:
            k += 1
            n = f"{name} #{k}"
        found[n] = float(m.group("value"))
    return found


def run(binary, args):
    p = subprocess.run([binary, *args], capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"bench-ab: {binary} exited with {p.returncode}:\n{p.stderr[-2000:]}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=6, help="pairs of runs (default 6)")
    ap.add_argument("--match", default="", help="keep the timings whose name matches REGEX")
    ap.add_argument("base")
    ap.add_argument("new")
    ap.add_argument("args", nargs="*", default=["--bench"])
    a = ap.parse_args()
    if a.pairs < 1:
        sys.exit("bench-ab: --pairs must be at least 1")
    keep = re.compile(a.match)
    runs = {"base": [], "new": []}
    for i in range(a.pairs):
        order = ["base", "new"] if i % 2 == 0 else ["new", "base"]
        for which in order:
            binary = a.base if which == "base" else a.new
            runs[which].append(timings(run(binary, a.args), keep))
        print(f"pair {i + 1}/{a.pairs} done", file=sys.stderr)
    names = list(runs["base"][0])
    if not names:
        sys.exit("bench-ab: no timing found in the output (a line with a number followed by 'ms')")
    print(f"{a.pairs} pairs, alternated; medians, and the median of the per-pair ratios new / base")
    print()
    print("| timing | base | new | new / base | pairs new faster |")
    print("|---|---|---|---|---|")
    for name in names:
        missing = [w for w in runs for r in runs[w] if name not in r]
        if missing:
            sys.exit(f"bench-ab: {name!r} is missing from a run of {missing[0]}")
        base = [r[name] for r in runs["base"]]
        new = [r[name] for r in runs["new"]]
        ratios = [n / b for b, n in zip(base, new) if b > 0]
        ratio = f"{statistics.median(ratios):.3f}" if ratios else "–"
        faster = sum(n < b for b, n in zip(base, new))
        print(
            f"| {name} | {statistics.median(base):.2f} | {statistics.median(new):.2f} "
            f"| {ratio} | {faster} of {a.pairs} |"
        )


if __name__ == "__main__":
    main()
