#!/usr/bin/env bash
# Builds Contour (the release pinned in go.mod here) for the side-by-side benchmark
# (benches/contour.rs) into e2e/.cache/contour/<version>/, with the CustomResourceDefinitions
# of that release beside it (crds.yaml, from the module's examples/contour/01-crds.yaml).
# A rerun with both present is a no-op. Prints the directory on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

version="$(awk '$1=="require" && $2=="github.com/projectcontour/contour"{print $3; exit}' go.mod)"
out="$(cd "$here/../.." && pwd)/.cache/contour/${version}"
if [[ -x "$out/contour" && -s "$out/crds.yaml" ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"

# shellcheck source=e2e/tools/go-env.sh
source "$here/../go-env.sh"
e2e_go_env contour/build.sh
export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"

t0=$(date +%s)
echo "contour/build.sh: building github.com/projectcontour/contour/cmd/contour ${version}" >&2
go build -trimpath -ldflags="-s -w" -o "$out/contour.tmp" github.com/projectcontour/contour/cmd/contour
src="$(go list -m -f '{{.Dir}}' github.com/projectcontour/contour)"
install -m 0644 "$src/examples/contour/01-crds.yaml" "$out/crds.yaml.tmp"
mv "$out/crds.yaml.tmp" "$out/crds.yaml"
mv "$out/contour.tmp" "$out/contour"
echo "contour/build.sh: built in $(( $(date +%s) - t0 ))s" >&2
echo "$out"
