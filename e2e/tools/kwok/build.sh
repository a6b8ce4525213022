#!/usr/bin/env bash
# Builds kwok (the release pinned in go.mod here), which plays the kubelet of the e2e Node for
# the Pods the harness runs (e2e/lib/pods.sh), into e2e/.cache/kwok/<version>/kwok, and copies
# next to it what kwok needs at run time from the same module: the stages kwokctl installs by
# default (stages/*.yaml: node-initialize, node-heartbeat-with-lease, pod-ready, pod-complete,
# pod-delete) and the Logs CustomResourceDefinition (crd-logs.yaml).
# A rerun with everything present is a no-op. Prints the directory on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# shellcheck source=e2e/tools/go-env.sh
source "$here/../go-env.sh"

version="$(awk '$1=="require" && $2=="sigs.k8s.io/kwok"{print $3; exit}' go.mod)"
out="$(cd "$here/../.." && pwd)/.cache/kwok/${version}"
stages=(node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease
	pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete)
complete() {
	[[ -x "$out/kwok" && -f "$out/crd-logs.yaml" ]] || return 1
	local s
	for s in "${stages[@]}"; do [[ -f "$out/stages/${s##*/}.yaml" ]] || return 1; done
}
if complete; then
	echo "$out"
	exit 0
fi
mkdir -p "$out/stages"
e2e_go_env kwok/build.sh
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"

t0=$(date +%s)
src="$(go mod download -json "sigs.k8s.io/kwok@${version}" | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
for s in "${stages[@]}"; do
	cp "$src/kustomize/stage/$s.yaml" "$out/stages/${s##*/}.yaml"
done
cp "$src/kustomize/crd/bases/kwok.x-k8s.io_logs.yaml" "$out/crd-logs.yaml"
chmod -R u+w "$out" # the module cache is read-only
if [[ ! -x "$out/kwok" ]]; then
	echo "kwok/build.sh: building sigs.k8s.io/kwok/cmd/kwok ${version}" >&2
	# The release's version is a constant of the module (pkg/consts.Version): no -X needed.
	go build -trimpath -ldflags="-s -w" -o "$out/kwok.tmp" sigs.k8s.io/kwok/cmd/kwok
	mv "$out/kwok.tmp" "$out/kwok"
fi
echo "kwok/build.sh: done in $(( $(date +%s) - t0 ))s" >&2
echo "$out"
