#!/usr/bin/env bash
# The seed design study's experiments against a real 8-process cluster on
# loopback, next to the seed's model figures and limitsim's.
#
# For each sync interval in SYNCS it starts NODES limiterd processes on
# 127.0.0.1 (scripts/run-cluster.sh, with a temporary rule file: LIMIT per
# WINDOW in 12 slices), and drives them with limitload, one fresh key per
# scenario, requests spread over the nodes by the seed's LCG:
#   steady 2x, edge-burst, intermittent   the seed's window patterns, 3 windows
#   1x, 9x                                the seed's distributed client (10/s and
#                                         90/s at 600 per 60 s), one window
# Each scenario is also replayed by limitsim on its simulated cluster with the
# same sync interval: the scheduled pattern (same instants, same nodes) and the
# trace of what limitload actually sent. It prints one markdown table per
# sync interval.
#
# The seed's window is 60 s. WINDOW shortens it (default 10 s); the patterns
# are scaled to it, and so is the first sync interval of SYNCS by default
# (200 ms x WINDOW/60 s), which keeps the seed's ratio of sync interval to
# window: a 10 s window with 200 ms syncs gives the cluster six times the
# seed's blind interval relative to the window, the second table.
#
#   scripts/bench-cluster.sh                         # WINDOW=10s LIMIT=600, ~4 min
#   WINDOW=60s SYNCS=200ms scripts/bench-cluster.sh  # the seed's own scale, ~10 min
#   OUT=/tmp/results scripts/bench-cluster.sh        # keep the JSON reports and traces
set -euo pipefail
cd "$(dirname "$0")/.."

WINDOW=${WINDOW:-10s}
LIMIT=${LIMIT:-600}
NODES=${NODES:-8}
HTTP_BASE=${HTTP_BASE:-18080}
GOSSIP_BASE=${GOSSIP_BASE:-17940}

command -v jq >/dev/null || { echo "jq not found; installing it from Debian's packages" >&2;
  { apt-get install -y jq || { apt-get update && apt-get install -y jq; }; } >/dev/null; }

# Durations in whole milliseconds, as limitsim wants them.
to_ms() { # 10s, 1500ms, 1m -> milliseconds
  case "$1" in
    *ms) echo "${1%ms}" ;;
    *s) awk -v v="${1%s}" 'BEGIN { printf "%d", v * 1000 }' ;;
    *m) awk -v v="${1%m}" 'BEGIN { printf "%d", v * 60000 }' ;;
    *) echo "bad duration $1 (use ms, s or m)" >&2; exit 2 ;;
  esac
}
window_ms=$(to_ms "$WINDOW")
scaled_sync=$((200 * window_ms / 60000))ms
if [ "$scaled_sync" = 200ms ]; then
  SYNCS=${SYNCS:-200ms}
else
  SYNCS=${SYNCS:-"$scaled_sync 200ms"}
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-cluster.XXXXXX")
OUT=${OUT:-$work/out}
mkdir -p "$work/bin" "$OUT"
go build -o "$work/bin/" ./cmd/limiterd ./cmd/limitload ./cmd/limitsim
bin=$work/bin

cat >"$work/rules.yaml" <<EOF
rules:
  - name: default
    limit: $LIMIT
    window: $WINDOW
    slices: 12
EOF

cluster_pid=
stop_cluster() {
  if [ -n "$cluster_pid" ]; then
    kill -TERM "$cluster_pid" 2>/dev/null || true
    wait "$cluster_pid" 2>/dev/null || true
    cluster_pid=
  fi
}
trap 'stop_cluster; rm -rf "$work/bin"' EXIT

start_cluster() { # $1 = sync interval
  BIN=$bin RULES=$work/rules.yaml NODES=$NODES HTTP_BASE=$HTTP_BASE GOSSIP_BASE=$GOSSIP_BASE \
    LOG_DIR=$work/logs-$1 EXTRA_FLAGS="-log-level warn -sync-interval $1" \
    scripts/run-cluster.sh >"$work/cluster-$1.out" 2>&1 &
  cluster_pid=$!
  for _ in $(seq 600); do
    grep -qs "nodes are up" "$work/cluster-$1.out" && { head -1 "$work/cluster-$1.out" >&2; return; }
    kill -0 "$cluster_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$work/cluster-$1.out" >&2
  echo "the cluster did not come up" >&2
  exit 1
}

targets=$(for i in $(seq 1 "$NODES"); do printf '127.0.0.1:%d,' $((HTTP_BASE + i)); done)
targets=${targets%,}

