#!/usr/bin/env bash
# Runs every fuzz target of the module for FUZZTIME each, JOBS targets at a
# time, and keeps what the fuzzer found interesting: the new entries of Go's
# fuzz cache are copied into the package's testdata/fuzz/<Target>/, where
# plain `go test` runs them as seed inputs from then on (and a crash the
# fuzzer writes there stays as a regression input).
#
#   FUZZTIME  how long each target runs (default 30s; 10m for a real run)
#   JOBS      targets run at once (default 1); each gets FUZZPARALLEL workers
#   FUZZPARALLEL  workers per target (default: the cores / JOBS, at least 1)
#   ONLY      a regular expression: only the targets "pkg FuzzName" it matches
#   LOG       directory for one log per target (default: a temporary one)
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
JOBS=${JOBS:-1}
cores=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 1)
FUZZPARALLEL=${FUZZPARALLEL:-$(( cores / JOBS > 0 ? cores / JOBS : 1 ))}
ONLY=${ONLY:-.}
LOG=${LOG:-$(mktemp -d -t limiterd-fuzz.XXXXXX)}
mkdir -p "$LOG"
cache=$($GO env GOCACHE)/fuzz

targets=()
for pkg in $($GO list ./...); do
	for f in $($GO test -list 'Fuzz.*' "$pkg" | grep '^Fuzz' || true); do
		if [[ "$pkg $f" =~ $ONLY ]]; then
			targets+=("$pkg $f")
		fi
	done
done
echo "fuzz: ${#targets[@]} targets, $FUZZTIME each, $JOBS at a time, $FUZZPARALLEL workers each; logs in $LOG"

# run_one fuzzes one target, then copies its cache corpus into testdata.
run_one() {
	local pkg=$1 f=$2
	local dir log rc=0
	dir=$($GO list -f '{{.Dir}}' "$pkg")
	log="$LOG/$(echo "$pkg" | tr / _).$f.log"
	$GO test "$pkg" -run '^$' -fuzz "^$f\$" -fuzztime "$FUZZTIME" -parallel "$FUZZPARALLEL" >"$log" 2>&1 || rc=$?
	if [ -d "$cache/$pkg/$f" ]; then
		mkdir -p "$dir/testdata/fuzz/$f"
		cp -n "$cache/$pkg/$f"/* "$dir/testdata/fuzz/$f/" 2>/dev/null || true
	fi
	local last
	last=$(grep -E 'elapsed:' "$log" | tail -1 || true)
	if [ $rc -ne 0 ]; then
		if deadline_race "$pkg" "$f" "$log"; then
			echo "ok   $pkg $f: ${last:-no progress line}; ended by Go's own deadline race (go.dev/issue/75804): no failing input written, every input replayed clean"
			return 0
		fi
		echo "FAIL $pkg $f (log $log)"
		tail -20 "$log"
		return 1
	fi
	echo "ok   $pkg $f: ${last:-no progress line}"
}

# deadline_race reports whether a failed run is Go 1.26's fuzzing
# coordinator racing its own -fuzztime deadline (go.dev/issue/75804,
# reported fixed in Go 1.27) rather than a finding: the run's only error
# is "context deadline exceeded", no failing input was written, the
# workers were still executing inputs up to the deadline (a hung input
# stops the count first), and every seed and corpus input, those just
# found included, passes when replayed.
deadline_race() {
	local pkg=$1 f=$2 log=$3
	grep -q 'Failing input written to' "$log" && return 1
	[ "$(grep -A1 -- "--- FAIL: $f " "$log" | tail -1 | tr -d '[:space:]')" = "contextdeadlineexceeded" ] || return 1
	# The next-to-last progress line: the last one is printed after the
	# workers stopped and always reads 0/sec.
	grep -E 'elapsed:' "$log" | tail -2 | head -1 | grep -qE '\(([1-9][0-9]*)/sec\)' || return 1
	$GO test "$pkg" -run "^$f\$" -count 1 >>"$log" 2>&1
}

failed=0
running=0
for t in "${targets[@]}"; do
	# shellcheck disable=SC2086
	run_one $t &
	running=$((running + 1))
	if [ $running -ge "$JOBS" ]; then
		wait -n || failed=1
		running=$((running - 1))
	fi
done
while [ $running -gt 0 ]; do
	wait -n || failed=1
	running=$((running - 1))
done
exit $failed
