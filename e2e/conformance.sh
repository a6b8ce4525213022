#!/usr/bin/env bash
# The upstream Gateway API conformance suite (v1.6.1, unmodified: e2e/tools/gwapi) against sluice
# (`make conformance`). Brings up the e2e control plane (e2e/lib/controlplane.sh) with Pods
# (e2e/lib/pods.sh: kube-controller-manager, kube-scheduler, kwok and the pod runner, which runs
# the suite's echo-basic backends as local processes), installs the release's CRDs, sluice's
# CRDs and config, a GatewayClass `sluice`, starts sluice (cluster mode, release build) and a real
# Envoy, runs the suite with the profiles below and the features sluice publishes in the
# GatewayClass's status.supportedFeatures, prints a summary per profile and exits 1 when a test
# that ran failed. Everything it starts is stopped on exit. See docs/conformance.md.
#
#   e2e/conformance.sh                    the whole run; the report goes to docs/conformance/
#   e2e/conformance.sh -test.v=false ...  more flags for conformance.test (after the script's;
#                                         the last of a flag wins)
#   CONFORMANCE_RUN_TEST=HTTPRouteWeight e2e/conformance.sh
#                                         one test (--run-test: its features are not checked);
#                                         the report goes to target/conformance/
#   E2E_KEEP=1 e2e/conformance.sh         keep everything up after the run (Ctrl-C tears down)
#   E2E_KEEP_WORK=1 e2e/conformance.sh    keep the work directory (logs, kubeconfigs, pki)
#
# Environment (all optional):
#   CONFORMANCE_PROFILES    default GATEWAY-HTTP,GATEWAY-TLS,GATEWAY-GRPC,GATEWAY-TCP
#   CONFORMANCE_RUN_TEST    a single test's ShortName
#   CONFORMANCE_SKIP_TESTS  more tests to skip, comma-separated (the report then goes to target/)
#   CONFORMANCE_TIMEOUT     the suite's -test.timeout, default 150m
#   CONFORMANCE_GATEWAY_ADDRESSES  sluice's --gateway-addresses, default 127.0.1.0/24
#   CONFORMANCE_USABLE_ADDRESS / CONFORMANCE_UNUSABLE_ADDRESS  for GatewayStaticAddresses:
#                           default 127.0.1.254 (in the pool) and 127.0.9.9 (loopback, outside it)
#   CONFORMANCE_REPORT      where the report goes (see above for the default)
#   CONFORMANCE_SLUICE      a sluice binary to use instead of `cargo build --release`
#   CONFORMANCE_SLUICE_ADMIN=1  run sluice with the admin kubeconfig instead of the
#                           ServiceAccount of config/rbac.yaml
#   CONFORMANCE_WITHOUT_SLUICE=1  start neither sluice nor Envoy (checks the harness: the suite
#                           then waits for the GatewayClass; use with CONFORMANCE_RUN_TEST, as
#                           features cannot be inferred from a GatewayClass with no status)
#   CONFORMANCE_DEBUG=1     the suite's --debug (every request and response in the log)
#   CONFORMANCE_ORGANIZATION, _PROJECT, _URL, _VERSION, _CONTACT  the report's implementation
#   SLUICE_E2E_ENVOY        the Envoy binary (default: scripts/ensure-envoy.sh)
#   SLUICE_E2E_IMAGES       more entries for the pod runner's image map (see e2e/podrunner.py)
# The suite's log, sluice's and Envoy's logs end up in target/conformance/.
# Needs root (ports 80 and 443, network namespaces), openssl, curl, python3, iproute2, Go
# (first run builds the tools) and cargo.
set -euo pipefail

E2E_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=e2e/lib/controlplane.sh
source "$E2E_ROOT/e2e/lib/controlplane.sh"
if [[ -f "$E2E_ROOT/e2e/lib/pods.sh" ]]; then
	# shellcheck source=e2e/lib/pods.sh
	source "$E2E_ROOT/e2e/lib/pods.sh"
fi

