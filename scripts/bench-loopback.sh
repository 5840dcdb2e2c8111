#!/usr/bin/env bash
# Loopback throughput of /check against a no-op handler on the same server.
#
# Starts the real limiterd on 127.0.0.1 with testdata/rules.yaml and drives it
# with wrk (same tool, same connection count, same Lua request generator),
# alternating ROUNDS times between /healthz (the server's no-op handler:
# fixed JSON, no limiter work) and /check with a random key out of KEYS, and
# prints requests/s of every run and the ratio of the medians.
#
# With NODES=N (N > 1) it also starts an N-node cluster on 127.0.0.1 (the
# same binary and rules) and adds a third run to every round, /check on the
# cluster's node 1, so the three are interleaved under the same conditions:
# the cluster node's ratio to the single node is the cost of being one
# node of N (its peers run on the same cores and merge what it sends).
# It also prints the CPU time (user and system, from /proc) the single node
# and the cluster's node 1 and its peers spent per check answered in those
# rounds, which tells the node's own cost apart from its peers'.
#
#   scripts/bench-loopback.sh            # DURATION=10s CONNS=32 KEYS=10000 ROUNDS=3
#   DURATION=30s CONNS=64 scripts/bench-loopback.sh
#   NODES=8 scripts/bench-loopback.sh    # single node vs a node of 8
#   NODES=8 NODE_ARGS="-sync-datagram-bytes 1400" scripts/bench-loopback.sh
#                                        # flags for the cluster's nodes only
#                                        # (here: a LAN's datagrams, not the
#                                        # loopback's 60,000 bytes)
#
# WARMUP=1 (the default) first runs each service once, unreported in the
# medians: the first run of a cluster meets every key new on all N nodes
# (each peer inserts it), which a cluster that has been up a window no
# longer does. Its rates are printed apart; WARMUP=0 counts from the start.
set -euo pipefail
cd "$(dirname "$0")/.."

DURATION=${DURATION:-10s}
CONNS=${CONNS:-32}
KEYS=${KEYS:-10000}
THREADS=${THREADS:-1}
ROUNDS=${ROUNDS:-3}
WARMUP=${WARMUP:-1}
NODES=${NODES:-0}
NODE_ARGS=${NODE_ARGS:-}

if ! command -v wrk >/dev/null; then
  echo "wrk not found; installing it from Debian's packages" >&2
  { apt-get install -y wrk || { apt-get update && apt-get install -y wrk; }; } >/dev/null
fi

go build -o bin/limiterd ./cmd/limiterd
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
addr=127.0.0.1:$port
bin/limiterd -http-addr "$addr" -rules testdata/rules.yaml -log-level warn &
pids=($!)
trap 'kill "${pids[@]}" 2>/dev/null' EXIT
for _ in $(seq 50); do curl -fs "http://$addr/readyz" >/dev/null && break; sleep 0.1; done

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
caddr=
haddrs=()
if [ "$NODES" -gt 1 ]; then
  seed=
  for i in $(seq 1 "$NODES"); do
    h=127.0.0.1:$(freeport) g=127.0.0.1:$(freeport)
    args=(-node-name "node$i" -http-addr "$h" -bind-addr "$g" -rules testdata/rules.yaml -log-level warn)
    # shellcheck disable=SC2206 # NODE_ARGS is split into flags on purpose
    args+=($NODE_ARGS)
    if [ -z "$seed" ]; then seed=$g caddr=$h; else args+=(-join "$seed"); fi
    haddrs+=("$h")
    bin/limiterd "${args[@]}" &
    pids+=($!)
  done
  for _ in $(seq 300); do
    n=$(curl -fs "http://$caddr/cluster" | grep -o '"state":"alive"' | wc -l) || n=0
    [ "$n" -eq "$NODES" ] && break
    sleep 0.1
  done
  [ "$n" -eq "$NODES" ] || { echo "the $NODES-node cluster did not converge" >&2; exit 1; }
fi

run() { # $1 = path prefix, $2 = address (default the single node); prints requests/s
  wrk -t"$THREADS" -c"$CONNS" -d"$DURATION" -s scripts/random-key.lua "http://${2:-$addr}" -- "$KEYS" GET "$1{key}" | awk '/Requests\/sec/ {print $2}'
}
# cputicks: the CPU ticks used so far by the cluster's node 1 and by its
# peers together (the first pid is the single node, then node 1).
cputicks() {
  local one=0 peers=0 i t
  for i in "${!pids[@]}"; do
    [ "$i" -eq 0 ] && continue
    t=$(awk '{print $14 + $15}' "/proc/${pids[$i]}/stat")
    if [ "$i" -eq 1 ]; then one=$((one + t)); else peers=$((peers + t)); fi
  done
  echo "$one $peers"
}
noops=() checks=() clustered=()
cone=0 cpeers=0 csingle=0
warm=()
for _ in $(seq "$WARMUP"); do
  warm+=("no-op $(run "/healthz?key=client-")" "/check $(run "/check?key=client-")")
  [ -n "$caddr" ] && warm+=("node-of-$NODES $(run "/check?key=client-" "$caddr")")
