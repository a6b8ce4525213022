#!/usr/bin/env bash
# Bounded coverage-guided fuzzing of the admission path (decode + validation + router) with
# cargo-fuzz (libFuzzer, nightly toolchain). FUZZ_SECONDS bounds the run (default 60).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! rustup toolchain list | grep -q '^nightly'; then
    echo "fuzz: the nightly toolchain is needed (rustup toolchain install nightly)" >&2
    exit 1
fi
if ! command -v cargo-fuzz >/dev/null; then
    cargo install --locked cargo-fuzz
fi
mkdir -p fuzz/corpus/admission
cd fuzz
exec cargo +nightly fuzz run admission corpus/admission ../tests/fixtures/admission -- \
    -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=4096