[[ $(id -u) == 0 ]] || { e2e_log "needs root (ports 80 and 443, ip netns)"; exit 1; }
for tool in openssl curl python3 ip; do
	command -v "$tool" >/dev/null || { e2e_log "missing tool: $tool"; exit 1; }
done

PROFILES="${CONFORMANCE_PROFILES:-GATEWAY-HTTP,GATEWAY-TLS,GATEWAY-GRPC,GATEWAY-TCP}"
GATEWAY_CLASS=sluice
# sluice's default --gateway-controller-name (crates/core/src/dag/mod.rs, DEFAULT_GATEWAY_CONTROLLER_NAME).
CONTROLLER_NAME=sluice.dev/gateway-controller
GATEWAY_ADDRESSES="${CONFORMANCE_GATEWAY_ADDRESSES:-127.0.1.0/24}"
# The pod runner runs this binary for every container whose image starts with one of these
# prefixes. v1.6.1's manifests use registry.k8s.io/gateway-api/echo-basic (tags v1.5.1,
# v1.6.0-dev.2, v1.6.0-dev.3); older releases used the staging registry.
ECHO_IMAGES=(registry.k8s.io/gateway-api/echo-basic gcr.io/k8s-staging-gateway-api/echo-basic)

# Tests that cannot run on these machines (docs/conformance.md, "What cannot run here"). Only
# what the machine cannot do belongs here, never what sluice does not do yet.
SKIP_TESTS=(
	# Its backend is CoreDNS (registry.k8s.io/coredns/coredns, not in the image map: its Pod is
	# Ready but runs nothing) with a Corefile forwarding every query to 8.8.8.8 and 9.9.9.9:
	# traffic off the machine. The other UDPRoute tests use echo-basic and can run.
	UDPRoute
)
if [[ -n "${CONFORMANCE_SKIP_TESTS:-}" ]]; then
	IFS=, read -r -a more <<<"$CONFORMANCE_SKIP_TESTS"
	SKIP_TESTS+=("${more[@]}")
fi
skip_list="$(IFS=,; echo "${SKIP_TESTS[*]}")"

t0=$(date +%s)
E2E_BIN="$("$E2E_ROOT/e2e/tools/build.sh")"
GWAPI="$("$E2E_ROOT/e2e/tools/gwapi/build.sh")"
gwapi_version="$(basename "$GWAPI")"
e2e_log "tools ready in $(( $(date +%s) - t0 ))s: $E2E_BIN, $GWAPI"
if [[ "${CONFORMANCE_WITHOUT_SLUICE:-0}" != 1 ]]; then
	if [[ -n "${CONFORMANCE_SLUICE:-}" ]]; then
		SLUICE="$CONFORMANCE_SLUICE"
	else
		e2e_log "cargo build --release (sluice)"
		(cd "$E2E_ROOT" && cargo build --release --bin sluice)
		SLUICE="$E2E_ROOT/target/release/sluice"
	fi
	if [[ -z "${SLUICE_E2E_ENVOY:-}" ]]; then
		SLUICE_E2E_ENVOY="$("$E2E_ROOT/scripts/ensure-envoy.sh" "$E2E_ROOT")"
	fi
	e2e_log "sluice: $SLUICE; envoy: $SLUICE_E2E_ENVOY"
fi

# Where the report goes: the committed one only from a whole run.
out_dir="$E2E_ROOT/target/conformance"
mkdir -p "$out_dir"
if [[ -n "${CONFORMANCE_REPORT:-}" ]]; then
	REPORT="$CONFORMANCE_REPORT"
elif [[ -z "${CONFORMANCE_RUN_TEST:-}" && -z "${CONFORMANCE_SKIP_TESTS:-}" && $# == 0 &&
	"$PROFILES" == GATEWAY-HTTP,GATEWAY-TLS,GATEWAY-GRPC,GATEWAY-TCP ]]; then
	REPORT="$E2E_ROOT/docs/conformance/gateway-api-${gwapi_version}-experimental-default-report.yaml"
else
	REPORT="$out_dir/gateway-api-${gwapi_version}-report.yaml"
fi
mkdir -p "$(dirname "$REPORT")"
SUITE_LOG="$out_dir/gateway-api-${gwapi_version}.log"

