#!/usr/bin/env bash
# Builds the upstream Gateway API conformance suite (the release pinned in go.mod here) for
# `make conformance` (e2e/conformance.sh) into e2e/.cache/gwapi/<version>/:
#   conformance.test  `go test -c sigs.k8s.io/gateway-api/conformance`, the upstream package
#                     unmodified (its TestConformance is conformance.RunConformance(t))
#   echo-basic        the suite's backend (sigs.k8s.io/gateway-api/conformance/echo-basic,
#                     CGO_ENABLED=0), run by the pod runner for the suite's echo-basic image
#   crds.yaml         the release's CustomResourceDefinitions, experimental channel (a superset
#                     of standard; the suite wants one bundle version and one channel), without
#                     the ValidatingAdmissionPolicy file
#   conformance-summary  summary/ here: per-profile counts from the suite's log and report
# The modules come from the Go module proxy, checked against go.sum. A rerun with the three
# files present is a no-op. Prints the directory on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"
# shellcheck source=e2e/tools/go-env.sh
source "$here/../go-env.sh"

version="$(awk '$1=="sigs.k8s.io/gateway-api/conformance"{print $2; exit}' go.mod)"
api_version="$(awk '$1=="sigs.k8s.io/gateway-api"{print $2; exit}' go.mod)"
if [[ -z "$version" || "$version" != "$api_version" ]]; then
	echo "gwapi/build.sh: go.mod must require sigs.k8s.io/gateway-api and .../conformance at one version (got '${api_version}' and '${version}')" >&2
	exit 1
fi
out="$(cd "$here/../.." && pwd)/.cache/gwapi/${version}"
if [[ -x "$out/conformance.test" && -x "$out/echo-basic" && -s "$out/crds.yaml" &&
	-x "$out/conformance-summary" && "$out/conformance-summary" -nt summary/main.go ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"
e2e_go_env gwapi/build.sh
# go.mod and go.sum are complete (go mod tidy): nothing may change them during a build.
export GOFLAGS="${GOFLAGS:-} -mod=readonly"

t0=$(date +%s)
if [[ ! -x "$out/conformance.test" ]]; then
	echo "gwapi/build.sh: building the conformance suite sigs.k8s.io/gateway-api/conformance ${version} (go test -c)" >&2
	go test -c -trimpath -o "$out/conformance.test.tmp" sigs.k8s.io/gateway-api/conformance
	mv "$out/conformance.test.tmp" "$out/conformance.test"
fi
if [[ ! -x "$out/echo-basic" ]]; then
	echo "gwapi/build.sh: building sigs.k8s.io/gateway-api/conformance/echo-basic ${version}" >&2
	CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o "$out/echo-basic.tmp" \
		sigs.k8s.io/gateway-api/conformance/echo-basic
	mv "$out/echo-basic.tmp" "$out/echo-basic"
fi
if [[ ! -x "$out/conformance-summary" || summary/main.go -nt "$out/conformance-summary" ]]; then
	echo "gwapi/build.sh: building conformance-summary" >&2
	go build -trimpath -o "$out/conformance-summary.tmp" ./summary
	mv "$out/conformance-summary.tmp" "$out/conformance-summary"
fi
if [[ ! -s "$out/crds.yaml" ]]; then
	dir="$(go list -m -f '{{.Dir}}' sigs.k8s.io/gateway-api)"
	crd_dir="$dir/config/crd/experimental"
	tmp="$out/crds.yaml.tmp"
	: >"$tmp"
	n=0
	for f in "$crd_dir"/*.yaml; do
		case "$(basename "$f")" in
		kustomization.yaml | *_vap_*) continue ;; # not a CustomResourceDefinition
		esac
		grep -q "gateway.networking.k8s.io/bundle-version: ${version}" "$f" || {
			echo "gwapi/build.sh: $f has no bundle-version ${version} annotation" >&2
			exit 1
		}
		printf -- '---\n' >>"$tmp"
		cat "$f" >>"$tmp"
		n=$((n + 1))
	done
	mv "$tmp" "$out/crds.yaml"
	echo "gwapi/build.sh: ${n} CustomResourceDefinitions of Gateway API ${version} (experimental channel)" >&2
fi
echo "gwapi/build.sh: built in $(( $(date +%s) - t0 ))s" >&2
echo "$out"
