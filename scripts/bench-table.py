#!/usr/bin/env python3
"""Prints target/bench/results.json (written by `make bench`) as a Markdown table against the
targets, then every other key the benchmarks recorded. Usage: scripts/bench-table.py [FILE]"""
import json
import sys

# key, what, target (measured value must be <= target)
TARGETS = [
    ("dag_build_ms_10k", "full build at start (Pipeline::publish: dag::build + translate + encode), 10k routing objects", 20),
    ("change_push_ms_10k", "one routing object changed → delta push received, 10k (p50)", 1),
    ("webhook_p99_ms_10", "webhook p99 at 1000 req/s, 10 objects indexed", 2),
    ("webhook_p99_ms_10k", "webhook p99 at 1000 req/s, 10k objects indexed", 2),
    ("rss_mib_10k", "RSS steady, cluster mode, 10k routes + 30k unrelated Secrets", 100),
    ("rss_peak_mib_10k", "RSS peak, same", 200),
    ("propagation_p50_ms_5k", "create → first 200 through Envoy, 5k routes (p50)", 50),
    ("propagation_p99_ms_5k", "same (p99)", 150),
    ("status_1000_s", "1000 new objects → all statuses written", 1),
    ("status_writes_idle", "status writes in 60 s with no changes", 0),
]


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "target/bench/results.json"
    try:
        with open(path) as f:
            results = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f"bench-table: cannot read {path}: {e}")
    print("| key | what | target | measured | |")
    print("|---|---|---|---|---|")
    for key, what, target in TARGETS:
        value = results.get(key)
        if value is None:
            verdict, shown = "not measured", "—"
        else:
            verdict, shown = ("met" if value <= target else "**missed**"), f"{value:g}"
        print(f"| `{key}` | {what} | ≤ {target:g} | {shown} | {verdict} |")
    # The same targets measured with a fixed number of route shards (docs/xds.md, "Route
    # shards"; 1: one route configuration): the keys the benchmarks record as `shardsN_<key>`
    # when run with BENCH_HTTP_ROUTE_SHARDS=N.
    sharded = [(k, key) for k in sorted(results) for key, _, _ in TARGETS
               if k.startswith("shards") and k.endswith("_" + key)
               and k[len("shards"):-len(key) - 1].isdigit()]
    if sharded:
        print()
        print("| key, with N route shards (`shardsN_`) | target | measured | |")
        print("|---|---|---|---|")
        for k, key in sharded:
            target = next(t for tk, _, t in TARGETS if tk == key)
            value = results[k]
            verdict = "met" if value <= target else "**missed**"
            print(f"| `{k}` | ≤ {target:g} | {value:g} | {verdict} |")
    known = {k for k, _, _ in TARGETS} | {k for k, _ in sharded}
    extra = sorted(k for k in results if k not in known)
    if extra:
        print()
        print("| other key | measured |")
        print("|---|---|")
        for k in extra:
            print(f"| `{k}` | {results[k]:g} |")


if __name__ == "__main__":
    main()