# Envoy binds the suite's listener ports on the Gateways' addresses: nothing may hold them
# there already (an earlier run's Envoy) or on every address (0.0.0.0, [::]).
SUITE_PORTS="80 443 5300 6443 7443 8080 8090 8443 8883 9300 9301 9302 9310 9311 9312 9313 9320 9321"
pool_prefix="${GATEWAY_ADDRESSES%.*}."
busy="$(ss -Hltnp 2>/dev/null | awk -v ports=" $SUITE_PORTS " -v pool="$pool_prefix" '{
	addr = $4; port = addr; sub(/.*:/, "", port); host = substr(addr, 1, length(addr) - length(port) - 1)
	if (index(ports, " " port " ") && (host == "0.0.0.0" || host == "*" || host == "[::]" || index(host, pool) == 1)) print
}')"
if [[ -n "$busy" ]]; then
	e2e_log "these listeners hold ports the Gateways' listeners need (in $GATEWAY_ADDRESSES or on every address):"
	echo "$busy" >&2
	exit 1
fi

E2E_PIDS=()
E2E_WORK="$(mktemp -d /tmp/sluice-conformance.XXXXXX)"
trap e2e_down EXIT
trap 'exit 130' INT TERM

e2e_certs
e2e_etcd
e2e_apiserver
KUBECTL="$E2E_BIN/kubectl"
if declare -F e2e_pods_up >/dev/null; then
	images=""
	for prefix in "${ECHO_IMAGES[@]}"; do images="${images:+$images,}$prefix=$GWAPI/echo-basic"; done
	SLUICE_E2E_IMAGES="${SLUICE_E2E_IMAGES:+$SLUICE_E2E_IMAGES,}$images"
	e2e_pods_up
elif [[ "${CONFORMANCE_WITHOUT_PODS:-0}" == 1 ]]; then
	e2e_log "no e2e/lib/pods.sh: no Pods (CONFORMANCE_WITHOUT_PODS=1), the suite's Setup cannot finish"
else
	e2e_log "e2e/lib/pods.sh is missing: the suite's backends need Pods (CONFORMANCE_WITHOUT_PODS=1 to go on without)"
	exit 1
fi
e2e_log "control plane up in $(( $(date +%s) - t0 ))s: $E2E_APISERVER (work dir $E2E_WORK)"

# The release's CRDs (one bundle version, one channel, as the suite checks), then sluice's own
# CRDs and config as the e2e tests install them (e2e/tests/support/mod.rs), without the webhooks:
# the suite applies objects sluice's webhook would refuse and checks their status instead.
"$KUBECTL" apply --server-side --force-conflicts -f "$GWAPI/crds.yaml" >/dev/null
"$KUBECTL" apply -f "$E2E_ROOT/crds" >/dev/null
for f in namespace.yaml rbac.yaml ingressclass.yaml; do
	"$KUBECTL" apply -f "$E2E_ROOT/config/$f" >/dev/null
done
"$KUBECTL" wait --for=condition=Established crd --all --timeout=60s >/dev/null
"$KUBECTL" apply -f - >/dev/null <<GWC
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata:
  name: $GATEWAY_CLASS
spec:
  controllerName: $CONTROLLER_NAME
  description: sluice under the conformance suite (e2e/conformance.sh)
GWC
e2e_log "Gateway API $gwapi_version CRDs, sluice's CRDs and config, GatewayClass $GATEWAY_CLASS ($CONTROLLER_NAME) installed"

# Accepted=True at the GatewayClass's generation, and a non-empty status.supportedFeatures: the
# suite reads the features before it waits for anything.
gatewayclass_ready() {
	"$KUBECTL" get gatewayclass "$GATEWAY_CLASS" -o json | python3 -c '
import json, sys
gc = json.load(sys.stdin)
gen = gc["metadata"]["generation"]
st = gc.get("status") or {}
ok = any(c["type"] == "Accepted" and c["status"] == "True" and c.get("observedGeneration") == gen
         for c in st.get("conditions") or [])
sys.exit(0 if ok and st.get("supportedFeatures") else 1)'
}

