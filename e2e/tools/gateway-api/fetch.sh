#!/usr/bin/env bash
# Fetches the Gateway API CustomResourceDefinitions (the release the gateway-api crate sluice
# builds on models) from the Go module proxy, checks the module against its pinned hash, and
# writes the kinds sluice reads (experimental channel: it has TLSRoute and TCPRoute too) into
#   e2e/.cache/gateway-api/<version>/crds.yaml
# A rerun with the file present is a no-op. Prints the directory on stdout.
set -euo pipefail

version=v1.5.1
# The module's hash (go.sum's h1: form), as `go mod download -json` reports it.
sum="h1:RqVRIlkhLhUO8wOHKTLnTJA6o/1un4po4/6M1nRzdd0="
kinds=(gatewayclasses gateways httproutes grpcroutes tlsroutes tcproutes referencegrants)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="$(cd "$here/../.." && pwd)/.cache/gateway-api/${version}"
if [[ -s "$out/crds.yaml" ]]; then
	echo "$out"
	exit 0
fi
mkdir -p "$out"

# shellcheck source=e2e/tools/go-env.sh
source "$here/../go-env.sh"
e2e_go_env gateway-api/fetch.sh

# The pinned hash above is the check the checksum database would make.
info="$(cd "$out" && GOSUMDB=off GOFLAGS= go mod download -json "sigs.k8s.io/gateway-api@${version}")"
field() { python3 -c 'import json,sys; print(json.load(sys.stdin)[sys.argv[1]])' "$1" <<<"$info"; }
got="$(field Sum)"
if [[ "$got" != "$sum" ]]; then
	echo "gateway-api/fetch.sh: sigs.k8s.io/gateway-api@${version} has hash $got, not $sum" >&2
	exit 1
fi
dir="$(field Dir)"
tmp="$out/crds.yaml.tmp"
: >"$tmp"
for kind in "${kinds[@]}"; do
	printf -- '---\n' >>"$tmp"
	cat "$dir/config/crd/experimental/gateway.networking.k8s.io_${kind}.yaml" >>"$tmp"
done
mv "$tmp" "$out/crds.yaml"
echo "gateway-api/fetch.sh: CustomResourceDefinitions of Gateway API ${version} in $out" >&2
echo "$out"
