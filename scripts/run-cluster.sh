#!/usr/bin/env bash
# Starts a limiterd cluster on 127.0.0.1 (what `make run` does) and keeps it
# in the foreground: Ctrl-C stops every node.
#
# Node i (1..NODES) serves HTTP on 127.0.0.1:$((HTTP_BASE+i)) and memberlist
# on 127.0.0.1:$((GOSSIP_BASE+i)); nodes 2..NODES join node 1. Each node logs
# to $LOG_DIR/node<i>.log. The script waits (at most WAIT seconds) until every
# node sees every other one alive and says how long that took.
#
#   scripts/run-cluster.sh                 # NODES=8 HTTP_BASE=8080 GOSSIP_BASE=7940
#   NODES=3 RULES=my-rules.yaml scripts/run-cluster.sh
#   EXTRA_FLAGS="-gossip-key $(head -c 32 /dev/urandom | base64)" scripts/run-cluster.sh
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=${BIN:-bin}
NODES=${NODES:-8}
RULES=${RULES:-testdata/rules.yaml}
HTTP_BASE=${HTTP_BASE:-8080}
GOSSIP_BASE=${GOSSIP_BASE:-7940}
LOG_DIR=${LOG_DIR:-${TMPDIR:-/tmp}/limiterd-cluster}
WAIT=${WAIT:-30}
EXTRA_FLAGS=${EXTRA_FLAGS:-}

[ -x "$BIN/limiterd" ] || go build -o "$BIN/" ./cmd/limiterd
mkdir -p "$LOG_DIR"

pids=()
stop() {
  trap - INT TERM EXIT
  if [ ${#pids[@]} -gt 0 ]; then
    echo
    echo "stopping ${#pids[@]} nodes..."
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  echo "stopped; logs are in $LOG_DIR"
}
trap stop INT TERM EXIT

http() { echo "127.0.0.1:$((HTTP_BASE + $1))"; }
gossip() { echo "127.0.0.1:$((GOSSIP_BASE + $1))"; }

start=$(date +%s%N)
for i in $(seq 1 "$NODES"); do
  args=(-node-name "node$i" -http-addr "$(http "$i")" -bind-addr "$(gossip "$i")" -rules "$RULES")
  if [ "$i" -gt 1 ]; then
    args+=(-join "$(gossip 1)")
  fi
  # shellcheck disable=SC2086 # EXTRA_FLAGS is a list of flags
  "$BIN/limiterd" "${args[@]}" $EXTRA_FLAGS >"$LOG_DIR/node$i.log" 2>&1 &
  pids+=($!)
done

# Every node's /cluster must report NODES alive members.
converged() {
  for i in $(seq 1 "$NODES"); do
    n=$(curl -fs "http://$(http "$i")/cluster" | grep -o '"state":"alive"' | wc -l) || return 1
    [ "$n" -eq "$NODES" ] || return 1
  done
}
deadline=$((start + WAIT * 1000000000))
until converged; do
  for p in "${pids[@]}"; do
    if ! kill -0 "$p" 2>/dev/null; then
      echo "a node exited; see the logs in $LOG_DIR:" >&2
      tail -n 5 "$LOG_DIR"/node*.log >&2
      exit 1
    fi
  done
  if [ "$(date +%s%N)" -gt "$deadline" ]; then
    echo "the nodes did not all see $NODES alive members within ${WAIT}s; logs in $LOG_DIR" >&2
    exit 1
  fi
  sleep 0.05
done
elapsed=$((($(date +%s%N) - start) / 1000000))

cat <<EOF
$NODES limiterd nodes are up: every node sees $NODES alive members ${elapsed} ms after the first started.
  HTTP    $(http 1) .. $(http "$NODES")
  cluster $(gossip 1) .. $(gossip "$NODES") (memberlist; nodes 2..$NODES joined node 1)
  rules   $RULES
  logs    $LOG_DIR/node<i>.log

Try:
  curl -s http://$(http 1)/cluster
  curl -si 'http://$(http 1)/check?key=client-42'
  curl -si 'http://$(http "$NODES")/check?key=client-42'     # the same client, counted on every node
  curl -s http://$(http 1)/metrics | grep -E 'members|sync'
  kill ${pids[2]}                                           # stop node3; /cluster shows it left

Press Ctrl-C to stop all nodes.
EOF

# Stay in the foreground until Ctrl-C (or every node has exited).
wait "${pids[@]}" 2>/dev/null || true
