#!/usr/bin/env bash
# Load benchmark: the gateway against nginx, HAProxy and a bare pingora proxy, each in front of the
# same nginx `return 200` backend, over loopback, in one run.
#
#   benches/load.sh [--cores 1,2,4] [--duration SECONDS] [--connections N] [--rounds N]
#
# For each core count N, every server under test runs on the same N cores (pinned with taskset,
# one worker or thread per core, keep-alive to the backend) while wrk and the backend run on the
# other cores. A core count that leaves no core for wrk and the backend is skipped, with a note.
# wrk runs against each target in turn, interleaved, for --rounds rounds; the table shows the
# median of the rounds. Then each route type is loaded at a constant rate, half of what wrk found
# it saturates at (examples/constant_rate.rs: an open loop, so a slow answer does not slow the load
# down), beside the backend called directly at the same rate: the p99 the route adds. Compare the
# ratios, not the absolute figures: they depend on the machine.
#
# BASELINE=PATH runs an earlier build of the gateway (its release binary) beside this one, on the
# same configuration and cores (with the rules files its own `check` accepts): each of the four
# gateway route rows is followed by the same row
# of the baseline, and the ratios of this build to the baseline close the table — a change's cost
# on the request path, measured in one run.
#
# Needs wrk, nginx, haproxy, curl, openssl and python3 (`make load-bench` installs the missing
# ones); this script installs nothing itself.
set -euo pipefail
cd "$(dirname "$0")/.."

CORES=1
DURATION=10
CONNECTIONS=64
ROUNDS=2
while [ $# -gt 0 ]; do
  case "$1" in
    --cores) CORES=$2; shift 2 ;;
    --duration) DURATION=$2; shift 2 ;;
    --connections) CONNECTIONS=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    *) echo "usage: $0 [--cores 1,2,4] [--duration SECONDS] [--connections N] [--rounds N]" >&2; exit 2 ;;
  esac
done
if [ "$DURATION" -gt 25 ]; then
  echo "--duration must be at most 25 s: the registry's evidence tokens live 30 s" >&2
  exit 2
fi

missing=()
for tool in wrk nginx haproxy redis-server curl openssl python3 taskset; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}" >&2
  echo "install them with: apt-get install -y wrk nginx-light haproxy redis-server curl openssl python3 util-linux" >&2
  echo "(or run: make load-bench)" >&2
  exit 1
fi

BASELINE=${BASELINE:-}
if [ -n "$BASELINE" ] && [ ! -x "$BASELINE" ]; then
  echo "BASELINE=$BASELINE is not an executable gateway binary" >&2
  exit 2
fi

MACHINE_CORES=$(nproc)
echo "building (release)…"
cargo build --release -q --bin ishare-gateway --example bare_proxy --example token_forms \
  --example constant_rate --example pauses
BIN=target/release/ishare-gateway
BARE=target/release/examples/bare_proxy
FORMS=target/release/examples/token_forms
RATE=target/release/examples/constant_rate
PAUSES=target/release/examples/pauses
# Token requests per issuance run (each with a fresh assertion, used once).
ISSUANCES=${ISSUANCES:-6000}
"$BIN" testbed --config conf/testbed.toml --prepare >/dev/null

WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local status=$?
  if [ "$status" != 0 ]; then
    for log in "$WORK"/*.log "$WORK"/*/*.log "$WORK"/*/*.out; do
      [ -s "$log" ] && { echo "--- $log"; tail -n 5 "$log"; }
    done
  fi
  for pid in "${PIDS[@]}"; do kill -CONT "$pid" 2>/dev/null || true; kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

wait_for() { # url
  for _ in $(seq 1 150); do
    curl -fsk -o /dev/null "$1" && return 0
    sleep 0.1
  done
  echo "not answering: $1" >&2
  exit 1
}

start() { # cpus logfile command...
  local cpus=$1 log=$2
  shift 2
  taskset -c "$cpus" "$@" >"$log" 2>&1 &
  PIDS+=($!)
}

"$BIN" testbed --config conf/testbed.toml >"$WORK/testbed.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:9180/

# Ports: backend 9200 (also the OTLP sink: it answers 200 to /v1/traces); per core count, nginx
# 9201 (TLS 9211, with the ECDSA certificate 9213, TLS 1.2 only 9245), HAProxy 9202, HAProxy jwt
# 9203, bare pingora 9204 (on the system allocator 9214), gateway 9205 (TLS 9215,
# admin 9225, decision service 9237), nginx with auth_request to that decision service 9212,
# gateway with access log 9206 (admin 9226), gateway with tracing 9234 (TLS 9235, admin 9236),
# gateway with the decision log and a route in shadow mode 9231 (TLS 9241, admin 9251);
# the cluster: Redis 9230, two gateways on it 9207 and 9208 (TLS 9217, 9218; admin 9227, 9228),
# HAProxy in front of both 9209, and of the first alone 9210; gateway with the ECDSA certificate
# 9238 (TLS 9239, admin 9240); gateway tracing one request in ten 9242 (TLS 9243, admin 9244);
# the baseline gateway (BASELINE) 9246 (TLS 9247, admin 9248).
TLS_CERT=$PWD/data/testbed/tls/server.chain.pem
TLS_KEY=$PWD/data/testbed/tls/server.key.pem
ECDSA_CERT=$PWD/data/testbed/tls/server-ecdsa.chain.pem
ECDSA_KEY=$PWD/data/testbed/tls/server-ecdsa.key.pem
CA=$PWD/data/testbed/ca.pem
CONSUMER=EU.EORI.NL000000001
client() { "$BIN" client --testbed data/testbed --as "$CONSUMER" --raw "$@"; }

# The token HAProxy verifies: a client assertion of the testbed, RS256 with an x5c chain, and the
# public key of its signer.
JWT=$(client assertion --audience EU.EORI.NL000000003)
openssl x509 -in "data/testbed/parties/$CONSUMER.chain.pem" -pubkey -noout >"$WORK/signer.pub.pem"

median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
to_ms() { awk '{ v = $1 + 0; if ($1 ~ /us$/) v /= 1000; else if ($1 ~ /ms$/) v += 0; else if ($1 ~ /s$/) v *= 1000; printf "%.3f\n", v }'; }

# run ROW URL [header...]: one wrk run, appended to results.tsv as row, req/s, p50 ms, p99 ms, failures.
# WRK_SCRIPT, when set, is a wrk Lua script for the request (a method and a body).
run() {
  local row=$1 url=$2
  shift 2
  local args=(-t"$WRK_THREADS" -c"$CONNECTIONS" -d"${DURATION}s" --latency)
  [ -z "${WRK_SCRIPT:-}" ] || args+=(-s "$WRK_SCRIPT")
  for h in "$@"; do args+=(-H "$h"); done
  local out
  out=$(taskset -c "$CLIENT_CPUS" wrk "${args[@]}" "$url")
  local rps p50 p99 non2xx sockerr
  rps=$(awk '/Requests\/sec/ { print $2 }' <<<"$out")
  [ -n "$rps" ] || { echo "wrk gave no figures for $row ($url): $out" >&2; exit 1; }
  p50=$(awk '$1 == "50%" { print $2 }' <<<"$out" | to_ms)
  p99=$(awk '$1 == "99%" { print $2 }' <<<"$out" | to_ms)
  non2xx=$(awk '/Non-2xx/ { print $5 }' <<<"$out")
  sockerr=$(awk -F'[ ,]+' '/Socket errors/ { print $4 + $6 + $8 + $10 }' <<<"$out")
  printf '%s\t%s\t%s\t%s\t%s\n' "$row" "$rps" "$p50" "$p99" "$((${non2xx:-0} + ${sockerr:-0}))" >>"$RESULTS"
}

# CPU ticks (user and system) a process and its children (nginx's workers) have used so far.
cpu_ticks() { # pid
  local total=0 p
  for p in "$1" $(pgrep -P "$1"); do
    total=$((total + $(awk '{ print $14 + $15 }' "/proc/$p/stat")))
  done
  echo "$total"
}

# run_cpu PID ROW URL [header...]: run, and append to cpu.tsv the row and the server's CPU
# microseconds per request. wrk's figure alone can be the client's limit: with TLS 1.3 the client
# makes a key exchange per connection too.
run_cpu() {
  local pid=$1 before after
  shift
  before=$(cpu_ticks "$pid")
  run "$@"
  after=$(cpu_ticks "$pid")
  tail -n 1 "$RESULTS" | awk -v row="$1" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
    -v seconds="$DURATION" -F'\t' '{ printf "%s\t%.1f\n", row, ticks / hz * 1e6 / ($2 * seconds) }' >>"$CPU_RESULTS"
}

# Session resumption: a second TLS connection with the first one's session (ticket) must resume.
# Says whether it did, and the protocol version.
resumes() { # port
  python3 - "$1" "$CA" <<'PY'
import socket, ssl, sys
port, ca = int(sys.argv[1]), sys.argv[2]
ctx = ssl.create_default_context(cafile=ca)
ctx.check_hostname = False
def get(session=None):
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with ctx.wrap_socket(raw, server_hostname="localhost", session=session) as s:
            s.sendall(b"GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            while s.recv(65536):
                pass
            return s.session, s.session_reused, s.version()
session, _, _ = get()
_, reused, version = get(session)
print(("yes, " if reused else "no, ") + version)
PY
}

IFS=, read -r -a CORE_COUNTS <<<"$CORES"
for N in "${CORE_COUNTS[@]}"; do
  if [ "$N" -ge "$MACHINE_CORES" ]; then
    echo
    echo "== $N core(s): skipped, this machine has $MACHINE_CORES cores and wrk and the backend need one apart =="
    continue
  fi
  SERVER_CPUS=0-$((N - 1))
  CLIENT_CPUS=$N-$((MACHINE_CORES - 1))
  WRK_THREADS=$((MACHINE_CORES - N))
  D=$WORK/$N
  mkdir -p "$D"
  RESULTS=$D/results.tsv
  CPU_RESULTS=$D/cpu.tsv
  echo
  echo "== $N core(s) for each server (cpus $SERVER_CPUS); wrk ($WRK_THREADS threads, $CONNECTIONS connections) and the backend on cpus $CLIENT_CPUS =="

  cat >"$D/backend.conf" <<EOF
worker_processes $WRK_THREADS;
daemon off;
pid $D/backend.pid;
error_log $D/backend-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:9200 backlog=4096; location / { return 200 "ok\n"; } }
}
EOF
  cat >"$D/nginx.conf" <<EOF
worker_processes $N;
worker_cpu_affinity auto;
daemon off;
pid $D/nginx.pid;
error_log $D/nginx-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server 127.0.0.1:9200; keepalive 256; }
  ssl_session_cache shared:SSL:10m;
  ssl_session_tickets on;
  # TLS 1.3 as the gateway speaks it (nginx's default from 1.23.4; 1.22 offers up to TLS 1.2, whose
  # resumed sessions skip the key exchange that every TLS 1.3 resumption makes).
  ssl_protocols TLSv1.2 TLSv1.3;
  server {
    listen 127.0.0.1:9201 backlog=4096;
    listen 127.0.0.1:9211 ssl backlog=4096;
    ssl_certificate $TLS_CERT;
    ssl_certificate_key $TLS_KEY;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:9213 ssl backlog=4096;
    ssl_certificate $ECDSA_CERT;
    ssl_certificate_key $ECDSA_KEY;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
  server {
    listen 127.0.0.1:9245 ssl backlog=4096;
    ssl_protocols TLSv1.2;
    ssl_certificate $TLS_CERT;
    ssl_certificate_key $TLS_KEY;
    location / { proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection ""; }
  }
}
EOF
  haproxy_cfg() { # port extra-frontend-lines
    cat <<EOF
global
  nbthread $N
  maxconn 8192
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend front
  bind 127.0.0.1:$1
$2
  default_backend back
backend back
  server backend 127.0.0.1:9200
EOF
  }
  haproxy_cfg 9202 "" >"$D/haproxy.cfg"
  haproxy_cfg 9203 "  http-request deny unless { http_auth_bearer,jwt_header_query('\$.alg') -m str RS256 }
  http-request deny unless { http_auth_bearer,jwt_verify(\"RS256\",\"$WORK/signer.pub.pem\") -m int 1 }" >"$D/haproxy-jwt.cfg"
  gateway_cfg() { # plain-port tls-port admin-port log-level
    sed -e "s|\"\\.\\./|\"$PWD/|g" \
      -e "s|127.0.0.1:8443|127.0.0.1:$2|g" \
      -e "s|127.0.0.1:8080|127.0.0.1:$1|g" \
      -e "s|127.0.0.1:9901|127.0.0.1:$3|" \
      -e "s|addresses = \\[\"127.0.0.1:9180\"\\]|addresses = [\"127.0.0.1:9200\"]|" \
      -e "s|^threads = .*|threads = $N|" \
      -e "s|^level = .*|level = \"$4\"|" \
      conf/gateway.toml
  }
  gateway_cfg 9205 9215 9225 warn >"$D/gateway.toml"
  printf '\n[decision_api]\naddress = "127.0.0.1:9237"\n' >>"$D/gateway.toml"
  # nginx asking the gateway's decision service for every request (auth_request), as the
  # decision service guide's recipe has it, with keep-alive to the decision service and the backend.
  cat >"$D/nginx-authz.conf" <<EOF
worker_processes $N;
worker_cpu_affinity auto;
daemon off;
pid $D/nginx-authz.pid;
error_log $D/nginx-authz-error.log;
events { worker_connections 8192; }
http {
  access_log off;
  keepalive_requests 1000000;
  upstream backend { server 127.0.0.1:9200; keepalive 256; }
  upstream decisions { server 127.0.0.1:9237; keepalive 256; }
  server {
    listen 127.0.0.1:9212 backlog=4096;
    underscores_in_headers on;
    location / {
      auth_request /_ishare;
      auth_request_set \$consumer \$upstream_http_x_consumer_party_id;
      auth_request_set \$decision \$upstream_http_x_decision_id;
      proxy_set_header X-Consumer-Party-Id \$consumer;
      proxy_set_header X-Decision-Id \$decision;
      proxy_set_header Authorization "";
      proxy_set_header delegation_evidence "";
      proxy_set_header service_consumer_assertion "";
      proxy_pass http://backend; proxy_http_version 1.1; proxy_set_header Connection "";
    }
    location = /_ishare {
      internal;
      proxy_pass http://decisions/nginx;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_pass_request_body off;
      proxy_set_header Content-Length "";
      proxy_set_header X-Original-URI \$request_uri;
      proxy_set_header X-Original-Method \$request_method;
    }
  }
}
EOF
  # The baseline serves the rules files its own `check` accepts: an earlier build refuses rules
  # written for features it lacks, and the rows it is compared on use none of them.
  if [ -n "$BASELINE" ]; then
    mkdir -p "$D/baseline-policies" "$D/one-file"
    for f in policies/*.toml; do
      rm -f "$D/one-file"/*.toml
      cp "$f" "$D/one-file/"
      gateway_cfg 9246 9247 9248 warn | sed -e "s|^directory = .*|directory = \"$D/one-file\"|" >"$D/one-file.toml"
      if "$BASELINE" check --config "$D/one-file.toml" >/dev/null 2>&1; then
        cp "$f" "$D/baseline-policies/"
      fi
    done
  fi
  gateway_cfg 9246 9247 9248 warn | sed -e "s|^directory = .*|directory = \"$D/baseline-policies\"|" \
    >"$D/gateway-baseline.toml"
  gateway_cfg 9206 9216 9226 info >"$D/gateway-log.toml"
  # The decision log on, and a route in shadow mode beside the shipped ones.
  mkdir -p "$D/policies"
  cp policies/*.toml "$D/policies/"
  printf '%s\n' '[[route]]' 'name = "containers-shadow"' 'methods = ["GET"]' \
    'path = "/shadow/containers/{id}"' 'upstream = "legacy"' 'mode = "shadow"' '[route.delegation]' \
    'policy_issuer = "EU.EORI.NL000000005"' 'resource_type = "CONTAINER"' 'identifiers = ["{path.id}"]' \
    >"$D/policies/shadow.toml"
  gateway_cfg 9231 9241 9251 warn | sed -e "s|^directory = .*|directory = \"$D/policies\"|" >"$D/gateway-decisions.toml"
  printf '\n[decision_log]\npath = "%s"\n' "$D/decisions.log" >>"$D/gateway-decisions.toml"
  # Every request traced (sample_ratio 1), its spans exported to the backend's nginx as the sink.
  gateway_cfg 9234 9235 9236 warn >"$D/gateway-traced.toml"
  printf '\n[tracing]\notlp_endpoint = "http://127.0.0.1:9200/v1/traces"\n' >>"$D/gateway-traced.toml"
  gateway_cfg 9242 9243 9244 warn >"$D/gateway-sampled.toml"
  printf '\n[tracing]\notlp_endpoint = "http://127.0.0.1:9200/v1/traces"\nsample_ratio = 0.1\n' >>"$D/gateway-sampled.toml"
  gateway_cfg 9238 9239 9240 warn |
    sed -e "s|/tls/server.chain.pem|/tls/server-ecdsa.chain.pem|" -e "s|/tls/server.key.pem|/tls/server-ecdsa.key.pem|" \
      >"$D/gateway-ecdsa.toml"
  head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$D/session.key"
  for i in 7 8; do # the cluster's instances: the stores on Redis, one session secret
    gateway_cfg 920$i 921$i 922$i warn |
      sed -e "s|^# session_secret_file = .*|session_secret_file = \"$D/session.key\"|" >"$D/gateway-$i.toml"
    printf '\n[replay]\nstore = "redis"\nurl = "redis://127.0.0.1:9230/0"\n' >>"$D/gateway-$i.toml"
  done
  balancer_cfg() { # port server...
    local port=$1
    shift
    cat <<EOF
global
  nbthread $N
  maxconn 8192
defaults
  mode http
  timeout connect 2s
  timeout client 30s
  timeout server 30s
  http-reuse always
frontend front
  bind 127.0.0.1:$port
  default_backend gateways
backend gateways
  balance roundrobin
EOF
    for server in "$@"; do echo "  server g$server 127.0.0.1:$server"; done
  }
  balancer_cfg 9209 9207 9208 >"$D/balancer-2.cfg"
  balancer_cfg 9210 9207 >"$D/balancer-1.cfg"

  start "$CLIENT_CPUS" "$D/backend.log" nginx -c "$D/backend.conf"
  FIRST_SERVER=${#PIDS[@]}
  start "$SERVER_CPUS" "$D/nginx.log" nginx -c "$D/nginx.conf"
  NGINX_PID=${PIDS[-1]}
  start "$SERVER_CPUS" "$D/nginx-authz.log" nginx -c "$D/nginx-authz.conf"
  start "$SERVER_CPUS" "$D/haproxy.log" haproxy -db -f "$D/haproxy.cfg"
  start "$SERVER_CPUS" "$D/haproxy-jwt.log" haproxy -db -f "$D/haproxy-jwt.cfg"
  start "$SERVER_CPUS" "$D/bare.log" "$BARE" 127.0.0.1:9204 127.0.0.1:9200 "$N"
  BARE_PID=${PIDS[-1]}
  start "$SERVER_CPUS" "$D/bare-system.log" env BARE_ALLOCATOR=system "$BARE" 127.0.0.1:9214 127.0.0.1:9200 "$N"
  start "$SERVER_CPUS" "$D/gateway.out" "$BIN" run --config "$D/gateway.toml"
  GATEWAY_PID=${PIDS[-1]}
  if [ -n "$BASELINE" ]; then
    start "$SERVER_CPUS" "$D/gateway-baseline.out" "$BASELINE" run --config "$D/gateway-baseline.toml"
    wait_for http://127.0.0.1:9248/ready
  fi
  start "$SERVER_CPUS" "$D/gateway-log.out" "$BIN" run --config "$D/gateway-log.toml"
  start "$SERVER_CPUS" "$D/gateway-decisions.out" "$BIN" run --config "$D/gateway-decisions.toml"
  start "$SERVER_CPUS" "$D/gateway-traced.out" "$BIN" run --config "$D/gateway-traced.toml"
  start "$SERVER_CPUS" "$D/gateway-ecdsa.out" "$BIN" run --config "$D/gateway-ecdsa.toml"
  ECDSA_GATEWAY_PID=${PIDS[-1]}
  start "$SERVER_CPUS" "$D/gateway-sampled.out" "$BIN" run --config "$D/gateway-sampled.toml"
  start "$SERVER_CPUS" "$D/redis.log" redis-server --port 9230 --bind 127.0.0.1 --save "" --appendonly no
  start "$SERVER_CPUS" "$D/gateway-7.out" "$BIN" run --config "$D/gateway-7.toml"
  CLUSTER_PID=${PIDS[-1]}
  start "$SERVER_CPUS" "$D/gateway-8.out" "$BIN" run --config "$D/gateway-8.toml"
  start "$SERVER_CPUS" "$D/balancer-2.log" haproxy -db -f "$D/balancer-2.cfg"
  start "$SERVER_CPUS" "$D/balancer-1.log" haproxy -db -f "$D/balancer-1.cfg"
  for url in http://127.0.0.1:9200/ http://127.0.0.1:9201/ http://127.0.0.1:9202/ \
    http://127.0.0.1:9204/ http://127.0.0.1:9225/ready http://127.0.0.1:9226/ready http://127.0.0.1:9251/ready http://127.0.0.1:9236/ready \
    http://127.0.0.1:9227/ready http://127.0.0.1:9228/ready http://127.0.0.1:9209/status \
    http://127.0.0.1:9212/status http://127.0.0.1:9214/ http://127.0.0.1:9240/ready \
    http://127.0.0.1:9244/ready; do
    wait_for "$url"
  done
  curl -fs -o /dev/null -H "Authorization: Bearer $JWT" http://127.0.0.1:9203/ ||
    { echo "HAProxy does not accept the testbed's token: see $D/haproxy-jwt.log" >&2; exit 1; }

  TOKEN=$(client token --url https://127.0.0.1:9215)
  BEARER="Authorization: Bearer $TOKEN"
  # A route whose rule reads the JSON body: the shipped NGSI-LD batch upsert of one entity (each
  # element a decision; the carrier may update containers), its body read whole and forwarded.
  CARRIER_BEARER="Authorization: Bearer $("$BIN" client --testbed data/testbed --as EU.EORI.NL000000002 --raw token --url https://127.0.0.1:9215)"
  UPSERT='[{"id":"urn:ngsi-ld:Container:C1","type":"CONTAINER"}]'
  cat >"$D/upsert.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '$UPSERT'
LUA
  warm_body() { # a first call, so that the body row measures a cached decision
    local answer
    answer=$(curl -s -w ' (%{http_code})' -H "$CARRIER_BEARER" -H 'Content-Type: application/json' \
      --data-binary "$UPSERT" http://127.0.0.1:9205/ngsi-ld/v1/entityOperations/upsert)
    [[ "$answer" == *"(200)" ]] ||
      { echo "the gateway refuses the NGSI-LD upsert: $answer" >&2; exit 1; }
  }
  warm() { # port: a first call, so that the delegated route measures a cached decision
    local answer
    answer=$(curl -s -w ' (%{http_code})' -H "$BEARER" "http://127.0.0.1:$1/api/containers/C1")
    [[ "$answer" == *"(200)" ]] ||
      { echo "the gateway on port $1 refuses the delegated call: $answer" >&2; exit 1; }
  }
  fresh_evidence() { # evidence from the registry, fetched right before it is used (it lives 30 s)
    client evidence --registry https://127.0.0.1:9104 --issuer EU.EORI.NL000000005 --type CONTAINER \
      --id C7 --attribute DOCUMENTS --action iSHARE.READ --service-provider EU.EORI.NL000000003
  }

  # gateway_row ROW PATH [header...]: the row at this build's gateway, then at the baseline's.
  # The gateway's own CPU a request is kept too: what a container's CPU request rests on.
  gateway_row() {
    local row=$1 path=$2
    shift 2
    run_cpu "$GATEWAY_PID" "gateway: $row" "http://127.0.0.1:9205$path" "$@"
    [ -z "$BASELINE" ] || run "baseline: $row" "http://127.0.0.1:9246$path" "$@"
  }

  for round in $(seq 1 "$ROUNDS"); do
    echo "   round $round of $ROUNDS"
    run "backend called directly" http://127.0.0.1:9200/status
    run "nginx proxy_pass" http://127.0.0.1:9201/status
    run "HAProxy" http://127.0.0.1:9202/status
    run "HAProxy RS256 jwt_verify" http://127.0.0.1:9203/status "Authorization: Bearer $JWT"
    run "bare pingora, system allocator" http://127.0.0.1:9214/status
    run "bare pingora (no checks)" http://127.0.0.1:9204/status
    gateway_row "public route" /status
    gateway_row "bearer token" /api/my/shipments/x "$BEARER"
    warm 9205
    [ -z "$BASELINE" ] || warm 9246
    gateway_row "delegated, cached decision" /api/containers/C1 "$BEARER"
    warm_body
    WRK_SCRIPT="$D/upsert.lua" run_cpu "$GATEWAY_PID" "gateway: JSON body, NGSI-LD upsert" \
      http://127.0.0.1:9205/ngsi-ld/v1/entityOperations/upsert "$CARRIER_BEARER"
    warm 9212
    run "nginx auth_request + decision service" http://127.0.0.1:9212/api/containers/C1 "$BEARER"
    EVIDENCE=$(fresh_evidence)
    run_cpu "$GATEWAY_PID" "gateway: evidence in header" http://127.0.0.1:9205/api/containers/C7/documents "$BEARER" "delegation_evidence: $EVIDENCE"
    if [ -n "$BASELINE" ]; then
      EVIDENCE=$(fresh_evidence)
      run "baseline: evidence in header" http://127.0.0.1:9246/api/containers/C7/documents "$BEARER" "delegation_evidence: $EVIDENCE"
    fi
    warm 9206
    run "gateway: delegated, access log on" http://127.0.0.1:9206/api/containers/C1 "$BEARER"
    warm 9231
    run "gateway: delegated, decision log on" http://127.0.0.1:9231/api/containers/C1 "$BEARER"
    run "gateway: shadow route, Deny forwarded" http://127.0.0.1:9231/shadow/containers/SECRET-1 "$BEARER"
    warm 9234
    run "gateway: delegated, tracing on" http://127.0.0.1:9234/api/containers/C1 "$BEARER" \
      "traceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    warm 9242
    run "gateway: delegated, tracing 1 in 10" http://127.0.0.1:9242/api/containers/C1 "$BEARER"
    warm 9207
    warm 9208
    run "cluster: balancer, 1 gateway" http://127.0.0.1:9210/api/containers/C1 "$BEARER"
    run "cluster: balancer, 2 gateways" http://127.0.0.1:9209/api/containers/C1 "$BEARER"
    run "nginx TLS, keep-alive" https://127.0.0.1:9211/status
    # The same route in plain HTTP right before its TLS row: rows minutes apart drift apart on a
    # shared machine by more than the difference measured here.
    run "gateway: public route, beside TLS" http://127.0.0.1:9205/status
    run "gateway TLS, keep-alive" https://127.0.0.1:9215/status
    run_cpu "$NGINX_PID" "nginx TLS, new connections" https://127.0.0.1:9211/status "Connection: close"
    run_cpu "$GATEWAY_PID" "gateway TLS, new connections" https://127.0.0.1:9215/status "Connection: close"
    run_cpu "$NGINX_PID" "nginx TLS ECDSA, new connections" https://127.0.0.1:9213/status "Connection: close"
    run_cpu "$ECDSA_GATEWAY_PID" "gateway TLS ECDSA, new connections" https://127.0.0.1:9239/status "Connection: close"
    run_cpu "$NGINX_PID" "nginx TLS 1.2 only, new connections" https://127.0.0.1:9245/status "Connection: close"
  done

  python3 - "$RESULTS" "$ROUNDS" "$CPU_RESULTS" <<'PY'
import statistics, sys
rows, order = {}, []
for line in open(sys.argv[1]):
    name, rps, p50, p99, failures = line.rstrip("\n").split("\t")
    if name not in rows:
        order.append(name)
        rows[name] = []
    rows[name].append((float(rps), float(p50), float(p99), int(failures)))
med = {n: [statistics.median(v[i] for v in rows[n]) for i in range(3)] + [sum(v[3] for v in rows[n])] for n in order}
base = {"nginx TLS, keep-alive": "nginx TLS, keep-alive", "gateway TLS, keep-alive": "nginx TLS, keep-alive",
        "nginx TLS, new connections": "nginx TLS, new connections",
        "gateway TLS, new connections": "nginx TLS, new connections",
        "nginx TLS ECDSA, new connections": "nginx TLS ECDSA, new connections",
        "gateway TLS ECDSA, new connections": "nginx TLS ECDSA, new connections",
        "nginx TLS 1.2 only, new connections": "nginx TLS, new connections"}
jwt = med["HAProxy RS256 jwt_verify"][0]
direct_p99 = med["backend called directly"][2]
print(f"{'target':38} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'non-2xx':>8} {'vs nginx':>9} {'vs HAProxy jwt':>15}")
for n in order:
    rps, p50, p99, failures = med[n]
    ref = med[base.get(n, "nginx proxy_pass")][0]
    vs_jwt = f"{rps / jwt:.2f}" if n not in base and n != "backend called directly" else ""
    vs_nginx = f"{rps / ref:.2f}" if n != "backend called directly" else ""
    print(f"{n:38} {rps:9.0f} {p50:8.3f} {p99:8.3f} {failures:8d} {vs_nginx:>9} {vs_jwt:>15}")
full = med["gateway: delegated, cached decision"][2]
print(f"p99 added by full enforcement over the backend called directly: {full - direct_p99:.3f} ms")
rps = lambda n: med[n][0]
bare, cached = rps("bare pingora (no checks)"), rps("gateway: delegated, cached decision")
print("\nratios (req/s):")
print(f"  bare pingora on mimalloc / on the system allocator: {bare / rps('bare pingora, system allocator'):.2f}")
for n in ("gateway: public route", "gateway: bearer token", "gateway: delegated, cached decision",
          "gateway: evidence in header"):
    print(f"  {n} / bare pingora: {rps(n) / bare:.2f}")
print(f"  full enforcement (bearer, cached decision, licence headers) / HAProxy RS256 jwt_verify: {cached / jwt:.2f}")
print(f"  evidence in header / cached decision: {rps('gateway: evidence in header') / cached:.2f}")
print(f"  JSON body (NGSI-LD upsert) / cached decision: {rps('gateway: JSON body, NGSI-LD upsert') / cached:.2f}")
for n in ("access log on", "decision log on", "tracing on", "tracing 1 in 10"):
    print(f"  delegated, {n} / off: {rps('gateway: delegated, ' + n) / cached:.2f}")
print(f"  gateway TLS keep-alive / the same route in plain HTTP, measured right before: {rps('gateway TLS, keep-alive') / rps('gateway: public route, beside TLS'):.2f}")
for cert in ("", " ECDSA"):
    print(f"  gateway / nginx, TLS{cert} new connections: {rps(f'gateway TLS{cert}, new connections') / rps(f'nginx TLS{cert}, new connections'):.2f}")
print(f"  gateway (TLS 1.3) / nginx on TLS 1.2 only, new connections: {rps('gateway TLS, new connections') / rps('nginx TLS 1.2 only, new connections'):.2f}")
cpu = {}
for line in open(sys.argv[3]):
    name, us = line.rstrip("\n").split("\t")
    cpu.setdefault(name, []).append(float(us))
cpu = {n: statistics.median(v) for n, v in cpu.items()}
print("\nserver CPU per request (µs, median of the rounds; TLS rows: new connections):")
for n, us in cpu.items():
    print(f"  {n:38} {us:7.1f}")
for cert in ("", " ECDSA"):
    print(f"  nginx / gateway, TLS{cert}: {cpu[f'nginx TLS{cert}, new connections'] / cpu[f'gateway TLS{cert}, new connections']:.2f}")
baseline = [n for n in ("public route", "bearer token", "delegated, cached decision", "evidence in header")
            if f"baseline: {n}" in med]
if baseline:
    print("\nthis build / the baseline (req/s, rows interleaved):")
    for n in baseline:
        print(f"  {n:36} {rps('gateway: ' + n) / rps('baseline: ' + n):.2f}")
bad = [n for n in order if med[n][3]]
if bad:
    print("\n" + "!" * 78)
    for n in bad:
        print(f"!!! {n}: {med[n][3]} non-2xx answers or socket errors: its figures do not count")
    print("!" * 78)
PY
  echo "gateway resident memory at its peak (VmHWM): $(awk '/VmHWM/ { printf "%.0f MiB", $2 / 1024 }' "/proc/$GATEWAY_PID/status")"
  echo "session resumption: nginx $(resumes 9211), nginx TLS 1.2 only $(resumes 9245), gateway $(resumes 9215)"

  # Latency at a constant rate: half the saturating rate wrk found for the row, the backend called
  # directly at the same rate beside it. Every other server on the servers' cores is paused
  # meanwhile (SIGSTOP): their timers and health checks would otherwise land in the tail.
  saturating() { awk -F'\t' -v row="$1" '$1 == row { print $2 }' "$RESULTS" | median; }
  paced() { # rate url [header...]: p50, p99, p99.9 ms, the answers that failed, and the
    # generator's own latest release (ms)
    local out
    out=$(taskset -c "$CLIENT_CPUS" "$RATE" "$2" "$1" "$DURATION" "$CONNECTIONS" "${@:3}")
    awk -F'\t' '{ printf "%s\t%s\t%s\t%d\t%s\n", $5, $7, $8, $1 - $2 + $3, $10 }' <<<"$out"
  }
  # The gateway's own request durations (from its head read to its answer written), summed over
  # its routes, and the bucket that holds the p99.9 of the requests between two readings: a
  # pause of the gateway's core while it holds requests lengthens them, one of another core not.
  held() { curl -s http://127.0.0.1:9225/metrics | grep '^ishare_gateway_request_duration_seconds_bucket'; }
  held_p999() { # before after
    python3 - "$1" "$2" <<'PY'
import re, sys
def buckets(path):
    n = {}
    for line in open(path):
        m = re.search(r'le="([^"]+)"\} (\d+)', line)
        if m:
            n[float(m.group(1))] = n.get(float(m.group(1)), 0) + int(m.group(2))
    return n
a, b = buckets(sys.argv[1]), buckets(sys.argv[2])
d = {le: b[le] - a.get(le, 0) for le in b}
total = d.get(float("inf"), 0)
if total == 0:
    print("-")
else:
    le = min(le for le, c in d.items() if c >= 0.999 * total)
    print("over" if le == float("inf") else f"<= {le * 1e3:g}")
PY
  }
  LATENCY=$D/latency.tsv
  : >"$LATENCY"
  latency() { # pid row url [header...]
    local rate pid row own=-
    rate=$(saturating "$2" | awk '{ printf "%d", $1 / 2 }')
    for pid in "${PIDS[@]:FIRST_SERVER}"; do [ "$pid" = "$1" ] || kill -STOP "$pid"; done
    [ "$1" = "$GATEWAY_PID" ] && held >"$D/held-before"
    row=$(paced "$rate" "${@:3}")
    [ "$1" = "$GATEWAY_PID" ] && held >"$D/held-after" && own=$(held_p999 "$D/held-before" "$D/held-after")
    printf '%s\t%s\t%s\t%s\t%s\n' "$2" "$rate" "$row" \
      "$(paced "$rate" http://127.0.0.1:9200/status | cut -f2)" "$own" >>"$LATENCY"
    for pid in "${PIDS[@]:FIRST_SERVER}"; do kill -CONT "$pid"; done
  }
  latency "$NGINX_PID" "nginx proxy_pass" http://127.0.0.1:9201/status
  latency "$BARE_PID" "bare pingora (no checks)" http://127.0.0.1:9204/status
  latency "$GATEWAY_PID" "gateway: public route" http://127.0.0.1:9205/status
  latency "$GATEWAY_PID" "gateway: bearer token" http://127.0.0.1:9205/api/my/shipments/x "$BEARER"
  latency "$GATEWAY_PID" "gateway: delegated, cached decision" http://127.0.0.1:9205/api/containers/C1 "$BEARER"
  EVIDENCE=$(fresh_evidence)
  latency "$GATEWAY_PID" "gateway: evidence in header" http://127.0.0.1:9205/api/containers/C7/documents "$BEARER" "delegation_evidence: $EVIDENCE"
  # How long the machine pauses a busy core by itself: a clock-reading loop pinned to each core
  # (examples/pauses.rs), all at once, every server paused. A host that pauses its virtual cores
  # while they are busy puts its pauses in every server's tail at a constant rate.
  for pid in "${PIDS[@]:FIRST_SERVER}"; do kill -STOP "$pid"; done
  METERS=()
  for cpu in $(seq 0 $((MACHINE_CORES - 1))); do
    taskset -c "$cpu" "$PAUSES" "$DURATION" >"$D/pauses-$cpu.tsv" &
    METERS+=($!)
  done
  wait "${METERS[@]}"
  for pid in "${PIDS[@]:FIRST_SERVER}"; do kill -CONT "$pid"; done
  pauses() { # label cpus: the gaps of those cores' loops together
    local cpu files=()
    for cpu in $(seq "${2%-*}" "${2#*-}"); do files+=("$D/pauses-$cpu.tsv"); done
    awk -F'\t' -v label="$1" '{ a += $1; b += $2; if ($3 > m) m = $3 }
      END { printf "%s: %d gaps over 1 ms, %d over 5 ms, the longest %.1f ms", label, a, b, m }' "${files[@]}"
  }
  echo
  echo "the machine's own pauses, every core busy with a clock-reading loop for $DURATION s:"
  echo "  $(pauses "the servers' cores ($SERVER_CPUS)" "$SERVER_CPUS"); $(pauses "the others ($CLIENT_CPUS)" "$CLIENT_CPUS")"
  echo "  (a latency row's p99.9 within the longest gap cannot be told apart from the machine; \"late\""
  echo "  is how late the generator released its latest request, its core busy or paused: a wait up"
  echo "  to that long may be the generator's; \"its own p99.9\" is the gateway's, by its own clock from"
  echo "  the head read to the answer written: the bucket of its duration histogram that holds it)"
  echo "constant rate, half the saturating rate, $DURATION s each ($CONNECTIONS connections):"
  awk -F'\t' 'BEGIN { printf "%-38s %8s %8s %8s %9s %14s %9s %8s %9s %14s\n", "target", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "backend p99", "p99 added", "failed", "late ms", "its own p99.9" }
    { printf "%-38s %8d %8.3f %8.3f %9.3f %14.3f %9.3f %8d %9.3f %14s\n", $1, $2, $3, $4, $5, $8, $4 - $8, $6, $7, $9
      if ($6 > 0) bad = bad "!!! " $1 ": " $6 " answers failed or were not 2xx: its figures do not count\n" }
    END { printf "%s", bad }' "$LATENCY"
  echo "spans of the traced gateway: $(curl -s http://127.0.0.1:9236/metrics |
    awk -F'[{}" ]+' '/^ishare_gateway_spans_total/ { printf "%s %s ", $3, $4 }')"

  # /connect/token: fresh assertions (they live 30 s, so they are made right before), each sent
  # once; wrk stops after $ISSUANCES answers. The gateway's CPU time per issuance gives the rate
  # one core sustains; on Redis, the metrics give the share of each issuance spent waiting for it.
  issuance() { # label port admin-port pid
    "$FORMS" data/testbed "$CONSUMER" EU.EORI.NL000000003 $((ISSUANCES + 2 * CONNECTIONS)) >"$D/forms.txt"
    cat >"$D/token.lua" <<LUA
local forms, sent, answered = {}, 0, 0
for line in io.lines("$D/forms.txt") do forms[#forms + 1] = line end
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
request = function()
  sent = sent + 1
  return wrk.format(nil, "/connect/token", nil, forms[math.min(sent, #forms)])
end
response = function(status)
  answered = answered + 1
  if answered >= $ISSUANCES then wrk.thread:stop() end
end
LUA
    local pid=$4 before after out answered non2xx token_before redis_before token_after redis_after
    cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
    # seconds spent in token requests and in Redis commands, from the metrics
    seconds() {
      curl -s "http://127.0.0.1:$3/metrics" | awk '
        /^ishare_gateway_request_duration_seconds_sum\{route="token"\}/ { t = $2 }
        /^ishare_gateway_redis_call_duration_seconds_sum/ { r += $2 }
        END { printf "%f %f\n", t, r }'
    }
    read -r token_before redis_before <<<"$(seconds "$@")"
    before=$(cpu_ticks)
    # wrk runs out its duration after the thread stops, so its req/s says nothing here.
    out=$(taskset -c "$CLIENT_CPUS" wrk -t1 -c"$CONNECTIONS" -d10s -s "$D/token.lua" "http://127.0.0.1:$2")
    after=$(cpu_ticks)
    read -r token_after redis_after <<<"$(seconds "$@")"
    answered=$(awk '/requests in/ { print $1 }' <<<"$out")
    non2xx=$(awk '/Non-2xx/ { print $5 }' <<<"$out")
    awk -v label="$1" -v n="$answered" -v ticks=$((after - before)) -v hz="$(getconf CLK_TCK)" \
      -v bad="${non2xx:-0}" -v t="$token_before $token_after" -v r="$redis_before $redis_after" 'BEGIN {
      split(t, tt, " "); split(r, rr, " ")
      us = ticks / hz * 1e6 / n
      printf "token issuance, %s, fresh assertions: %d answered; %.0f us of gateway CPU each = %.0f issuances/s per core; %d non-2xx", label, n, us, 1e6 / us, bad
      if (rr[2] > rr[1]) printf "; %.1f %% of the time in token requests waiting for Redis", 100 * (rr[2] - rr[1]) / (tt[2] - tt[1])
      print ""
      if (bad > 0) print "!!! token issuance " label ": " bad " non-2xx answers: the figure does not count"
    }'
  }
  issuance "memory store" 9205 9225 "$GATEWAY_PID"
  issuance "Redis store" 9207 9227 "$CLUSTER_PID"
  for pid in "${PIDS[@]:1}"; do kill "$pid" 2>/dev/null || true; done
  wait "${PIDS[@]:1}" 2>/dev/null || true
  PIDS=("${PIDS[0]}")
done