start_sluice() {
	local d="$E2E_WORK/pki" kubeconfig="$KUBECONFIG" token server
	local xds http https admin metrics
	if [[ "${CONFORMANCE_SLUICE_ADMIN:-0}" != 1 ]]; then
		# As the e2e tests do: sluice runs as the ServiceAccount of config/rbac.yaml.
		kubeconfig="$E2E_WORK/sluice.kubeconfig"
		token="$("$KUBECTL" create token sluice -n sluice-system --duration=24h)"
		server="$("$KUBECTL" config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
		cat >"$kubeconfig" <<KCFG
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "$server", certificate-authority: "$d/ca.crt"}
users:
- name: sluice
  user: {token: "$token"}
contexts:
- name: sluice
  context: {cluster: e2e, user: sluice, namespace: sluice-system}
current-context: sluice
KCFG
	fi
	xds=$(e2e_free_port); http=$(e2e_free_port); https=$(e2e_free_port)
	admin=$(e2e_free_port); metrics=$(e2e_free_port)
	# Ingress's own HTTP and HTTPS listeners on free loopback ports, out of the way of the
	# Gateways' listeners, which Envoy binds on each Gateway's address of the pool.
	e2e_start sluice env KUBECONFIG="$kubeconfig" RUST_LOG="${RUST_LOG:-info}" NO_COLOR=1 \
		"$SLUICE" serve \
		--namespace sluice-system \
		--identity conformance \
		--xds-address "127.0.0.1:$xds" \
		--listen-address 127.0.0.1 \
		--http-port "$http" \
		--https-port "$https" \
		--gateway-addresses "$GATEWAY_ADDRESSES" \
		--gateway-services \
		--gateway-controller-name "$CONTROLLER_NAME" \
		--metrics-address "127.0.0.1:$metrics"
	"$SLUICE" bootstrap --xds-address "127.0.0.1:$xds" --admin-port "$admin" \
		--node-id conformance --out "$E2E_WORK/envoy.json"
	e2e_start envoy "$SLUICE_E2E_ENVOY" -c "$E2E_WORK/envoy.json" \
		--concurrency "${CONFORMANCE_ENVOY_CONCURRENCY:-2}" \
		--ignore-unknown-dynamic-fields --disable-hot-restart --drain-time-s 1 \
		--base-id "$admin"
	sleep 1
	if ! kill -0 "$(cat "$E2E_WORK/sluice.pid")" 2>/dev/null; then
		e2e_log "sluice exited at once (does it have --gateway-addresses yet?); its log:"
		tail -20 "$E2E_WORK/sluice.log" >&2
		return 1
	fi
	if ! e2e_wait 60 "Envoy ready" curl -fsS --noproxy '*' "http://127.0.0.1:$admin/ready"; then
		tail -20 "$E2E_WORK/envoy.log" >&2
		return 1
	fi
	if ! e2e_wait 120 "GatewayClass $GATEWAY_CLASS Accepted with status.supportedFeatures" gatewayclass_ready; then
		"$KUBECTL" get gatewayclass "$GATEWAY_CLASS" -o yaml >&2 || true
		e2e_log "sluice's log:"; tail -30 "$E2E_WORK/sluice.log" >&2
		return 1
	fi
	e2e_log "sluice and Envoy up; GatewayClass $GATEWAY_CLASS supports: $("$KUBECTL" get gatewayclass "$GATEWAY_CLASS" -o 'jsonpath={.status.supportedFeatures[*].name}')"
}

if [[ "${CONFORMANCE_WITHOUT_SLUICE:-0}" != 1 ]]; then
	start_sluice
else
	e2e_log "CONFORMANCE_WITHOUT_SLUICE=1: no sluice, no Envoy"
fi

