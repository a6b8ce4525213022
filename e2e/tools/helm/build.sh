#!/usr/bin/env bash
# Builds Helm (the release pinned in go.mod here) for the e2e test of charts/sluice
# (e2e/tests/chart.rs) into e2e/.cache/helm/<version>/helm.
# A rerun with the binary present is a no-op. Prints the binary's path on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# shellcheck source=e2e/tools/go-env.sh
source "$here/../go-env.sh"

version="$(awk '$1=="require" && $2=="helm.sh/helm/v3"{print $3; exit}' go.mod)"
out="$(cd "$here/../.." && pwd)/.cache/helm/${version}"
if [[ -x "$out/helm" ]]; then
	echo "$out/helm"
	exit 0
fi
mkdir -p "$out"
e2e_go_env helm/build.sh
export CGO_ENABLED=0 GOFLAGS="${GOFLAGS:-} -mod=mod"

t0=$(date +%s)
echo "helm/build.sh: building helm.sh/helm/v3/cmd/helm ${version}" >&2
go build -trimpath -ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${version}" \
	-o "$out/helm.tmp" helm.sh/helm/v3/cmd/helm
mv "$out/helm.tmp" "$out/helm"
echo "helm/build.sh: built in $(( $(date +%s) - t0 ))s" >&2
echo "$out/helm"
