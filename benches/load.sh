#!/usr/bin/env bash
# Load benchmark: requests per second through the gateway, compared in the same run with the
# backend alone and with nginx and HAProxy as plain reverse proxies in front of the same backend.
# Everything runs on this machine over loopback (wrk, the proxies and the backend share the cores),
# so compare the ratios, not the absolute figures.
#
#   benches/load.sh [duration-seconds] [connections]
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${1:-10}
CONNECTIONS=${2:-32}
SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
for tool in wrk nginx haproxy; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "installing wrk, nginx-light and haproxy"
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wrk nginx-light haproxy >/dev/null
    break
  fi
done

cargo build --release -q
BIN=target/release/ishare-gateway
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_for() { # url
  for _ in $(seq 1 100); do
    curl -fsk -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "not answering: $1" >&2
  return 1
}

"$BIN" testbed --config conf/testbed.toml >"$WORK/testbed.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:9180/
# The proxies compared log nothing per request; neither does the gateway here (GATEWAY_LOG=info
# turns its access log on).
RUST_LOG=${GATEWAY_LOG:-warn} "$BIN" run --config conf/gateway.toml >"$WORK/gateway.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:9901/ready

cat >"$WORK/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid $WORK/nginx.pid;
error_log $WORK/nginx-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  upstream backend { server 127.0.0.1:9180; keepalive 64; }
  server {
    listen 127.0.0.1:8181;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
NGINX
nginx -c "$WORK/nginx.conf" &
PIDS+=($!)
cat >"$WORK/haproxy.cfg" <<HAPROXY
global
  nbthread 2
  maxconn 8192
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend front
  bind 127.0.0.1:8282
  default_backend back
backend back
  server echo 127.0.0.1:9180
HAPROXY
haproxy -f "$WORK/haproxy.cfg" -db >"$WORK/haproxy.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:8181/status
wait_for http://127.0.0.1:8282/status

TOKEN=$("$BIN" client --testbed data/testbed --as EU.EORI.NL000000001 --raw token --url https://127.0.0.1:8443)
# Warm the decision cache, so the delegated route measures the cached path.
curl -fs -o /dev/null -H "Authorization: Bearer $TOKEN" http://127.0.0.1:8080/api/containers/C1

run() { # name url [auth]
  local args=(-t2 -c"$CONNECTIONS" -d"${DURATION}s" --latency)
  [ "${3:-}" = auth ] && args+=(-H "Authorization: Bearer $TOKEN")
  local out
  out=$(wrk "${args[@]}" "$2")
  local rps p50 p99
  rps=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p50=$(awk '$1=="50%" {print $2}' <<<"$out")
  p99=$(awk '$1=="99%" {print $2}' <<<"$out")
  local errors
  errors=$(awk '/Non-2xx/ {print $5}' <<<"$out")
  printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$rps" "$p50" "$p99" "${errors:-0}" >>"$WORK/results.tsv"
}

run "backend alone" http://127.0.0.1:9180/status
run "nginx" http://127.0.0.1:8181/status
run "haproxy" http://127.0.0.1:8282/status
run "gateway, public route" http://127.0.0.1:8080/status
run "gateway, token route" http://127.0.0.1:8080/api/my/shipments/x auth
run "gateway, delegated route (cached decision)" http://127.0.0.1:8080/api/containers/C1 auth

NGINX_RPS=$(awk -F'\t' '$1=="nginx" {print $2}' "$WORK/results.tsv")
printf '\n%-46s %10s %9s %9s %8s %s\n' "target" "req/s" "p50" "p99" "non-2xx" "vs nginx"
while IFS=$'\t' read -r name rps p50 p99 errors; do
  ratio=$(awk -v a="$rps" -v b="$NGINX_RPS" 'BEGIN {printf "%.2f", a / b}')
  printf '%-46s %10s %9s %9s %8s %s\n' "$name" "$rps" "$p50" "$p99" "$errors" "$ratio"
done <"$WORK/results.tsv"
