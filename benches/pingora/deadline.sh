#!/usr/bin/env bash
# pingora-core 0.9.1 with one timer per downstream connection (benches/pingora/deadline.patch)
# against pingora-core as published, on the bare proxy (examples/bare_proxy.rs), in one run.
#
#   benches/pingora/deadline.sh [--duration SECONDS] [--rounds N] [--pause MS]
#
# Both builds are made in a temporary directory: the bare proxy's source as a project of its own,
# with this project's Cargo.lock (the same versions of every crate), built once as it is and once
# with `[patch.crates-io]` naming a patched copy of pingora-core from the local cargo registry.
# Offline; nothing is added to this project's Cargo.toml or target directory.
#
# Figures, each build in front of the same nginx `return 200` backend, keep-alive everywhere:
# - instructions per request under callgrind (counted only while wrk runs, after a warm-up):
#   wrk -t1 -c4 back to back (the proxy saturated: the next request is already waiting when a
#   connection is read), and wrk -t1 -c4 with a pause of --pause ms (20 by default) before each
#   request (each connection idle between requests, as on a server that is not saturated);
# - req/s, the proxy alone on the first core, wrk and the backend on the others, 64 connections,
#   the two builds loaded in turn for --rounds rounds (medians).
#
# Needs cargo, valgrind, wrk, nginx, curl, patch and taskset, and at least 2 cores.
set -euo pipefail
cd "$(dirname "$0")/../.."

DURATION=10
ROUNDS=3
PAUSE=20
while [ $# -gt 0 ]; do
  case "$1" in
    --duration) DURATION=$2; shift 2 ;;
    --rounds) ROUNDS=$2; shift 2 ;;
    --pause) PAUSE=$2; shift 2 ;;
    *) echo "usage: $0 [--duration SECONDS] [--rounds N] [--pause MS]" >&2; exit 2 ;;
  esac
done

missing=()
for tool in cargo valgrind callgrind_control callgrind_annotate wrk nginx curl patch taskset; do
  command -v "$tool" >/dev/null 2>&1 || missing+=("$tool")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}" >&2
  exit 1
fi
CORES=$(nproc)
if [ "$CORES" -lt 2 ]; then
  echo "needs 2 cores: one for the proxy, one for wrk and the backend" >&2
  exit 1
fi
SERVER_CPU=0
CLIENT_CPUS=1-$((CORES - 1))

CRATE=
for dir in "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/pingora-core-0.9.1; do
  [ -f "$dir/Cargo.toml" ] && CRATE=$dir
done
if [ -z "$CRATE" ]; then
  echo "pingora-core 0.9.1 is not in the local cargo registry (cargo fetch first)" >&2
  exit 1
fi

