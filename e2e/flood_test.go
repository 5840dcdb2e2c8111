package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/loadgen"
	"github.com/limiterd/limiterd/internal/nodetest"
)

// floodRules is the flood's rule: every value of the descriptor key k is a
// key of its own, and stays in its window (an hour) for the whole test, so
// that the cap, not the sweep, is what stops new keys.
const floodRules = `domain: flood
descriptors:
  - key: k
    rate_limit:
      unit: hour
      requests_per_unit: 600
`

// floodClientRules is the compliant clients' rule, the fault scenarios'
// (e2e/faults): 50 per 10 s.
const floodClientRules = `rules:
  - name: default
    limit: 50
    window: 10s
`

// floodKeys is how many unique keys the flood sends (scenario 6).
const floodKeys = 10_000_000

// floodRSSCeiling is the resident memory the node must stay under while
// 10 million keys arrive with -max-keys at its default (1,000,000): the
// table's keys at about 190 bytes each (BENCHMARKS.md), twice that for
// Go's collector, and the process's own 40 MB, rounded up.
const floodRSSCeiling = 768 << 20

// TestFaultKeyFlood is scenario 6: 10 million unique keys, as fast as
// this machine sends them (limitload flood: Envoy's protocol, 64
// descriptors a call, the way to the most keys per second), against one
// node with -max-keys at its default. Its resident memory stays under floodRSSCeiling, the
// untracked metric counts the keys past the cap, and compliant clients
// asking GET /check meanwhile are never denied and never untracked.
func TestFaultKeyFlood(t *testing.T) {
	c := nodetest.Start(t, nodetest.Config{Nodes: 1, Rules: []string{floodClientRules, floodRules}})
	p := c.Procs[0]

	// Compliant clients, one check each 250 ms (80 % of 50 per 10 s).
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var compliant, denied, untracked, failed atomic.Int64
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(250 * time.Millisecond)
			defer tick.Stop()
			for n := 0; n < 4*600; n++ { // at most 10 minutes
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				code, body, err := p.Get("/check?key=ok-" + strconv.Itoa(i))
				compliant.Add(1)
				switch {
				case err != nil || (code != http.StatusOK && code != http.StatusTooManyRequests):
					failed.Add(1)
				case code == http.StatusTooManyRequests:
					denied.Add(1)
				case strings.Contains(string(body), `"untracked":true`):
					untracked.Add(1)
				}
			}
		}()
	}

	// Resident memory, each 200 ms.
	var peak atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if rss, err := p.ResidentBytes(); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}()

	untracked0 := p.Metric(t, "limiterd_untracked_checks_total")
	// The flood comes from limitload, built without the race detector
	// this test may run under: the sender must not be what limits the rate.
	out, err := exec.CommandContext(ctx, nodetest.Build(t, "limitload"), "flood", "-target", p.GRPC,
		"-keys", strconv.Itoa(floodKeys), "-per-call", "64", "-conns", "4", "-max-duration", "8m").Output()
	if err != nil {
		t.Fatalf("limitload flood: %v\n%s", err, out)
	}
	var fl loadgen.FloodReport
	if err := json.Unmarshal(out, &fl); err != nil {
		t.Fatalf("limitload flood printed %q: %v", out, err)
	}
	time.Sleep(time.Second) // a last compliant check or four, and an RSS sample
	cancel()
	wg.Wait()

	moved := p.Metric(t, "limiterd_untracked_checks_total") - untracked0
	tracked := p.Metric(t, "limiterd_tracked_keys")
	nodetest.Figures(t, "6 a flood of 10 million unique keys at one node",
		"keys sent", fl.Keys, "took (s)", fmt.Sprintf("%.1f", fl.Seconds),
		"keys/s", fmt.Sprintf("%.0f", fl.KeysPerSec), "failed calls", fl.FailedCalls,
		"peak RSS MiB", peak.Load()>>20, "ceiling MiB", floodRSSCeiling>>20, "tracked keys at the end", int64(tracked),
		"untracked checks", int64(moved), "compliant checks", compliant.Load(), "compliant denied", denied.Load(),
		"compliant untracked", untracked.Load(), "compliant failed", failed.Load())
	if fl.Keys != floodKeys || fl.FailedCalls != 0 {
		t.Fatalf("%d of %d keys sent, %d calls failed", fl.Keys, floodKeys, fl.FailedCalls)
	}
	if peak.Load() >= floodRSSCeiling {
		t.Errorf("resident memory peaked at %d MiB, at or over the ceiling of %d MiB", peak.Load()>>20, floodRSSCeiling>>20)
	}
	// Every key past the cap is an untracked check (the cap counts
	// (limit, key) pairs; the compliant ones hold a few).
	if moved < floodKeys-1_000_000 {
		t.Errorf("limiterd_untracked_checks_total moved by %v, want at least %d", moved, floodKeys-1_000_000)
	}
	if compliant.Load() == 0 || denied.Load() != 0 || untracked.Load() != 0 || failed.Load() != 0 {
		t.Errorf("compliant clients: %d checks, %d denied, %d untracked, %d failed; want checks and none of the rest", compliant.Load(), denied.Load(), untracked.Load(), failed.Load())
	}
}
