#!/usr/bin/env bash
# The sluice demo (`make run`): installs Envoy into .venv/ if missing, builds sluice and the sample
# backends, then starts the backends, sluice in standalone mode on examples/demo/ and Envoy, and
# prints curl commands to try. Ctrl-C stops everything it started.
#
# Ports (all on 127.0.0.1): Envoy HTTP 8080, HTTPS 8443, admin 9901; sluice xDS 18000;
# backends 9101-9106. Override with HTTP_PORT, HTTPS_PORT, ADMIN_PORT, XDS_PORT.
# SLUICE_DEMO_PROFILE=debug builds and runs the debug profile instead of release.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
HTTP_PORT="${HTTP_PORT:-8080}"
HTTPS_PORT="${HTTPS_PORT:-8443}"
ADMIN_PORT="${ADMIN_PORT:-9901}"
XDS_PORT="${XDS_PORT:-18000}"
CARGO="${CARGO:-cargo}"
# release (default) or debug: which cargo profile to build and run.
PROFILE="${SLUICE_DEMO_PROFILE:-release}"
run_dir="$(mktemp -d "${TMPDIR:-/tmp}/sluice-demo.XXXXXX")"
pids=()

cleanup() {
    trap - INT TERM EXIT
    echo
    echo "Stopping the demo..."
    for pid in "${pids[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        wait "$pid" 2>/dev/null || true
    done
    rm -rf "$run_dir"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM

port_free() {
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}
for p in "$HTTP_PORT" "$HTTPS_PORT" "$ADMIN_PORT" "$XDS_PORT" 9101 9102 9103 9104 9105 9106; do
    if ! port_free "$p"; then
        echo "demo: port $p on 127.0.0.1 is in use; stop what uses it (or set the *_PORT variables)" >&2
        exit 1
    fi
done

echo "==> Envoy"
envoy="$("$root/scripts/ensure-envoy.sh" "$root")"
"$envoy" --version | grep -m1 version

echo "==> Building sluice and the sample backends"
if [ "$PROFILE" = release ]; then
    "$CARGO" build --release --bin sluice --example echo
else
    "$CARGO" build --bin sluice --example echo
fi
# Where cargo put them (CARGO_TARGET_DIR moves the target directory).
target_dir="${CARGO_TARGET_DIR:-$root/target}"
sluice="$target_dir/$PROFILE/sluice"
echo_bin="$target_dir/$PROFILE/examples/echo"

echo "==> Starting the sample backends (each answers with its own name)"
"$echo_bin" web=9101 api=9102 api-v2=9103 stable=9104 canary=9105 blog=9106 \
    >"$run_dir/backends.log" 2>&1 &
pids+=($!)

echo "==> Starting sluice (standalone mode on examples/demo/)"
RUST_LOG="${RUST_LOG:-info}" "$sluice" serve --manifests "$root/examples/demo" \
    --xds-address "127.0.0.1:$XDS_PORT" --listen-address 127.0.0.1 \
    --http-port "$HTTP_PORT" --https-port "$HTTPS_PORT" --gateway-addresses 127.0.1.0/24 \
    --access-log-path "$run_dir/access.log" >"$run_dir/sluice.log" 2>&1 &
pids+=($!)

echo "==> Starting Envoy"
"$sluice" bootstrap --xds-address "127.0.0.1:$XDS_PORT" --admin-port "$ADMIN_PORT" \
    --node-id demo --out "$run_dir/bootstrap.json"
# --ignore-unknown-dynamic-fields: docs/xds.md "Running Envoy".
"$envoy" -c "$run_dir/bootstrap.json" --concurrency 1 --disable-hot-restart \
    --ignore-unknown-dynamic-fields --log-level warn --file-flush-interval-msec 500 \
    >"$run_dir/envoy.log" 2>&1 &
pids+=($!)

# Wait (bounded) until Envoy serves the demo routes.
ready=""
for _ in $(seq 1 100); do
    if curl -s -o /dev/null -w '%{http_code}' -H 'Host: shop.example.com' \
        "http://127.0.0.1:$HTTP_PORT/" 2>/dev/null | grep -q 200; then
        ready=yes
        break
    fi
    for pid in "${pids[@]}"; do
        if ! kill -0 "$pid" 2>/dev/null; then
            echo "demo: a process exited early; logs:" >&2
            tail -n 20 "$run_dir"/*.log >&2
            exit 1
        fi
    done
    sleep 0.2
done
if [ -z "$ready" ]; then
    echo "demo: Envoy did not serve the demo routes within 20s; logs:" >&2
    tail -n 20 "$run_dir"/*.log >&2
    exit 1
fi

H="http://127.0.0.1:$HTTP_PORT"
cat <<MSG

sluice is serving examples/demo/ to Envoy. Try (each backend answers with its own name):

  # Path (Ingress): /api goes to api, everything else to web
  curl -H 'Host: shop.example.com' $H/
  curl -H 'Host: shop.example.com' $H/api/orders

  # Header (IngressRoute v1): x-api-version: v2 goes to api-v2
  curl -H 'Host: api.example.com' $H/
  curl -H 'Host: api.example.com' -H 'x-api-version: v2' $H/

  # Gateway API (HTTPRoute): /api goes to api, x-beta: 1 to api-v2, everything else to web
  curl -H 'Host: gateway.example.com' http://127.0.1.10:8088/api/orders
  curl -H 'Host: gateway.example.com' -H 'x-beta: 1' http://127.0.1.10:8088/
  curl -H 'Host: gateway.example.com' http://127.0.1.10:8088/

  # Weight: about 80% stable, 20% canary
  for i in \$(seq 20); do curl -s -H 'Host: canary.example.com' $H/; done | sort | uniq -c

  # Delegation: /blog of www.example.com belongs to the team-blog namespace (over HTTPS)
  curl -k --resolve www.example.com:$HTTPS_PORT:127.0.0.1 https://www.example.com:$HTTPS_PORT/blog/post-1

  # TLS: HTTPS is served; plain HTTP gets a 301, except the ACME path (permitInsecure)
  curl -k --resolve www.example.com:$HTTPS_PORT:127.0.0.1 https://www.example.com:$HTTPS_PORT/
  curl -i -H 'Host: www.example.com' $H/
  curl -H 'Host: www.example.com' $H/.well-known/acme-challenge/token

  # Unknown host or path: 404
  curl -i -H 'Host: nowhere.example.com' $H/

Every request is a JSON line in Envoy's access log: tail -f $run_dir/access.log

Edit files under examples/demo/ and sluice reloads them (a broken file is reported in the sluice
log and the last good configuration keeps serving). Logs: $run_dir
Envoy admin: http://127.0.0.1:$ADMIN_PORT/  Ctrl-C stops everything.
MSG

wait -n "${pids[@]}" || true
echo "demo: a process exited; logs:" >&2
tail -n 20 "$run_dir"/*.log >&2
exit 1