PATCH=$PWD/benches/pingora/deadline.patch
WORK=$(mktemp -d)
PIDS=()
cleanup() {
  local pid
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# The bare proxy as a project of its own, on this project's versions of its dependencies.
mkdir -p "$WORK/bare/src"
cp examples/bare_proxy.rs "$WORK/bare/src/main.rs"
cp Cargo.lock "$WORK/bare/Cargo.lock"
cat >"$WORK/bare/Cargo.toml" <<EOF
[package]
name = "bare_proxy"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
$(grep -E '^(pingora|async-trait|mimalloc|libc) = ' Cargo.toml)

[profile.release]
debug = "line-tables-only"
EOF
cp -r "$CRATE" "$WORK/pingora-core"
patch -s -p1 -d "$WORK/pingora-core" <"$PATCH"

build() { # name
  echo "building the bare proxy ($1)…"
  (cd "$WORK/bare" && CARGO_TARGET_DIR="$WORK/target" nice -n 10 cargo build --release --offline -q)
  cp "$WORK/target/release/bare_proxy" "$WORK/$1"
}
build unpatched
printf '\n[patch.crates-io]\npingora-core = { path = "%s" }\n' "$WORK/pingora-core" \
  >>"$WORK/bare/Cargo.toml"
build patched

wait_for() { # url
  for _ in $(seq 1 300); do
    curl -fs -o /dev/null "$1" && return 0
    sleep 0.2
  done
  echo "not answering: $1" >&2
  exit 1
}

# Ports: the backend 9270; the proxies 9271 (unpatched) and 9272 (patched) natively, 9273 under
# callgrind.
cat >"$WORK/backend.conf" <<EOF
worker_processes 1;
daemon off;
pid $WORK/backend.pid;
error_log $WORK/backend-error.log;
events { worker_connections 4096; }
http {
  access_log off;
  keepalive_requests 1000000;
  server { listen 127.0.0.1:9270 backlog=4096; location / { return 200 "ok\n"; } }
}
EOF
taskset -c "$CLIENT_CPUS" nginx -c "$WORK/backend.conf" >"$WORK/backend.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:9270/

cat >"$WORK/pause.lua" <<EOF
function delay()
  return $PAUSE
end
EOF

requests() { awk '/requests in/ { print $1 }'; }

# instructions NAME LOAD...: instructions per request of one build under callgrind, for each load
# (back-to-back, paused), appended to callgrind.tsv.
instructions() {
  local name=$1 pid out load n total
  shift
  taskset -c "$SERVER_CPU" valgrind --tool=callgrind --instr-atstart=no \
    --callgrind-out-file="$WORK/callgrind.$name" "$WORK/$name" 127.0.0.1:9273 127.0.0.1:9270 1 \
    >"$WORK/callgrind-$name.log" 2>&1 &
  pid=$!
  PIDS+=("$pid")
  wait_for http://127.0.0.1:9273/
  for load in "$@"; do
    local args=(-t1 -c4)
    [ "$load" = paused ] && args+=(-s "$WORK/pause.lua")
    taskset -c "$CLIENT_CPUS" wrk "${args[@]}" -d3s http://127.0.0.1:9273/ >/dev/null
    callgrind_control -z "$pid" >/dev/null 2>&1
    callgrind_control -i on "$pid" >/dev/null 2>&1
    out=$(taskset -c "$CLIENT_CPUS" wrk "${args[@]}" -d"${DURATION}s" http://127.0.0.1:9273/)
    callgrind_control -i off "$pid" >/dev/null 2>&1
    rm -f "$WORK/callgrind.$name".*
    callgrind_control -d "$pid" >/dev/null 2>&1
    n=$(requests <<<"$out")
    total=$(callgrind_annotate "$WORK/callgrind.$name".* 2>/dev/null |
      awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
    [ -n "$n" ] && [ -n "$total" ] || { echo "no figures for $name ($load)" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\n' "$name" "$load" "$n" "$total" >>"$WORK/callgrind.tsv"
  done
  kill "$pid"
  wait "$pid" 2>/dev/null || true
}

echo "instructions under callgrind, $DURATION s per load…"
instructions unpatched back-to-back paused
instructions patched back-to-back paused

taskset -c "$SERVER_CPU" "$WORK/unpatched" 127.0.0.1:9271 127.0.0.1:9270 1 >"$WORK/unpatched.log" 2>&1 &
PIDS+=($!)
taskset -c "$SERVER_CPU" "$WORK/patched" 127.0.0.1:9272 127.0.0.1:9270 1 >"$WORK/patched.log" 2>&1 &
PIDS+=($!)
wait_for http://127.0.0.1:9271/
wait_for http://127.0.0.1:9272/
echo "req/s, $ROUNDS rounds of $DURATION s per build, interleaved…"
WRK_THREADS=$((CORES - 1))
for port in 9271 9272; do
  taskset -c "$CLIENT_CPUS" wrk -t"$WRK_THREADS" -c64 -d3s "http://127.0.0.1:$port/" >/dev/null
done
for round in $(seq 1 "$ROUNDS"); do
  for build in unpatched:9271 patched:9272; do
    out=$(taskset -c "$CLIENT_CPUS" wrk -t"$WRK_THREADS" -c64 -d"${DURATION}s" "http://127.0.0.1:${build#*:}/")
    printf '%s\t%s\t%s\n' "${build%%:*}" "$round" "$(awk '/Requests\/sec/ { print $2 }' <<<"$out")" \
      >>"$WORK/rps.tsv"
  done
done

echo
awk -F'\t' '
  NR == FNR { ipr[$1 "," $2] = $4 / $3; n[$1 "," $2] = $3; next }
  { rps[$1] = rps[$1] " " $3 }
  END {
    printf "%-48s %12s %12s %8s\n", "", "unpatched", "patched", "ratio"
    split("back-to-back paused", loads, " ")
    for (i = 1; i <= 2; i++) {
      l = loads[i]
      printf "%-48s %12.0f %12.0f %8.4f\n", "instructions per request, " l " (wrk -c4)", \
        ipr["unpatched," l], ipr["patched," l], ipr["patched," l] / ipr["unpatched," l]
    }
    for (b in rps) { m = split(substr(rps[b], 2), v, " "); med[b] = median(v, m) }
    printf "%-48s %12.0f %12.0f %8.4f\n", "req/s, median of the rounds (wrk -c64)", \
      med["unpatched"], med["patched"], med["patched"] / med["unpatched"]
    printf "req/s of each round: unpatched%s; patched%s\n", rps["unpatched"], rps["patched"]
  }
  function median(v, m,    i, j, t) {
    for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
    return m % 2 ? v[(m + 1) / 2] : (v[m / 2] + v[m / 2 + 1]) / 2
  }' "$WORK/callgrind.tsv" "$WORK/rps.tsv"
