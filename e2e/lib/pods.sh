# shellcheck shell=bash
# Real Pods with no container runtime and no kubelet, for the e2e tests and the Gateway API
# conformance runner: kube-controller-manager and kube-scheduler next to the apiserver of
# controlplane.sh, kwok playing the kubelet of one Node (kwok-node-0), and e2e/podrunner.py,
# which runs the Pods' containers as local processes, each Pod in a network namespace on a
# host bridge and each container in a mount namespace with its volumes, makes the Services'
# ClusterIPs answer inside the Pods (a namespace of their own on the bridge) and their names
# resolve (each Pod's /etc/hosts), and gives Services of type LoadBalancer a loopback address.
# See docs/e2e.md, "Pods".
#
# Sourced after controlplane.sh (it needs E2E_ROOT, E2E_BIN, E2E_WORK, E2E_PIDS, E2E_APISERVER,
# KUBECONFIG and e2e_start); e2e_pods_up once the apiserver is up. Every process goes through
# e2e_start, and e2e_pods_down (an entry of E2E_DOWN_HOOKS, which e2e_down runs) removes every
# namespace, veth and the bridge the run made.
#
# Two runs on one machine (an e2e run and a conformance run, say) each take a slot, the first
# free one, and never share an address:
#   slot 0: bridge sluice-br0 198.18.0.1/16, Pods 198.18.1.0/24, LoadBalancers 127.0.2.0/24,
#           the Services' namespace sp-svc0 at 198.18.0.2
#   slot 1: bridge sluice-br1 198.19.0.1/16, Pods 198.19.1.0/24, LoadBalancers 127.0.3.0/24,
#           the Services' namespace sp-svc1 at 198.19.0.2
# (198.18.0.0/15 is the benchmarking range: nothing real lives there.) A slot is a directory
# /run/sluice-e2e-pods/SLOT holding its owner (pid and start time) and the namespaces its runner
# made, so a run killed before its teardown is reaped by the next one.

E2E_PODS_STATE=/run/sluice-e2e-pods
E2E_PODS_SLOTS="0 1"
E2E_PODS_NODE=kwok-node-0
E2E_DOWN_HOOKS+=(e2e_pods_down)

# The start time of process PID (field 22 of /proc/PID/stat), to tell it from a later process
# that got the same pid.
e2e_pods_starttime() {
	local stat
	stat="$(cat "/proc/$1/stat" 2>/dev/null)" || return 1
	stat="${stat##*) }" # past the command name, which may hold spaces
	# shellcheck disable=SC2086
	set -- $stat
	echo "${20}"
}

# Whether the owner recorded in slot directory DIR still runs.
e2e_pods_owner_alive() {
	local pid start now
	read -r pid start <"$1/owner" 2>/dev/null || return 1
	now="$(e2e_pods_starttime "$pid")" || return 1
	[[ "$now" == "$start" ]]
}

# Removes a namespace of the pod runner: its processes, the host end of its veth, the namespace.
e2e_pods_del_netns() {
	local ns="$1" p
	for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
	ip link del "vh${ns#sp-}" 2>/dev/null || true
	ip netns del "$ns" 2>/dev/null || true
}

# Removes what slot directory DIR's run made: its namespaces, its bridge, the directory.
e2e_pods_clear_slot() {
	local dir="$1" f
	for f in "$dir"/netns/*; do
		[[ -e "$f" ]] && e2e_pods_del_netns "${f##*/}"
	done
	ip link del "sluice-br${dir##*/}" 2>/dev/null || true
	rm -rf "$dir"
}