cargo_version="$(awk -F'"' '/^version *=/{print $2; exit}' "$E2E_ROOT/Cargo.toml")"
git_rev="$(git -C "$E2E_ROOT" describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)"
suite_args=(
	-test.run '^TestConformance$'
	-test.v
	-test.timeout "${CONFORMANCE_TIMEOUT:-150m}"
	--gateway-class "$GATEWAY_CLASS"
	--conformance-profiles "$PROFILES"
	--report-output "$E2E_WORK/report.yaml"
	--organization "${CONFORMANCE_ORGANIZATION:-sluice}"
	--project "${CONFORMANCE_PROJECT:-sluice}"
	--url "${CONFORMANCE_URL:-https://sluice.dev}"
	--version "${CONFORMANCE_VERSION:-v$cargo_version+$git_rev}"
	--contact "${CONFORMANCE_CONTACT:-sluice maintainers}"
	--mode default
	--skip-tests "$skip_list"
	# Every object dies with the control plane at the end, and E2E_KEEP=1 keeps them to look at.
	--cleanup-base-resources=false
	--usable-address "${CONFORMANCE_USABLE_ADDRESS:-127.0.1.254}"
	--unusable-address "${CONFORMANCE_UNUSABLE_ADDRESS:-127.0.9.9}"
)
if [[ -n "${CONFORMANCE_RUN_TEST:-}" ]]; then suite_args+=(--run-test "$CONFORMANCE_RUN_TEST"); fi
if [[ "${CONFORMANCE_DEBUG:-0}" == 1 ]]; then suite_args+=(--debug); fi
suite_args+=("$@")

e2e_log "conformance.test ${suite_args[*]}"
e2e_log "the suite's whole log: $SUITE_LOG"
cd "$E2E_WORK"
# The suite in the background and `wait`, so SIGINT/SIGTERM tear down at once. The terminal
# gets the tests as they start and, at the end, those that passed or failed (Go prints the
# subtests' results when TestConformance ends); the whole log is in $SUITE_LOG, the summary
# counts the skipped ones. The log is emptied first, so the tail never shows an earlier run's.
: >"$SUITE_LOG"
env -u http_proxy -u https_proxy -u HTTP_PROXY -u HTTPS_PROXY -u ALL_PROXY -u all_proxy \
	"$GWAPI/conformance.test" "${suite_args[@]}" >>"$SUITE_LOG" 2>&1 &
suite_pid=$!
E2E_PIDS+=("$suite_pid")
tail -n +1 -F --pid="$suite_pid" "$SUITE_LOG" 2>/dev/null | awk '
	/: Running [A-Za-z0-9]+, relying on the following features/ {
		sub(/.*: Running /, ""); sub(/, relying on the following features: /, " ("); print "running " $0 ")"; fflush(); next }
	/^(    )?--- (PASS|FAIL): TestConformance|Test Setup:|^(FAIL|PASS|ok|panic)/ { print; fflush() }' >&2 &
stream_pid=$!
E2E_PIDS+=("$stream_pid")
status=0
wait "$suite_pid" || status=$?
wait "$stream_pid" || true # tail sees the suite gone within a second and ends the stream
e2e_log "conformance.test exited $status after $(( $(date +%s) - t0 ))s in all"

for f in sluice envoy podrunner; do
	if [[ -f "$E2E_WORK/$f.log" ]]; then cp "$E2E_WORK/$f.log" "$out_dir/$f.log"; fi
done
# The report only from a run that wrote one (the suite writes none when its Setup fails).
report_arg=()
if [[ -s "$E2E_WORK/report.yaml" ]]; then
	cp "$E2E_WORK/report.yaml" "$REPORT"
	report_arg=(-report "$REPORT")
	e2e_log "report: $REPORT"
else
	e2e_log "the suite wrote no report"
fi
e2e_log "logs: $out_dir"
summary_status=0
"$GWAPI/conformance-summary" -log "$SUITE_LOG" "${report_arg[@]}" \
	-profiles "$PROFILES" -skip-tests "$skip_list" || summary_status=$?

if [[ "${E2E_KEEP:-0}" == 1 ]]; then
	e2e_log "keeping everything up; in another shell:"
	echo "  export KUBECONFIG=$KUBECONFIG; alias kubectl=$KUBECTL" >&2
	e2e_log "Ctrl-C to tear down"
	while true; do sleep 3600 & wait $!; done
fi
if (( status != 0 || summary_status != 0 )); then
	exit 1
fi
