package e2e

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/loadgen"
	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/oracle"
)

const rules100 = `rules:
  - name: default
    limit: 100
    window: 60s
`

// remaining reads how much of key's limit a node sees left without counting
// anything: a check for the whole limit is denied (and counts nothing)
// unless the window is empty.
func remaining(t *testing.T, p *nodetest.Proc, key string, limit int) int64 {
	t.Helper()
	code, body, err := p.Get("/check?key=" + key + "&hits=" + strconv.Itoa(limit))
	if err != nil {
		t.Fatalf("probe on %s: %v", p.Name, err)
	}
	var r nodetest.CheckResult
	if code == 200 {
		t.Fatalf("probe on %s was allowed (and counted): the window was empty", p.Name)
	}
	if err := json.Unmarshal(body, &r); err != nil || code != 429 {
		t.Fatalf("probe on %s: %d %s", p.Name, code, body)
	}
	return r.Remaining
}

// TestClusterEndToEnd runs n real limiterd processes (3, or
// LIMITERD_E2E_NODES): they converge over HTTP, survive SIGKILL of some of
// them without a single 5xx, and a restarted node gets its counts back.
func TestClusterEndToEnd(t *testing.T) {
	n := nodetest.EnvInt("LIMITERD_E2E_NODES", 3)
	c := nodetest.Start(t, nodetest.Config{Nodes: n, Rules: []string{rules100}})

	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members alive", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == n
		})
	}

	// 30 checks spread over the nodes; every node converges to 70 left.
	for i := range 30 {
		if code, r := c.Procs[i%n].Check(t, "conv"); code != 200 || !r.Allowed {
			t.Fatalf("check %d: %d %+v", i, code, r)
		}
	}
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" converges", 10*time.Second, func() bool { return remaining(t, p, "conv", 100) == 70 })
	}

	// SIGKILL some nodes (1 of 3, 3 of 8); the others answer every check.
	kill := max(1, n*3/8)
	dead := c.Procs[n-kill:]
	live := c.Procs[:n-kill]
	for _, p := range dead {
		c.Kill(p)
	}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 3000; i++ {
		p := live[i%len(live)]
		code, _, err := p.Get("/check?key=during-" + strconv.Itoa(i%50))
		if err != nil || (code != 200 && code != 429) {
			t.Fatalf("check %d on %s after the kill: %d %v", i, p.Name, code, err)
		}
	}
	for _, p := range live {
		nodetest.Eventually(t, p.Name+" reports the killed nodes", 30*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == n-kill
		})
	}
	if v, ok := live[0].Metrics(t).Value("limiterd_cluster_members", "state", "alive"); !ok || v != float64(n-kill) {
		t.Fatalf(`members metric after the kill: limiterd_cluster_members{state="alive"} %v (exported: %v), want %d`, v, ok, n-kill)
	}
	// Counts merged from the dead nodes keep counting.
	if got := remaining(t, live[0], "conv", 100); got != 70 {
		t.Fatalf("after the kill %s sees %d left, want 70", live[0].Name, got)
	}

	// Restart the killed nodes under the same names: they learn back what
	// they had counted (and what the others counted).
	for _, p := range dead {
		c.Start(p)
	}
	for _, p := range dead {
		nodetest.Eventually(t, p.Name+" gets its counts back", 20*time.Second, func() bool { return remaining(t, p, "conv", 100) == 70 })
	}
}