done
for _ in $(seq "$ROUNDS"); do
  noops+=("$(run "/healthz?key=client-")")
  s0=$(awk '{print $14 + $15}' "/proc/${pids[0]}/stat")
  checks+=("$(run "/check?key=client-")")
  s1=$(awk '{print $14 + $15}' "/proc/${pids[0]}/stat")
  csingle=$((csingle + s1 - s0))
  if [ -n "$caddr" ]; then
    read -r o0 p0 < <(cputicks)
    clustered+=("$(run "/check?key=client-" "$caddr")")
    read -r o1 p1 < <(cputicks)
    cone=$((cone + o1 - o0)) cpeers=$((cpeers + p1 - p0))
  fi
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2}'; }
noop=$(median "${noops[@]}")
check=$(median "${checks[@]}")
echo "wrk -t$THREADS -c$CONNS -d$DURATION, $KEYS keys, $ROUNDS rounds after $WARMUP warm-up, $(nproc) cores"
[ "$WARMUP" -gt 0 ] && echo "warm-up req/s (not counted): ${warm[*]}"
echo "no-op (/healthz) req/s: ${noops[*]} (median $noop)"
echo "/check           req/s: ${checks[*]} (median $check)"
awk -v c="$check" -v n="$noop" 'BEGIN {printf "ratio /check / no-op (medians): %.3f\n", c / n}'
# CPU per check: the process's user and system time over the checks it
# answered in the rounds (req/s x the round's seconds), so that a node of
# the cluster can be set against the single node check for check.
secs() { case $1 in *s) echo "${1%s}" ;; *m) echo $((${1%m} * 60)) ;; *h) echo $((${1%h} * 3600)) ;; *) echo "$1" ;; esac; }
dur_s=$(secs "$DURATION")
sum() { printf '%s\n' "$@" | awk '{s += $1} END {print s}'; }
hz=$(getconf CLK_TCK)
awk -v s="$csingle" -v hz="$hz" -v r="$(sum "${checks[@]}")" -v d="$dur_s" -v n="$ROUNDS" 'BEGIN {printf "CPU of the single node during its /check rounds: %.1f s (%.2f cores), %.1f us per check\n", s / hz, s / hz / (n * d), 1e6 * s / hz / (r * d)}'
if [ -n "$caddr" ]; then
  # What the cluster node's checks waited on: asks sent to another node
  # (a network round trip each), of every check it decided.
  m=$(curl -fs "http://$caddr/metrics")
  checks_n=$(awk '/^limiterd_decisions_total/ {s += $2} END {printf "%d", s}' <<<"$m")
  asks_n=$(awk '/^limiterd_coordinator_asks_total/ {s += $2} END {printf "%d", s}' <<<"$m")
  fb_n=$(awk '/^limiterd_coordinated_checks_total\{result="fallback/ {s += $2} END {printf "%d", s}' <<<"$m")
  echo "node of $NODES: $asks_n of $checks_n checks asked another node over the network ($fb_n fell back to the budget)"
  # How late the deltas came after their senders' ticks, over every node
  # (limiterd_sync_delta_delay_seconds): the bound assumes each within
  # -sync-delivery-grace, and the late ones are counted past it.
  all=$(for h in "${haddrs[@]}"; do curl -fs "http://$h/metrics"; done)
  awk '/^limiterd_sync_delta_delay_seconds_count/ {n += $2}
    /^limiterd_sync_delta_delay_seconds_bucket\{le="0.005"\}/ {a += $2}
    /^limiterd_sync_delta_delay_seconds_bucket\{le="0.01"\}/ {b += $2}
    /^limiterd_sync_delta_delay_seconds_bucket\{le="0.02"\}/ {c += $2}
    /^limiterd_sync_delta_delay_seconds_bucket\{le="0.05"\}/ {d += $2}
    /^limiterd_sync_late_deltas_total/ {l += $2}
    END {printf "deltas received by the %d nodes: %d; after 5, 10, 20 and 50 ms of their tick: %d, %d, %d, %d; past the delivery grace: %d\n", '"$NODES"', n, n - a, n - b, n - c, n - d, l}' <<<"$all"
  # Cores: the CPU seconds over the rounds' seconds. The node of N runs
  # slower than the single node by the cores its peers take from it and
  # by the work its own cluster mode adds per check (BENCHMARKS.md).
  awk -v o="$cone" -v p="$cpeers" -v hz="$hz" -v n="$((NODES - 1))" -v r="$(sum "${clustered[@]}")" -v d="$dur_s" -v k="$ROUNDS" \
    'BEGIN {c = r * d; printf "CPU during the cluster rounds: node 1 %.1f s (%.2f cores), %.1f us per check; its %d peers %.1f s together (%.2f cores), %.1f us per check\n", o / hz, o / hz / (k * d), 1e6 * o / hz / c, n, p / hz, p / hz / (k * d), 1e6 * p / hz / c}'
  c=$(median "${clustered[@]}")
  echo "/check, node of $NODES req/s: ${clustered[*]} (median $c)"
  awk -v c="$c" -v s="$check" -v n="$noop" 'BEGIN {printf "ratio node of '"$NODES"' / single node (medians): %.3f; / no-op: %.3f\n", c / s, c / n}'
fi