# scenario NAME LIMITLOAD-FLAGS...: dry-run schedules, the run, the replays.
summary() { awk -v k="$1" '$1 == "#" && $2 == k { print $3 }' "$2"; }
sim_row() { # LABEL SUMMARY-FILE (one node: limitsim does not count false rejections)
  local f
  f=$(summary false_rejections "$2")
  printf '| %s | %s | %s | %s | %s | %s | |\n' "$1" "$(summary accepted "$2")" "$(summary rejected "$2")" \
    "$(summary max_in_window "$2")" "$(summary max_in_window_ratio "$2")" "${f:-n/a}"
}
declare -A seed_rows=(
  [steady]="| seed model: 12-slice sliding, 1 node | 1800 | 1800 | 600 | 1.000 | 0 | |"
  [edge-burst]="| seed model: 12-slice sliding, 1 node | 1200 | 1200 | 600 | 1.000 | 0 | |"
  [intermittent]="| seed model: 12-slice sliding, 1 node | 1800 | 0 | 600 | 1.000 | 0 | |"
  [1x]="| seed model: delayed sync 0.2 s, 8 nodes | 600 | 0 | 600 | 1.000 | 0 | |"
  [9x]="| seed model: delayed sync 0.2 s, 8 nodes | 609 | 4791 | 609 | 1.015 | 0 | |"
)

run_scenario() { # SYNC NAME FLAGS...
  local sync=$1 name=$2
  shift 2
  local base=$OUT/$sync-$name
  local common=(--limit "$LIMIT" --window "$WINDOW" --spread lcg --run-id "$sync-$name-$(date +%s)")
  "$bin/limitload" "${common[@]}" "$@" --dry-run --targets "" >"$base.sched1"
  "$bin/limitload" "${common[@]}" "$@" --dry-run --targets "$targets" >"$base.sched"
  "$bin/limitload" "${common[@]}" "$@" --targets "$targets" --align "$sync" --json --progress 0 \
    --trace-out "$base.trace" >"$base.json"
  "$bin/limitsim" replay --limit "$LIMIT" --window "$WINDOW" --trace "$base.sched1" >"$base.sim1"
  "$bin/limitsim" replay --nodes "$NODES" --sync "$sync" --limit "$LIMIT" --window "$WINDOW" --trace "$base.sched" >"$base.sim"
  "$bin/limitsim" replay --nodes "$NODES" --sync "$sync" --limit "$LIMIT" --window "$WINDOW" --trace "$base.trace" >"$base.simtrace"

  echo
  echo "**$name** ($(jq -r '.scheduled' "$base.json") requests; $(sed -n 1p "$base.sched" | cut -c3-))"
  echo
  echo "| source | accepted | rejected | max in $WINDOW | ratio | false rej. | errors, p99 latency |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  if [ "$LIMIT" = 600 ]; then echo "${seed_rows[$name]}"; fi
  sim_row "limitsim, 1 node" "$base.sim1"
  sim_row "limitsim, $NODES nodes, sync $sync (scheduled instants)" "$base.sim"
  sim_row "limitsim, $NODES nodes, sync $sync (limitload's trace)" "$base.simtrace"
  jq -r '[.status["200"] // 0, .status["429"] // 0, .accuracy.max_in_window, .accuracy.max_ratio,
      .accuracy.false_rejections, .status.error // 0, .latency_ms.p99, .behind_schedule] | @tsv' "$base.json" |
    awk -F'\t' -v lbl="**limiterd, $NODES processes, sync $sync (limitload)**" '{
      printf "| %s | %d | %d | %d | %.3f | %d | %d errors, p99 %.2f ms%s |\n", lbl, $1, $2, $3, $4, $5, $6, $7,
        ($8 == "true" ? ", BEHIND SCHEDULE" : "") }'
}

scale=$(awk -v w="$window_ms" 'BEGIN { printf "%.4g", w / 60000 }')
echo "# limiterd against the seed's experiments: $NODES processes on 127.0.0.1, limit $LIMIT per $WINDOW"
echo
echo "Window $WINDOW: the seed's 60 s patterns scaled by $scale (its 5 s slice is $((window_ms / 12)) ms);"
echo "requests spread over the nodes by the seed's LCG (seed 20260730); counts by send instant."
echo "Seed rows are its models at 600 per 60 s (counts do not depend on the window's length)."
for sync in $SYNCS; do
  start_cluster "$sync"
  echo
  echo "## sync interval $sync"
  run_scenario "$sync" steady --pattern steady --factor 2
  run_scenario "$sync" edge-burst --pattern edge-burst
  run_scenario "$sync" intermittent --pattern intermittent
  run_scenario "$sync" 1x --pattern steady --factor 1 --duration "$WINDOW"
  run_scenario "$sync" 9x --pattern steady --factor 9 --duration "$WINDOW"
  stop_cluster
done
echo
echo "JSON reports, schedules, traces and limitsim summaries: $OUT"