// TestAccuracyOverHTTP drives 8 real nodes (LIMITERD_E2E_NODES) over HTTP
// with a client at 9x its limit and one at 0.9x, for two windows each,
// requests spread at random over the nodes. Set LIMITERD_E2E_LONG=1.
//
// The window is 10 s, so the sync interval defaults to the seed's ratio of
// sync to window (200 ms per 60 s: 33 ms); LIMITERD_E2E_SYNC sets another,
// and LIMITERD_E2E_GRACE a delivery grace other than the default share of
// it (-sync-delivery-grace). LIMITERD_E2E_SATURATE=R also sends node 1
// R checks a second over 1,000 other keys all along (loadgen's keys
// pattern, from this process): the same runs on a saturated machine,
// where some deltas come after the grace (limiterd_sync_late_deltas_total).
// The most accepted in any window must stay within the bound the counter
// derives for the same settings (counter.WorstCase), and within 1.1x the
// limit whenever that bound is: with a 10 s window a 200 ms sync is not
// (600 per 10 s on 8 nodes: 744 = 1.24x; measured 631-683 in eight runs),
// and a limit of 60 is too small to share among 8 nodes within 1.1x at
// any interval (68 = 1.133x), as limiterd itself warns.
func TestAccuracyOverHTTP(t *testing.T) {
	if os.Getenv("LIMITERD_E2E_LONG") == "" {
		t.Log("set LIMITERD_E2E_LONG=1 to run the accuracy runs (about a minute)")
		return
	}
	n := nodetest.EnvInt("LIMITERD_E2E_NODES", 8)
	limit := nodetest.EnvInt("LIMITERD_E2E_LIMIT", 60)
	window := 10 * time.Second
	sync := (window * 200 / 60_000).Round(time.Millisecond) // the seed's 200 ms per 60 s: 33 ms
	if v := os.Getenv("LIMITERD_E2E_SYNC"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("LIMITERD_E2E_SYNC=%q: want a positive duration", v)
		}
		sync = d
	}
	args := []string{"-sync-interval", sync.String()}
	grace := counter.DefaultClusterConfig("grace").DeliveryGrace
	if v := os.Getenv("LIMITERD_E2E_GRACE"); v != "" {
		g, err := strconv.ParseFloat(v, 64)
		if err != nil || g < 0 || g > 1 {
			t.Fatalf("LIMITERD_E2E_GRACE=%q: want a share of the sync interval, 0 to 1", v)
		}
		grace, args = g, append(args, "-sync-delivery-grace", v)
	}
	bound, covered := nodetest.DerivedBound(t, n, int64(limit), window, sync, func(cc *counter.ClusterConfig) { cc.DeliveryGrace = grace })
	t.Logf("%d nodes, %d per %v, sync %v, delivery grace %g of it: derived worst case %d (%.3f x limit), within 1.1x: %v",
		n, limit, window, sync, grace, bound, float64(bound)/float64(limit), covered)
	rules := fmt.Sprintf("rules:\n  - name: default\n    limit: %d\n    window: %s\n", limit, window)
	c := nodetest.Start(t, nodetest.Config{Nodes: n, Rules: []string{rules}, Args: args})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == n
		})
	}
	if v := os.Getenv("LIMITERD_E2E_SATURATE"); v != "" {
		rate, err := strconv.ParseFloat(v, 64)
		if err != nil || rate <= 0 {
			t.Fatalf("LIMITERD_E2E_SATURATE=%q: want checks a second, above 0", v)
		}
		stop := saturate(t, c.Procs[0], rate, limit, window, 4*window+10*time.Second)
		defer stop()
	}
	for _, tc := range []struct {
		name   string
		factor float64
	}{{"9x", 9}, {"0.9x", 0.9}} {
		rate := tc.factor * float64(limit) / window.Seconds()
		log := drive(t, c, "acc-"+tc.name, tc.factor, limit, window, 2*window)
		best, definite, rejected, errs := analyse(log, window)
		t.Logf("client at %s (%.1f/s) over %d nodes for %v: %d requests, %d accepted, %d rejected, %d errors; max %d in any %v by send instant = %.3f x limit, %d by whole round trip",
			tc.name, rate, n, 2*window, len(log), len(log)-rejected-errs, rejected, errs, best, window, float64(best)/float64(limit), definite)
		if errs > 0 {
			t.Errorf("%s: %d requests failed or got 5xx", tc.name, errs)
		}
		if int64(definite) > bound {
			t.Errorf("%s: %d accepted and decided in one window-long interval, above the derived bound %d", tc.name, definite, bound)
		}
		if covered && float64(best) > 1.1*float64(limit) {
			t.Errorf("%s: %d accepted in one window-long interval > 1.1 x %d", tc.name, best, limit)
		}
		if tc.factor < 1 && rejected > 0 {
			t.Errorf("%s: a client under its limit was rejected %d times", tc.name, rejected)
		}
	}
	// How late the deltas came after their senders' ticks: the bound
	// assumes each within the grace. A figure for BENCHMARKS.md, not a
	// pass or fail: it depends on how busy the machine is.
	var deltas, late float64
	for _, p := range c.Procs {
		m := p.Metrics(t)
		deltas += m.Sum("limiterd_sync_delta_delay_seconds")
		late += m.Sum("limiterd_sync_late_deltas_total")
	}
	t.Logf("deltas received by the %d nodes: %.0f, of which %.0f arrived later than the delivery grace (%.0f ms) after their tick",
		n, deltas, late, grace*float64(sync.Milliseconds()))
}

// saturate sends p rate checks a second over 1,000 keys of their own,
// Zipf-drawn, for at most d, and returns what stops it and waits for it.
func saturate(t *testing.T, p *nodetest.Proc, rate float64, limit int, window, d time.Duration) (stop func()) {
	t.Helper()
	cfg := loadgen.DefaultConfig()
	cfg.Targets = []string{p.HTTP}
	cfg.Pattern, cfg.KeyPrefix, cfg.Keys, cfg.ZipfS, cfg.Rate = loadgen.PatternKeys, "sat-", 1000, 1.1, rate
	cfg.Limit, cfg.Window, cfg.Duration = limit, window, d
	cfg.Conns, cfg.Timeout, cfg.Progress, cfg.MaxLog = 32, 5*time.Second, 0, 1
	cfg.MaxLate = 100 * time.Millisecond // a generator behind drops, not bursts
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan *loadgen.Result, 1)
	go func() { done <- loadgen.Run(ctx, &cfg, "sat", nil) }()
	return func() {
		cancel()
		rep := (<-done).Report()
		t.Logf("saturating load on %s: %d checks answered, %.0f a second", p.Name, rep.Answered, rep.AchievedRate)
	}
}

