#!/usr/bin/env bash
# HS2 on this machine: NODES limiterd processes on 127.0.0.1, KEYS keys (HS1),
# RATE checks/s in total (HS2) for DURATION, limit 600 per 60 s (HS3), driven
# by limitload (Poisson arrivals, keys drawn by Zipf(ZIPF_S), spread at random
# over the nodes). Reports the achieved rate, latency percentiles, CPU and
# resident memory per node (/proc), sync bytes/s per node (the nodes'
# limiterd_sync_bytes_total before and after) and limitload's own CPU.
#
# If RATE is not sustained (achieved under 97 % of it, errors, or a p99
# response time, counted from each request's scheduled instant, of P99_MS or
# more) it steps down through STEPS (STEP_DURATION each) to the highest rate
# that is, and tries once halfway between that and the last failure. Every
# run (and the profile) starts a fresh cluster: a run the machine cannot
# carry leaves full windows and backlogs that would slow the next. Every
# run also breaks latency down by the phase of the send instant within the
# nodes' aligned sync ticks (limitload --phase). Then, with PROFILE=1, it runs
# PROFILE_SECONDS more at PROFILE_RATE (default: the highest rate whose
# throughput was sustained, whatever its latency) while it takes a CPU
# profile of node 1 (limiterd -pprof-addr) and, if perf works, a system-wide
# sample by command (who takes the two cores).
#
#   scripts/bench-hs2.sh                              # 40,000/s for 60 s, then steps: up to ~6 min
#   DURATION=20s STEP_DURATION=10s scripts/bench-hs2.sh
#   RATE=10000 STEPS= PROFILE=0 scripts/bench-hs2.sh  # one run, nothing else
#
# CEILING=0 skips the ceiling run (the same limitload run against no-op
# servers, limitload serve-noop).
#
# The "other CPU" column is the machine's busy time not spent by the nodes or
# limitload: anything else running beside the benchmark distorts it.
set -euo pipefail
cd "$(dirname "$0")/.."

NODES=${NODES:-8}
KEYS=${KEYS:-200000}
RATE=${RATE:-40000}
DURATION=${DURATION:-60s}
STEPS=${STEPS-"20000 12000 8000 6000 4000 3000"}
STEP_DURATION=${STEP_DURATION:-30s}
P99_MS=${P99_MS:-10}
ZIPF_S=${ZIPF_S:-1.1}
CONNS=${CONNS:-16}
PROFILE=${PROFILE:-1}
PROFILE_SECONDS=${PROFILE_SECONDS:-15}
PROFILE_RATE=${PROFILE_RATE:-} # default: the highest rate whose throughput was sustained
SYNC=${SYNC:-200ms} # the nodes' -sync-interval; limitload breaks latency down by its phase
NODE_ARGS=${NODE_ARGS:-} # more limiterd flags for every node, e.g. "-sync-spread 0"
LOAD_ARGS=${LOAD_ARGS:-} # more limitload flags for the measured runs, e.g. "--spread round-robin"
HTTP_BASE=${HTTP_BASE:-18180}
GOSSIP_BASE=${GOSSIP_BASE:-18040}
PPROF_ADDR=${PPROF_ADDR:-127.0.0.1:18099}

command -v jq >/dev/null || { echo "jq not found; installing it from Debian's packages" >&2;
  { apt-get install -y jq || { apt-get update && apt-get install -y jq; }; } >/dev/null; }

work=$(mktemp -d "${TMPDIR:-/tmp}/bench-hs2.XXXXXX")
OUT=${OUT:-$work/out}
mkdir -p "$work/bin" "$OUT"
go build -o "$work/bin/" ./cmd/limiterd ./cmd/limitload
bin=$work/bin
cat >"$work/rules.yaml" <<EOF
rules:
  - name: default
    limit: 600
    window: 60s
    slices: 12
EOF

