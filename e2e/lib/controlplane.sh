# shellcheck shell=bash
# Functions that bring up (and tear down) the e2e control plane on one machine, no container
# runtime: certificates (openssl), etcd, kube-apiserver, an admin kubeconfig, and a network
# namespace with HTTP backends. Sourced by e2e/run.sh; every started process and the namespace
# are recorded so e2e_down removes exactly what e2e_up created (and runs E2E_DOWN_HOOKS, the
# teardown functions of other sourced libraries such as e2e/lib/pods.sh).

e2e_log() { echo "e2e: $*" >&2; }

# The apiserver's --service-cluster-ip-range, and its first address: the ClusterIP of the Service
# default/kubernetes, which Pods reach the apiserver at (KUBERNETES_SERVICE_HOST), so its serving
# certificate names it.
E2E_SERVICE_CIDR="${E2E_SERVICE_CIDR:-10.96.0.0/16}"
E2E_APISERVER_SERVICE_IP="$(python3 -c 'import ipaddress, sys; print(next(ipaddress.ip_network(sys.argv[1]).hosts()))' "$E2E_SERVICE_CIDR")"

# A free TCP port on 127.0.0.1.
e2e_free_port() {
	python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

# e2e_wait SECONDS DESCRIPTION COMMAND... — polls COMMAND every 0.5 s.
e2e_wait() {
	local secs="$1" what="$2"; shift 2
	local deadline=$(( $(date +%s) + secs ))
	until "$@" >/dev/null 2>&1; do
		if (( $(date +%s) > deadline )); then
			e2e_log "timed out after ${secs}s waiting for $what"
			return 1
		fi
		sleep 0.5
	done
}

e2e_certs() {
	local d="$E2E_WORK/pki"
	mkdir -p "$d"
	(
		cd "$d"
		openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=sluice-e2e-ca" \
			-keyout ca.key -out ca.crt 2>/dev/null
		# kube-apiserver serving certificate: for loopback, and for the Service default/kubernetes
		# (its ClusterIP and names), where Pods reach it.
		openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
			-keyout apiserver.key -out apiserver.csr 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1,IP:%s,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\nextendedKeyUsage=serverAuth\n' "$E2E_APISERVER_SERVICE_IP" > apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
			-extfile apiserver.ext -out apiserver.crt 2>/dev/null
		# Admin client certificate (group system:masters).
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=e2e-admin" \
			-keyout admin.key -out admin.csr 2>/dev/null
		printf 'extendedKeyUsage=clientAuth\n' > client.ext
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
			-extfile client.ext -out admin.crt 2>/dev/null
		# Service-account token signing key.
		openssl genrsa -out sa.key 2048 2>/dev/null
		openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
		# Webhook serving certificate: the apiserver calls https://127.0.0.1:PORT.
		openssl req -newkey rsa:2048 -nodes -subj "/CN=sluice-webhook" \
			-keyout webhook.key -out webhook.csr 2>/dev/null
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > webhook.ext
		openssl x509 -req -in webhook.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
			-extfile webhook.ext -out webhook.crt 2>/dev/null
	)
}

e2e_start() { # name command... — starts a background process logging to $E2E_WORK/name.log
	local name="$1"; shift
	"$@" >"$E2E_WORK/$name.log" 2>&1 &
	echo "$!" >"$E2E_WORK/$name.pid"
	E2E_PIDS+=("$!")
	disown "$!" # no "Killed" job reports at teardown
}

e2e_etcd() {
	local client_port peer_port
	client_port=$(e2e_free_port)
	peer_port=$(e2e_free_port)
	e2e_start etcd "$E2E_BIN/etcd" \
		--name e2e \
		--data-dir "$E2E_WORK/etcd" \
		--listen-client-urls "http://127.0.0.1:$client_port" \
		--advertise-client-urls "http://127.0.0.1:$client_port" \
		--listen-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peer_port" \
		--initial-cluster "e2e=http://127.0.0.1:$peer_port" \
		--unsafe-no-fsync \
		--log-level warn
	E2E_ETCD="http://127.0.0.1:$client_port"
	e2e_wait 60 "etcd" curl -fsS "$E2E_ETCD/health"
}

e2e_apiserver() {
	local port d="$E2E_WORK/pki"
	port=$(e2e_free_port)
	# No --advertise-address=127.0.0.1: the apiserver refuses loopback for its own endpoints.
	# The ServiceAccount admission plugin is on, as in a cluster: a Pod gets its ServiceAccount
	# (default) and the projected kube-api-access volume, which e2e/podrunner.py fills.
	# --enable-aggregator-routing: the apiserver calls a webhook's (or an aggregated API's)
	# Service at an endpoint's address (a Pod IP on the Pods' bridge), not at its ClusterIP,
	# which nothing routes on the host (no kube-proxy; the host would send it off the machine).
	e2e_start kube-apiserver "$E2E_BIN/kube-apiserver" \
		--etcd-servers "$E2E_ETCD" \
		--bind-address 127.0.0.1 \
		--secure-port "$port" \
		--tls-cert-file "$d/apiserver.crt" \
		--tls-private-key-file "$d/apiserver.key" \
		--client-ca-file "$d/ca.crt" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-account-key-file "$d/sa.pub" \
		--service-account-signing-key-file "$d/sa.key" \
		--service-cluster-ip-range "$E2E_SERVICE_CIDR" \
		--enable-aggregator-routing=true \
		--authorization-mode RBAC \
		--enable-priority-and-fairness=false \
		--v 1
	E2E_APISERVER="https://127.0.0.1:$port"
	export KUBECONFIG="$E2E_WORK/kubeconfig"
	cat >"$KUBECONFIG" <<KCFG
apiVersion: v1
kind: Config
clusters:
  - name: e2e
    cluster:
      server: $E2E_APISERVER
      certificate-authority: $d/ca.crt
users:
  - name: admin
    user:
      client-certificate: $d/admin.crt
      client-key: $d/admin.key
contexts:
  - name: e2e
    context: {cluster: e2e, user: admin}
current-context: e2e
KCFG
	e2e_wait 120 "kube-apiserver /readyz" "$E2E_BIN/kubectl" get --raw /readyz
	# The default namespace and the RBAC bootstrap policy appear a moment after readiness.
	e2e_wait 60 "namespace default" "$E2E_BIN/kubectl" get namespace default
}

# Backends live in a network namespace reached over a veth pair: EndpointSlices cannot carry
# loopback addresses, and test traffic may only go to loopback or a namespace the test made.

# Removes what a run killed before its teardown (SIGKILL, machine reset) left behind: its
# namespace "sluice-e2e-PID" with the backends in it, and its veth. A leftover veth still holds
# the run's subnet and would take this run's backend traffic.
e2e_reap_stale() {
	local ns pid
	for ns in $(ip netns list 2>/dev/null | awk '{print $1}'); do
		[[ "$ns" =~ ^sluice-e2e-([0-9]+)$ ]] || continue
		pid="${BASH_REMATCH[1]}"
		if [[ -r "/proc/$pid/cmdline" ]] && tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q 'e2e/run.sh'; then
			continue # that run is still going
		fi
		e2e_log "removing namespace $ns left by an earlier run that did not tear down"
		local p
		for p in $(ip netns pids "$ns" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
		local host_if="se2e${pid}h"
		ip link del "${host_if:0:15}" 2>/dev/null || true
		ip netns del "$ns" 2>/dev/null || true
	done
}

# Sets E2E_HOST_IP/E2E_BACKEND_IP to the first 10.213.N.0/30 no interface of this host holds,
# so a second run on the same machine (or anything else using 10.213/16) does not collide.
e2e_pick_subnet() {
	local n used
	used="$(ip -o -4 addr show 2>/dev/null | awk '{print $4}')"
	for n in $(seq 0 255); do
		if ! grep -q "^10\.213\.$n\." <<<"$used"; then
			E2E_HOST_IP="10.213.$n.1"
			E2E_BACKEND_IP="10.213.$n.2"
			return 0
		fi
	done
	e2e_log "no free /30 in 10.213.0.0/16 for the backend namespace"
	return 1
}

e2e_netns() {
	e2e_reap_stale
	e2e_pick_subnet
	local ns="sluice-e2e-$$" host_if="se2e$$h" peer_if="se2e$$p"
	host_if="${host_if:0:15}"; peer_if="${peer_if:0:15}"
	ip netns add "$ns"
	E2E_NETNS="$ns"
	ip link add "$host_if" type veth peer name "$peer_if"
	E2E_VETH="$host_if"
	ip link set "$peer_if" netns "$ns"
	ip addr add "$E2E_HOST_IP/30" dev "$host_if"
	ip link set "$host_if" up
	ip netns exec "$ns" ip addr add "$E2E_BACKEND_IP/30" dev "$peer_if"
	ip netns exec "$ns" ip link set "$peer_if" up
	ip netns exec "$ns" ip link set lo up
	local port
	for port in $E2E_BACKEND_PORTS; do
		e2e_start "backend-$port" ip netns exec "$ns" python3 "$E2E_ROOT/e2e/backend.py" \
			--address "$E2E_BACKEND_IP" --port "$port"
	done
	for port in $E2E_BACKEND_PORTS; do
		if ! e2e_wait 30 "backend $port" curl -fsS --noproxy '*' --max-time 2 \
			"http://$E2E_BACKEND_IP:$port/healthz"; then
			e2e_log "backend-$port log:"; cat "$E2E_WORK/backend-$port.log" >&2 || true
			ip -o -4 addr show >&2 || true
			return 1
		fi
	done
}

e2e_down() {
	local pid f
	# Processes the tests started (sluice, Envoy) record themselves as $E2E_WORK/*.pid too.
	if [[ -n "${E2E_WORK:-}" ]]; then
		for f in "$E2E_WORK"/*.pid; do
			[[ -f "$f" ]] && E2E_PIDS+=("$(cat "$f")")
		done
	fi
	for pid in "${E2E_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${E2E_PIDS[@]}"; do
		for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
		kill -9 "$pid" 2>/dev/null || true
	done
	# What sourced libraries set up besides processes (e2e/lib/pods.sh: namespaces, a bridge).
	local hook
	for hook in "${E2E_DOWN_HOOKS[@]+"${E2E_DOWN_HOOKS[@]}"}"; do "$hook" || true; done
	if [[ -n "${E2E_VETH:-}" ]]; then ip link del "$E2E_VETH" 2>/dev/null || true; fi
	if [[ -n "${E2E_NETNS:-}" ]]; then ip netns del "$E2E_NETNS" 2>/dev/null || true; fi
	if [[ -n "${E2E_WORK:-}" && "${E2E_KEEP_WORK:-0}" != 1 ]]; then rm -rf "$E2E_WORK"; fi
}
