package e2e

import (
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// wrkRun is one service's wrk command in a benchmark's rounds.
type wrkRun struct {
	name string
	args []string // wrk's arguments: options, the URL, then the script's after "--"
	// allAllowed: every response must be a 2xx (the service is given
	// room for all of them).
	allAllowed bool
	// statuses are the statuses it may answer, when wrkRounds is asked
	// to count them (scripts/random-key.lua's WRK_STATUSES); the first
	// must be among them.
	statuses []int
}

// wrkRounds runs each of runs in turn, rounds times over, and returns the
// median requests per second of each by name. It fails b on a run whose
// connections failed (a service that drops them is not measured), or that
// had a response other than 2xx when it must allow all. With statuses,
// each run that lists its statuses counts them, at a cost to wrk's own
// rate, and fails b on any status not listed or none of the first.
func wrkRounds(b *testing.B, wrk string, rounds int, runs []wrkRun, statuses bool) map[string]float64 {
	b.Helper()
	counted := regexp.MustCompile(`(?m)^statuses:(.*)$`)
	rate := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	non2xx := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	sockets := regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+)`)
	rps := map[string][]float64{}
	for round := range rounds {
		for _, r := range runs {
			cmd := exec.Command(wrk, r.args...)
			if statuses && r.statuses != nil {
				cmd.Env = append(os.Environ(), "WRK_STATUSES=1")
			}
			out, err := cmd.CombinedOutput()
			if err != nil {
				b.Fatalf("wrk against %s: %v\n%s", r.name, err, out)
			}
			if cmd.Env != nil {
				checkStatuses(b, r, counted.FindSubmatch(out), out)
			}
			m := rate.FindSubmatch(out)
			if m == nil || r.allAllowed && non2xx.Match(out) {
				b.Fatalf("wrk against %s: every request must be allowed:\n%s", r.name, out)
			}
			if s := sockets.FindSubmatch(out); s != nil && (string(s[1]) != "0" || string(s[2]) != "0" || string(s[3]) != "0") {
				b.Fatalf("wrk against %s: connections failed:\n%s", r.name, out)
			}
			v, _ := strconv.ParseFloat(string(m[1]), 64)
			rps[r.name] = append(rps[r.name], v)
			b.Logf("round %d %-10s %9.0f requests/s", round+1, r.name, v)
		}
	}
	med := map[string]float64{}
	for name, v := range rps {
		slices.Sort(v)
		med[name] = v[len(v)/2]
	}
	return med
}

// checkStatuses fails b unless line (statuses: 200=N 429=M) lists only
// r's statuses, and its first.
func checkStatuses(b *testing.B, r wrkRun, line [][]byte, out []byte) {
	b.Helper()
	if line == nil {
		b.Fatalf("wrk against %s counted no statuses:\n%s", r.name, out)
	}
	seen := map[int]bool{}
	for _, f := range strings.Fields(string(line[1])) {
		code, _, _ := strings.Cut(f, "=")
		n, err := strconv.Atoi(code)
		if err != nil || !slices.Contains(r.statuses, n) {
			b.Fatalf("wrk against %s: answered %s, want only %v:\n%s", r.name, f, r.statuses, out)
		}
		seen[n] = true
	}
	if !seen[r.statuses[0]] {
		b.Fatalf("wrk against %s: no %d among %s", r.name, r.statuses[0], line[1])
	}
}
