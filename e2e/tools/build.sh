#!/usr/bin/env bash
# Builds the control-plane binaries the e2e harness needs (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, kubectl) from the pinned Go module in this directory into
#   e2e/.cache/bin/<kubernetes version>-etcd<etcd version>/
# A rerun with the binaries present is a no-op. Prints the bin directory on stdout.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "$here"

k8s_version="$(awk '$1=="k8s.io/kubernetes"{print $2; exit}' go.mod)"
etcd_version="$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2; exit}' go.mod)"
bin="$(dirname "$here")/.cache/bin/${k8s_version}-etcd${etcd_version}"

if [[ -x "$bin/kube-apiserver" && -x "$bin/kubectl" && -x "$bin/etcd" \
	&& -x "$bin/kube-controller-manager" && -x "$bin/kube-scheduler" ]]; then
	echo "$bin"
	exit 0
fi
mkdir -p "$bin"

# shellcheck source=e2e/tools/go-env.sh
source "$here/go-env.sh"
# go.mod says go 1.24.0: an older (>= 1.21) go downloads that toolchain from the module proxy.
e2e_go_env build.sh

export CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:-} -mod=mod"
start=$(date +%s)

minor="${k8s_version#v1.}"; minor="${minor%%.*}"
kver_flags=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	kver_flags+=" -X ${pkg}.gitVersion=${k8s_version} -X ${pkg}.gitMajor=1 -X ${pkg}.gitMinor=${minor}"
	kver_flags+=" -X ${pkg}.gitTreeState=clean -X ${pkg}.buildDate=1970-01-01T00:00:00Z"
done

build() { # out package ldflags
	local out="$1" pkg="$2" ld="$3" t0=$(date +%s)
	echo "build.sh: building $pkg" >&2
	go build -trimpath -ldflags="-s -w $ld" -o "$bin/$out.tmp" "$pkg"
	mv "$bin/$out.tmp" "$bin/$out"
	echo "build.sh: $out built in $(( $(date +%s) - t0 ))s" >&2
}

build etcd go.etcd.io/etcd/server/v3 ""
build kubectl k8s.io/kubernetes/cmd/kubectl "$kver_flags"
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver "$kver_flags"
# The Deployment, ReplicaSet, EndpointSlice, namespace and garbage-collector controllers and the
# scheduler, for the tests that run Pods (the Gateway API conformance suite, the chart's test).
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager "$kver_flags"
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler "$kver_flags"

echo "build.sh: all tools built in $(( $(date +%s) - start ))s" >&2
echo "$bin"
