package e2e

import (
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"testing"
)

// wrkRun is one service's wrk command in a benchmark's rounds.
type wrkRun struct {
	name string
	args []string // wrk's arguments, the URL last
	// allAllowed: every response must be a 2xx (the service is given
	// room for all of them).
	allAllowed bool
}

// wrkRounds runs each of runs in turn, rounds times over, and returns the
// median requests per second of each by name. It fails b on a run whose
// connections failed (a service that drops them is not measured), or that
// had a response other than 2xx when it must allow all.
func wrkRounds(b *testing.B, wrk string, rounds int, runs []wrkRun) map[string]float64 {
	b.Helper()
	rate := regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	non2xx := regexp.MustCompile(`Non-2xx or 3xx responses: (\d+)`)
	sockets := regexp.MustCompile(`Socket errors: connect (\d+), read (\d+), write (\d+)`)
	rps := map[string][]float64{}
	for round := range rounds {
		for _, r := range runs {
			out, err := exec.Command(wrk, r.args...).CombinedOutput()
			if err != nil {
				b.Fatalf("wrk against %s: %v\n%s", r.name, err, out)
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
