#!/usr/bin/env bash
# Bounded coverage-guided fuzzing of the admission path (decode + validation + router) with
# cargo-fuzz (libFuzzer, nightly toolchain). FUZZ_SECONDS bounds the run (default 60).
# sluice forbids unsafe code, so the build skips AddressSanitizer and uses the dev profile: libFuzzer
# still guides the search by coverage and catches panics, aborts and timeouts, and the build takes a
# fraction of the time (FUZZ_FLAGS overrides, e.g. FUZZ_FLAGS="--sanitizer address --release").
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
# shellcheck disable=SC2086
exec cargo +nightly fuzz run ${FUZZ_FLAGS:---sanitizer none --dev} admission corpus/admission ../tests/fixtures/admission -- \
    -max_total_time="${FUZZ_SECONDS:-60}" -rss_limit_mb=4096