# Removes what runs killed before their teardown left: slots whose owner is gone, and any
# sp-* namespace no live slot lists.
e2e_pods_reap_stale() {
	local dir ns slot
	mkdir -p "$E2E_PODS_STATE"
	for dir in "$E2E_PODS_STATE"/*; do
		[[ -d "$dir" ]] || continue
		e2e_pods_owner_alive "$dir" && continue
		e2e_log "removing Pod namespaces and bridge of slot ${dir##*/}, left by an earlier run that did not tear down"
		e2e_pods_clear_slot "$dir"
	done
	for ns in $(ip netns list 2>/dev/null | awk '$1 ~ /^sp-/ {print $1}'); do
		local owned=0
		for dir in "$E2E_PODS_STATE"/*; do
			[[ -e "$dir/netns/$ns" ]] && owned=1
		done
		if [[ $owned == 0 ]]; then
			e2e_log "removing Pod namespace $ns, left by an earlier run"
			e2e_pods_del_netns "$ns"
		fi
	done
	for slot in $E2E_PODS_SLOTS; do
		if [[ ! -d "$E2E_PODS_STATE/$slot" ]] && ip link show "sluice-br$slot" >/dev/null 2>&1; then
			ip link del "sluice-br$slot" 2>/dev/null || true
		fi
	done
}

# Takes the first free slot (mkdir is atomic) and sets the addresses of the run.
e2e_pods_take_slot() {
	local slot used
	used="$(ip -o -4 addr show 2>/dev/null | awk '{print $4}')"
	for slot in $E2E_PODS_SLOTS; do
		if grep -q "^198\.$(( 18 + slot ))\." <<<"$used"; then
			continue # someone else's address there
		fi
		mkdir "$E2E_PODS_STATE/$slot" 2>/dev/null || continue
		mkdir -p "$E2E_PODS_STATE/$slot/netns"
		echo "$$ $(e2e_pods_starttime $$)" >"$E2E_PODS_STATE/$slot/owner"
		E2E_PODS_SLOT="$slot"
		E2E_PODS_BRIDGE="sluice-br$slot"
		E2E_PODS_GATEWAY="198.$(( 18 + slot )).0.1"
		E2E_PODS_SVC_ADDR="198.$(( 18 + slot )).0.2"
		E2E_PODS_SVC_NETNS="sp-svc$slot"
		E2E_PODS_CIDR="198.$(( 18 + slot )).1.0/24"
		E2E_PODS_LB_POOL="127.0.$(( 2 + slot )).0/24"
		return 0
	done
	e2e_log "no free Pod network slot (another run on this machine holds each of: $E2E_PODS_SLOTS)"
	return 1
}

# The stages kwok runs: kwok's node ones and pod-complete/pod-delete, and either its pod-ready
# (E2E_PODS_READY=immediate) or e2e/lib/kwok-pod-stages.yaml, Ready once the runner has seen the
# Pod's first containerPort accept a connection (the default).
e2e_pods_kwok_config() {
	local s f first=1
	local stages="$E2E_KWOK/stages"
	local files=("$stages/node-initialize.yaml" "$stages/node-heartbeat-with-lease.yaml")
	if [[ "${E2E_PODS_READY:-started}" == immediate ]]; then
		files+=("$stages/pod-ready.yaml")
	else
		files+=("$E2E_ROOT/e2e/lib/kwok-pod-stages.yaml")
	fi
	files+=("$stages/pod-complete.yaml" "$stages/pod-delete.yaml")
	for f in "${files[@]}"; do
		[[ $first == 1 ]] || echo "---"
		first=0
		cat "$f"
	done
}

e2e_pods_up() {
	local t0 d="$E2E_WORK/pki" port
	t0=$(date +%s)
	E2E_KWOK="$("$E2E_ROOT/e2e/tools/kwok/build.sh")"
	e2e_pods_reap_stale
	e2e_pods_take_slot
	E2E_PODS_DIR="$E2E_WORK/pods"
	mkdir -p "$E2E_PODS_DIR"

	# The bridge the Pods' veths join; the host reaches every Pod IP through it.
	ip link add "$E2E_PODS_BRIDGE" type bridge
	ip addr add "$E2E_PODS_GATEWAY/16" dev "$E2E_PODS_BRIDGE"
	ip link set "$E2E_PODS_BRIDGE" up

	# The Services' namespace: every address of the service range is local in it, the Pods
	# route the range to its address on the bridge, and the pod runner listens there on each
	# ClusterIP's ports (docs/e2e.md, "Services"). Recorded like a Pod's namespace (its veth is
	# vh<name without sp->), so the teardown and a later run's reaping remove it.
	touch "$E2E_PODS_STATE/$E2E_PODS_SLOT/netns/$E2E_PODS_SVC_NETNS"
	ip netns add "$E2E_PODS_SVC_NETNS"
	ip link add "vh${E2E_PODS_SVC_NETNS#sp-}" type veth peer name "vp${E2E_PODS_SVC_NETNS#sp-}"
	ip link set "vp${E2E_PODS_SVC_NETNS#sp-}" netns "$E2E_PODS_SVC_NETNS"
	ip link set "vh${E2E_PODS_SVC_NETNS#sp-}" master "$E2E_PODS_BRIDGE"
	ip link set "vh${E2E_PODS_SVC_NETNS#sp-}" up
	ip -n "$E2E_PODS_SVC_NETNS" addr add "$E2E_PODS_SVC_ADDR/16" dev "vp${E2E_PODS_SVC_NETNS#sp-}"
	ip -n "$E2E_PODS_SVC_NETNS" link set "vp${E2E_PODS_SVC_NETNS#sp-}" up
	ip -n "$E2E_PODS_SVC_NETNS" link set lo up
	ip -n "$E2E_PODS_SVC_NETNS" route add local "$E2E_SERVICE_CIDR" dev lo

	# The job and cronjob controllers are off: the e2e tests play the Job controller themselves
	# (e2e/tests/certgen.rs runs Helm's hook Job), E2E_KCM_CONTROLLERS overrides.
	port=$(e2e_free_port)
	e2e_start kube-controller-manager "$E2E_BIN/kube-controller-manager" \
		--kubeconfig "$KUBECONFIG" \
		--leader-elect=false \
		--bind-address 127.0.0.1 \
		--secure-port "$port" \
		--service-account-private-key-file "$d/sa.key" \
		--root-ca-file "$d/ca.crt" \
		--controllers "${E2E_KCM_CONTROLLERS:-*,-job-controller,-cronjob-controller}" \
		--kube-api-qps 500 --kube-api-burst 1000 \
		--v 1
	E2E_KCM="https://127.0.0.1:$port"
	port=$(e2e_free_port)
	e2e_start kube-scheduler "$E2E_BIN/kube-scheduler" \
		--kubeconfig "$KUBECONFIG" \
		--leader-elect=false \
		--bind-address 127.0.0.1 \
		--secure-port "$port" \
		--kube-api-qps 500 --kube-api-burst 1000 \
		--v 1
	E2E_SCHEDULER="https://127.0.0.1:$port"

	# kwok: the Logs kind first (kwok watches it with --enable-crds=Logs).
	"$E2E_BIN/kubectl" apply -f "$E2E_KWOK/crd-logs.yaml" >/dev/null
	"$E2E_BIN/kubectl" wait --for=condition=Established crd/logs.kwok.x-k8s.io --timeout=60s >/dev/null
	e2e_pods_kwok_config >"$E2E_WORK/kwok.yaml"
	port=$(e2e_free_port)
	# --node-name is the Hostname address kwok gives its Nodes, where the apiserver fetches
	# logs from (https://localhost:PORT/containerLogs/..., kwok's own server, self-signed).
	e2e_start kwok "$E2E_KWOK/kwok" \
		--kubeconfig "$KUBECONFIG" \
		--config "$E2E_WORK/kwok.yaml" \
		--manage-all-nodes=true \
		--node-name localhost \
		--node-ip "$E2E_PODS_GATEWAY" \
		--node-port "$port" \
		--server-address "127.0.0.1:$port" \
		--cidr "$E2E_PODS_CIDR" \
		--node-lease-duration-seconds 40 \
		--enable-crds Logs
	E2E_KWOK_SERVER="https://127.0.0.1:$port"

	"$E2E_BIN/kubectl" apply -f - >/dev/null <<NODE
apiVersion: v1
kind: Node
metadata:
  name: $E2E_PODS_NODE
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: $E2E_PODS_NODE, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
spec: {podCIDR: "$E2E_PODS_CIDR", podCIDRs: ["$E2E_PODS_CIDR"]}
NODE

	e2e_start podrunner python3 -u "$E2E_ROOT/e2e/podrunner.py" \
		--server "$E2E_APISERVER" --ca "$d/ca.crt" --cert "$d/admin.crt" --key "$d/admin.key" \
		--bridge "$E2E_PODS_BRIDGE" --gateway "$E2E_PODS_GATEWAY" --prefix-len 16 \
		--run-dir "$E2E_PODS_DIR" --state-dir "$E2E_PODS_STATE/$E2E_PODS_SLOT" \
		--images "${SLUICE_E2E_IMAGES:-}" --lb-pool "$E2E_PODS_LB_POOL" \
		--service-cidr "$E2E_SERVICE_CIDR" --service-netns "$E2E_PODS_SVC_NETNS" \
		--service-addr "$E2E_PODS_SVC_ADDR"

	# Ready, and untainted: the node-lifecycle controller lifts the not-ready taint the
	# apiserver put on the new Node.
	if ! e2e_wait 60 "Node $E2E_PODS_NODE Ready and untainted" e2e_pods_node_ready; then
		local f
		for f in kube-controller-manager kube-scheduler kwok podrunner; do
			e2e_log "$f log:"; tail -20 "$E2E_WORK/$f.log" >&2 || true
		done
		return 1
	fi
	# The namespace default's ServiceAccount (from the serviceaccount controller), which Pods
	# need now that kube-controller-manager runs.
	e2e_wait 30 "ServiceAccount default/default" "$E2E_BIN/kubectl" get serviceaccount default -n default

	export SLUICE_E2E_PODS=1
	export SLUICE_E2E_POD_NODE="$E2E_PODS_NODE"
	export SLUICE_E2E_POD_CIDR="$E2E_PODS_CIDR"
	export SLUICE_E2E_POD_GATEWAY="$E2E_PODS_GATEWAY"
	export SLUICE_E2E_POD_BRIDGE="$E2E_PODS_BRIDGE"
	export SLUICE_E2E_POD_DIR="$E2E_PODS_DIR"
	export SLUICE_E2E_LB_POOL="$E2E_PODS_LB_POOL"
	export SLUICE_E2E_SERVICE_CIDR="$E2E_SERVICE_CIDR"
	export SLUICE_E2E_IMAGES="${SLUICE_E2E_IMAGES:-}"
	e2e_log "pods up in $(( $(date +%s) - t0 ))s: node $E2E_PODS_NODE, Pods $E2E_PODS_CIDR on $E2E_PODS_BRIDGE ($E2E_PODS_GATEWAY), LoadBalancers $E2E_PODS_LB_POOL"
}

e2e_pods_node_ready() {
	local out
	out="$("$E2E_BIN/kubectl" get node "$E2E_PODS_NODE" \
		-o 'jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.taints}')" || return 1
	[[ "$out" == "True " ]]
}

# Teardown (run by e2e_down after every process is stopped): the namespaces the runner made
# (it removes them itself on SIGTERM; this catches a runner killed before), the bridge, the slot.
e2e_pods_down() {
	[[ -n "${E2E_PODS_SLOT:-}" ]] || return 0
	e2e_pods_clear_slot "$E2E_PODS_STATE/$E2E_PODS_SLOT"
	E2E_PODS_SLOT=""
}