// drive sends limitload's steady pattern for key, factor x limit per
// window for d, open loop (each request at its scheduled instant, whatever
// the answers), to nodes at random over 64 connections, and returns what
// happened to each request.
func drive(t *testing.T, c *nodetest.Cluster, key string, factor float64, limit int, window, d time.Duration) []loadgen.Outcome {
	t.Helper()
	cfg := loadgen.DefaultConfig()
	cfg.Targets = nil // the nodes only, not the default
	for _, p := range c.Procs {
		cfg.Targets = append(cfg.Targets, p.HTTP)
	}
	cfg.Pattern, cfg.Key, cfg.Factor, cfg.Limit, cfg.Window, cfg.Duration = loadgen.PatternSteady, key, factor, limit, window, d
	cfg.Conns, cfg.Timeout, cfg.Progress = (64+len(c.Procs)-1)/len(c.Procs), 5*time.Second, 0
	var mu sync.Mutex
	var log []loadgen.Outcome
	cfg.Observe = func(o loadgen.Outcome) {
		mu.Lock()
		defer mu.Unlock()
		log = append(log, o)
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	loadgen.Run(context.Background(), &cfg, "acc", nil)
	return log
}

// analyse returns the most requests accepted in any window-long interval
// by send instant, the most accepted whose whole round trip (from send to
// answer, so the instant a node decided it too) lies in one window-long
// interval, the rejections and the failures. The first is what a client
// sees; the second never counts a request a node decided outside the
// interval, so it is what the derived bound is held against: a request
// sent just before a window's end may be decided just after it.
func analyse(log []loadgen.Outcome, window time.Duration) (best, definite, rejected, errs int) {
	var ok []loadgen.Outcome
	for _, o := range log {
		switch o.Status {
		case 200:
			ok = append(ok, o)
		case 429:
			rejected++
		default: // a failure, or not sent at all
			errs++
		}
	}
	slices.SortFunc(ok, func(a, b loadgen.Outcome) int { return cmp.Compare(a.Sent, b.Sent) })
	at := make([]time.Duration, len(ok))
	done := make([]time.Duration, len(ok))
	for i, o := range ok {
		at[i], done[i] = o.Sent-ok[0].Sent, o.Done-ok[0].Sent
	}
	most, _ := oracle.MaxInWindow(at, nil, window)
	return int(most), int(oracle.MaxDecidedInWindow(at, done, window)), rejected, errs
}

// TestStalledHalfConverges cuts half of a cluster of real processes off
// for 12 s (SIGSTOP: they neither send nor answer), waits until the other
// half declares them dead, so that it sends them nothing more, counts a key
// to 60 % of its limit on that half, and heals (SIGCONT): those counts
// never reached the cut half as deltas, yet every node then counts exactly
// what was admitted, never more, without a request to the key (the rejoin's
// catch-up). An unnoticed partition (nobody declared dead), whose datagrams
// are lost on the way, is covered in process by
// cluster.TestUnnoticedPartitionHealsByCatchUp, real memberlist nodes on
// loopback with a transport that drops; between network namespaces it is
// issue 12's.
func TestStalledHalfConverges(t *testing.T) {
	c := nodetest.Start(t, nodetest.Config{Nodes: 4, Rules: []string{rules100}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members alive", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == 4
		})
	}
	awake, cut := c.Procs[:2], c.Procs[2:]
	// One request on every node first, so that no node's own view is ever
	// empty: remaining's probe (hits = the limit) is then always denied
	// where it is asked, and never counted.
	for _, p := range c.Procs {
		if code, r := p.Check(t, "part"); code != 200 || !r.Allowed {
			t.Fatalf("first check on %s: %d %+v", p.Name, code, r)
		}
	}
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" counts the first 4", 20*time.Second, func() bool { return remaining(t, p, "part", 100) == 96 })
	}
	for _, p := range cut {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	// Count only once the awake half holds the stalled half dead: from
	// then on it sends them nothing, so what it counts now never reaches
	// them as a delta (a real loss, not datagrams waiting in a buffer).
	for _, p := range awake {
		nodetest.Eventually(t, p.Name+" to see the stalled half dead", 30*time.Second, func() bool {
			m, err := p.Members()
			if err == nil && time.Since(stopped) > 25*time.Second {
				t.Logf("%s sees %v", p.Name, m)
			}
			return err == nil && m[cut[0].Name] == "dead" && m[cut[1].Name] == "dead"
		})
	}
	for i := range 60 {
		if code, r := awake[i%2].Check(t, "part"); code != 200 || !r.Allowed {
			t.Fatalf("check %d on %s: %d %+v", i, awake[i%2].Name, code, r)
		}
	}
	time.Sleep(time.Until(stopped.Add(12 * time.Second))) // no-op if declaring them dead took longer
	for _, p := range cut {
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	healed := time.Now()
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" counts the 64 admitted, no more", 20*time.Second, func() bool {
			left := remaining(t, p, "part", 100)
			if left < 36 {
				t.Fatalf("%s sees %d left: more than the 64 admitted counted", p.Name, left)
			}
			return left == 36
		})
	}
	t.Logf("every node counts the 64 admitted %v after the stall", time.Since(healed).Round(100*time.Millisecond))
}