pids=()
stop_cluster() {
  if [ ${#pids[@]} -gt 0 ]; then
    kill -TERM "${pids[@]}" 2>/dev/null || true
    wait "${pids[@]}" 2>/dev/null || true
  fi
  pids=()
}
stop() {
  stop_cluster
  rm -rf "$work/bin"
}
trap stop EXIT

http() { echo "127.0.0.1:$((HTTP_BASE + $1))"; }
pprof_flag=()
help=$("$bin/limiterd" -h 2>&1 || true) # (not piped into grep -q: with pipefail a SIGPIPE would read as "absent")
if [ "$PROFILE" = 1 ] && [[ $help == *-pprof-addr* ]]; then
  pprof_flag=(-pprof-addr "$PPROF_ADDR")
fi
# start_cluster: a fresh cluster for every run. A run at a rate the machine
# cannot carry leaves every node with full windows and a backlog that
# slows the next run down, so runs never share a cluster.
start_cluster() {
  stop_cluster
  for i in $(seq 1 "$NODES"); do
    args=(-node-name "node$i" -http-addr "$(http "$i")" -bind-addr "127.0.0.1:$((GOSSIP_BASE + i))"
      -rules "$work/rules.yaml" -log-level warn -sync-interval "$SYNC")
    # shellcheck disable=SC2206 # NODE_ARGS is split on purpose: extra limiterd flags
    args+=($NODE_ARGS)
    [ "$i" -gt 1 ] && args+=(-join "127.0.0.1:$((GOSSIP_BASE + 1))")
    [ "$i" -eq 1 ] && args+=("${pprof_flag[@]}")
    "$bin/limiterd" "${args[@]}" >"$work/node$i.log" 2>&1 &
    pids+=($!)
  done
  converged() {
    for i in $(seq 1 "$NODES"); do
      n=$(curl -fs "http://$(http "$i")/cluster" | grep -o '"state":"alive"' | wc -l) || return 1
      [ "$n" -eq "$NODES" ] || return 1
    done
  }
  for _ in $(seq 300); do converged && break; sleep 0.1; done
  converged || { echo "the cluster did not converge; logs in $work" >&2; tail -n 3 "$work"/node*.log >&2; exit 1; }
}

targets=$(for i in $(seq 1 "$NODES"); do printf '%s,' "$(http "$i")"; done)
targets=${targets%,}
hz=$(getconf CLK_TCK)
# busy_ticks: the machine's busy CPU time so far, in ticks (/proc/stat: all but idle and iowait).
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 + $9; exit }' /proc/stat; }

# snapshot FILE: per node "cpu_ticks rss_kb hwm_kb sync_sent_bytes
# sync_received_bytes checks asked fallbacks deltas late" (checks:
# limiterd_decisions_total summed; asked: the checks that waited on the
# network for another node, the key's coordinator or its runner-up
# (limiterd_coordinator_asks_total); fallbacks: the checks put to a
# coordinator that got no answer in time and were decided alone with the
# budget; deltas: the deltas received, limiterd_sync_delta_delay_seconds;
# late: those of them past the delivery grace, which the 1.1 x bound
# assumes none is, limiterd_sync_late_deltas_total).
snapshot() {
  : >"$1"
  for i in $(seq 1 "$NODES"); do
    pid=${pids[$((i - 1))]}
    ticks=$(awk '{ print $14 + $15 }' "/proc/$pid/stat")
    rss=$(awk '/^VmRSS/ { print $2 }' "/proc/$pid/status")
    hwm=$(awk '/^VmHWM/ { print $2 }' "/proc/$pid/status")
    m=$(curl -fs "http://$(http "$i")/metrics")
    sent=$(awk '/^limiterd_sync_bytes_total\{direction="sent"\}/ { print $2 }' <<<"$m")
    recv=$(awk '/^limiterd_sync_bytes_total\{direction="received"\}/ { print $2 }' <<<"$m")
    checks=$(awk '/^limiterd_decisions_total\{/ { n += $2 } END { print n + 0 }' <<<"$m")
    coord=$(awk '/^limiterd_coordinator_asks_total\{/ { n += $2 } END { print n + 0 }' <<<"$m")
    fall=$(awk '/^limiterd_coordinated_checks_total\{result="fallback/ { n += $2 } END { print n + 0 }' <<<"$m")
    deltas=$(awk '/^limiterd_sync_delta_delay_seconds_count/ { n += $2 } END { print n + 0 }' <<<"$m")
    late=$(awk '/^limiterd_sync_late_deltas_total/ { n += $2 } END { print n + 0 }' <<<"$m")
    echo "$ticks $rss $hwm ${sent:-0} ${recv:-0} $checks $coord $fall $deltas $late" >>"$1"
  done
}

# measure NAME RATE DURATION: one limitload run; sets $pass (0/1).
measure() {
  local name=$1 rate=$2 dur=$3 base=$OUT/$1
  start_cluster
  snapshot "$base.before"
  local t0 t1 vmpid
  vmstat 1 >"$base.vmstat" 2>/dev/null &
  vmpid=$!
  local busy0 busy1
  busy0=$(busy_ticks)
  t0=$(date +%s.%N)
  "$bin/limitload" --targets "$targets" --pattern keys --keys "$KEYS" --zipf-s "$ZIPF_S" --rate "$rate" --duration "$dur" \
    --limit 600 --window 60s --conns "$CONNS" --phase "$SYNC" --json --progress 5s --run-id "$name-$(date +%s)" $LOAD_ARGS \
    >"$base.json" 2>"$base.progress"
  t1=$(date +%s.%N)
  busy1=$(busy_ticks)
  kill "$vmpid" 2>/dev/null || true
  wait "$vmpid" 2>/dev/null || true
  # Whole machine, mean of the samples after the first (vmstat's first line is since boot).
  local cpu
  cpu=$(awk 'NR > 3 { us += $13; sy += $14; id += $15; st += $17; n++ } END { if (n) printf "%.0f/%.0f/%.0f/%.0f", us / n, sy / n, id / n, st / n }' "$base.vmstat")
  snapshot "$base.after"
  paste -d' ' "$base.before" "$base.after" | awk -v dt="$(awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }')" -v hz="$hz" '
    { checks = $16 - $6; coord = $17 - $7; fall = $18 - $8; deltas = $19 - $9; late = $20 - $10
      printf "| node%d | %.0f %% | %.1f | %.1f | %.0f | %.0f | %.0f | %.3f %% | %.0f | %.0f of %.0f |\n", NR, ($11 - $1) / hz / dt * 100, $12 / 1024, $13 / 1024, ($14 - $4) / dt, ($15 - $5) / dt, checks, checks ? coord / checks * 100 : 0, fall, late, deltas
      cpu += ($11 - $1) / hz / dt * 100; sent += ($14 - $4) / dt; allc += checks; allk += coord; allf += fall; alld += deltas; alll += late }
    END { printf "| all nodes | %.0f %% | | | %.0f | | %.0f | %.3f %% | %.0f | %.0f of %.0f (%.2f %%) |\n", cpu, sent, allc, allc ? allk / allc * 100 : 0, allf, alll, alld, alld ? alll / alld * 100 : 0 }' >"$base.nodes"
  # CPU of everything else on the machine (another job running beside the
  # benchmark shows here), in % of one core: all busy time minus the nodes'
  # and limitload's.
  local nodes_cpu others
  nodes_cpu=$(awk '/^\| all nodes/ { gsub("%", "", $5); print $5 }' "$base.nodes")
  others=$(jq -r --argjson busy "$((busy1 - busy0))" --argjson hz "$hz" --argjson nodes "${nodes_cpu:-0}" \
    '($busy / $hz / (.elapsed_ms / 1000) * 100) - $nodes - (.generator_cpu_s / (.elapsed_ms / 1000) * 100) | floor' "$base.json")
  pass=$(jq --argjson rate "$rate" --argjson p99 "$P99_MS" \
    'if (.achieved_rate >= 0.97 * $rate) and ((.status.error // 0) == 0) and (.response_ms.p99 < $p99) then 1 else 0 end' "$base.json")
  jq -r --arg name "$name" --argjson pass "$pass" --arg cpu "${cpu:-?}" --arg nodes "${nodes_cpu:-?}" --arg others "$others" '
    "| \($name) | \(.rate) | \(.achieved_rate | floor) | \(.latency_ms.p50) | \(.latency_ms.p90) | \(.latency_ms.p99) | \(.latency_ms.p99_9) | \(.latency_ms.max) | \(.response_ms.p99) | \(.behind_schedule_ms.p99) | \(.status.error // 0) | \($nodes) % | \(.generator_cpu_s / (.elapsed_ms / 1000) * 100 | floor) % | \($others) % | \($cpu) | \(if $pass == 1 then "yes" else "no" end) |"' \
    "$base.json" >"$base.row"
  cat "$base.row" >&2
}

header() {
  echo "| run | target /s | achieved /s | p50 ms | p90 ms | p99 ms | p99.9 ms | max ms | response p99 ms | behind p99 ms | errors | nodes CPU | limitload CPU | other CPU | machine us/sy/id/st % | sustained |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
}
node_header() {
  echo "| node | CPU | RSS MB | peak RSS MB | sync bytes/s sent | sync bytes/s received | checks | asked another node | fell back | deltas past the grace |"
  echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"
}

echo "HS2: $NODES limiterd processes on 127.0.0.1, $(nproc) cores ($(awk -F': ' '/model name/ { print $2; exit }' /proc/cpuinfo)),"
echo "$KEYS keys drawn by Zipf s=$ZIPF_S, Poisson arrivals, limit 600 per 60 s, limitload --client raw x $CONNS conns per node,"
echo "sustained = achieved >= 97 % of target, no errors, p99 response (from the scheduled instant) < $P99_MS ms."
echo

runs=()
measure "rate-$RATE" "$RATE" "$DURATION"
runs+=("rate-$RATE")
best=
[ "$pass" = 1 ] && best=$RATE
if [ -z "$best" ]; then
  last_fail=$RATE
  for r in $STEPS; do
    measure "step-$r" "$r" "$STEP_DURATION"
    runs+=("step-$r")
    if [ "$pass" = 1 ]; then best=$r; break; fi
    last_fail=$r
  done
  if [ -n "$best" ]; then
    mid=$(((best + last_fail) / 2))
    if [ $((last_fail - best)) -ge 2000 ]; then
      measure "step-$mid" "$mid" "$STEP_DURATION"
      runs+=("step-$mid")
      [ "$pass" = 1 ] && best=$mid
    fi
  fi
fi

echo "## Runs"
echo
header
for r in "${runs[@]}"; do cat "$OUT/$r.row"; done
echo
echo "## Per node, run rate-$RATE ($DURATION)"
echo
node_header
cat "$OUT/rate-$RATE.nodes"
if [ -n "$best" ] && [ "$best" != "$RATE" ]; then
  best_run=step-$best
  echo
  echo "## Per node at the highest sustained rate, $best/s ($STEP_DURATION)"
  echo
  node_header
  cat "$OUT/$best_run.nodes"
fi
echo
echo "Status codes of rate-$RATE: $(jq -c .status "$OUT/rate-$RATE.json"); keys answered: $(jq .accuracy.keys "$OUT/rate-$RATE.json"), keys over 1.1x: $(jq .accuracy.keys_over_1_1 "$OUT/rate-$RATE.json"), false rejections: $(jq .accuracy.false_rejections "$OUT/rate-$RATE.json") in $(jq .accuracy.keys_with_false_rejections "$OUT/rate-$RATE.json") keys"

# The ceiling: the same limitload run at RATE against NODES no-op /check
# servers (limitload serve-noop, one process each, the same ports), so the
# HS2 figure can be read as a share of what this machine carries at all.
if [ "${CEILING:-1}" = 1 ]; then
  stop_cluster
  for i in $(seq 1 "$NODES"); do
    "$bin/limitload" serve-noop -listen "$(http "$i")" -limit 600 -window 60s 2>>"$work/noop.log" &
    pids+=($!)
  done
  for _ in $(seq 100); do curl -fs "http://$(http "$NODES")/check?key=x" >/dev/null && break; sleep 0.1; done
  "$bin/limitload" --targets "$targets" --pattern keys --keys "$KEYS" --zipf-s "$ZIPF_S" --rate "$RATE" --duration "$DURATION" \
    --limit 600 --window 60s --conns "$CONNS" --json --progress 0 --run-id "ceiling-$(date +%s)" >"$OUT/ceiling.json" 2>"$OUT/ceiling.err" || true
  stop_cluster
  echo
  echo "Ceiling: the same run at $RATE/s against $NODES no-op servers: achieved $(jq '.achieved_rate | floor' "$OUT/ceiling.json")/s, p99 $(jq .latency_ms.p99 "$OUT/ceiling.json") ms;" \
    "limiterd's rate-$RATE run achieved $(jq -n --slurpfile a "$OUT/rate-$RATE.json" --slurpfile c "$OUT/ceiling.json" '$a[0].achieved_rate / $c[0].achieved_rate * 1000 | floor / 1000') of it."
fi

# phase_table RUN: latency by the phase of the send instant in the sync interval.
phase_table() {
  echo
  echo "Latency of run $1 by the phase of the send instant within the nodes' aligned $SYNC sync ticks:"
  echo
  echo "| phase ms | requests | p50 ms | p99 ms | max ms |"
  echo "| --- | --- | --- | --- | --- |"
  jq -r '.latency_by_phase[] | "| \(.from_ms)-\(.to_ms) | \(.requests) | \(.p50) | \(.p99) | \(.max) |"' "$OUT/$1.json"
}
phase_table "rate-$RATE"

if [ "$PROFILE" = 1 ]; then
  # Profile where the machine works hardest: the highest rate whose
  # throughput was sustained (achieved >= 97 %), whatever its latency.
  prate=
  for r in "${runs[@]}"; do
    if jq -e '.achieved_rate >= 0.97 * .rate' "$OUT/$r.json" >/dev/null; then
      t=$(jq '.rate | floor' "$OUT/$r.json")
      if [ -z "$prate" ] || [ "$t" -gt "$prate" ]; then prate=$t; fi
    fi
  done
  prate=${PROFILE_RATE:-${prate:-${best:-$RATE}}}
  echo
  echo "## Where the time goes, at $prate/s"
  start_cluster
  "$bin/limitload" --targets "$targets" --pattern keys --keys "$KEYS" --zipf-s "$ZIPF_S" --rate "$prate" \
    --duration "${PROFILE_SECONDS}s" --limit 600 --window 60s --conns "$CONNS" --progress 0 --run-id "profile-$(date +%s)" \
    --phase "$SYNC" --json >"$OUT/profile.json" 2>"$OUT/profile.err" &
  loadpid=$!
  sleep 2
  secs=$((PROFILE_SECONDS - 4))
  if [ ${#pprof_flag[@]} -gt 0 ]; then
    curl -fs -o "$OUT/node1.pprof" "http://$PPROF_ADDR/debug/pprof/profile?seconds=$secs" &
    curlpid=$!
  fi
  perf_ok=0
  if command -v perf >/dev/null && perf record -a -F 499 -o "$OUT/perf.data" -- sleep "$secs" >/dev/null 2>&1; then
    perf_ok=1
  fi
  [ -n "${curlpid:-}" ] && wait "$curlpid"
  wait "$loadpid" || true
  echo
  jq -r '"limitload during the profile: achieved \(.achieved_rate | floor)/s, p50 \(.latency_ms.p50) ms, p99 \(.latency_ms.p99) ms, limitload CPU \(.generator_cpu_s) s"' "$OUT/profile.json"
  phase_table profile
  if [ "$perf_ok" = 1 ]; then
    echo
    echo "System-wide CPU samples by command (perf record -a -F 499, ${secs} s; 'swapper' is idle):"
    echo
    echo '```'
    perf report -i "$OUT/perf.data" --sort comm --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12
    echo '```'
    echo
    echo "By shared object (kernel = the loopback TCP stack, syscalls, scheduler):"
    echo
    echo '```'
    perf report -i "$OUT/perf.data" --sort comm,dso --stdio 2>/dev/null | grep -v '^#' | grep -v '^$' | head -12
    echo '```'
  fi
  if [ -s "$OUT/node1.pprof" ]; then
    echo
    echo "Node 1's Go CPU profile (${secs} s), cumulative share of each part:"
    echo
    echo "| part | functions matched | share of node 1's CPU |"
    echo "| --- | --- | --- |"
    total=$(go tool pprof -top -nodecount=1 "$bin/limiterd" "$OUT/node1.pprof" 2>/dev/null | grep "Total samples")
    while IFS='|' read -r label focus; do
      # All nodes shown, so that "accounting for" is every sample the focus keeps.
      share=$(go tool pprof -top -nodecount=1000000 -focus="$focus" "$bin/limiterd" "$OUT/node1.pprof" 2>/dev/null |
        awk '/Showing nodes accounting for/ { gsub(",", ""); for (i = 1; i <= NF; i++) if ($i ~ /%$/) { print $i; exit } }')
      echo "| $label | \`${focus//|/\\|}\` | ${share:-0%} |"
    done <<'EOF'
HTTP server: connection read/write, parsing, /check|net/http\.\(\*conn\)\.serve
  of which the /check handler (httpapi, limiter, counter)|httpapi\.
  of which limiter + counter|limiter\.\(\*Limiter\)|counter\.\(\*Counter\)\.Allow
sync received: decode + merge (Syncer.Receive)|cluster\.\(\*Syncer\)\.Receive
sync sent: ticks, anti-entropy (syncLoop)|cluster\.\(\*Node\)\.syncLoop
  of which anti-entropy (Syncer.Hot)|cluster\.\(\*Syncer\)\.Hot
garbage collector (background mark)|runtime\.gcBgMarkWorker
allocation (mallocgc, incl. assists)|runtime\.mallocgc
syscalls (read/write/sendto)|syscall\.Syscall|internal/runtime/syscall
EOF
    echo
    echo "(total samples of node 1: $total; parts overlap where a function is in two of them)"
    echo
    echo "Top functions of node 1 by flat time:"
    echo
    echo '```'
    go tool pprof -top -nodecount=25 "$bin/limiterd" "$OUT/node1.pprof" 2>/dev/null | sed -n '/flat%/,$p'
    echo '```'
  fi
fi
echo
echo "JSON reports, progress logs, profiles: $OUT"
