package e2e

import (
	"github.com/limiterd/limiterd/internal/oracle"

	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

const rules100 = `rules:
  - name: default
    limit: 100
    window: 60s
`

// remaining reads how much of key's limit a node sees left without counting
// anything: a check for the whole limit is denied (and counts nothing)
// unless the window is empty.
func remaining(t *testing.T, p *proc, key string, limit int) int64 {
	t.Helper()
	code, body, err := p.get("/check?key=" + key + "&hits=" + strconv.Itoa(limit))
	if err != nil {
		t.Fatalf("probe on %s: %v", p.name, err)
	}
	var r checkResult
	if code == 200 {
		t.Fatalf("probe on %s was allowed (and counted): the window was empty", p.name)
	}
	if err := json.Unmarshal(body, &r); err != nil || code != 429 {
		t.Fatalf("probe on %s: %d %s", p.name, code, body)
	}
	return r.Remaining
}

// TestClusterEndToEnd runs n real limiterd processes (3, or
// LIMITERD_E2E_NODES): they converge over HTTP, survive SIGKILL of some of
// them without a single 5xx, and a restarted node gets its counts back.
func TestClusterEndToEnd(t *testing.T) {
	n := envInt("LIMITERD_E2E_NODES", 3)
	c := startCluster(t, n, rules100)

	for _, p := range c.procs {
		eventually(t, p.name+" sees all members alive", 20*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == n
		})
	}

	// 30 checks spread over the nodes; every node converges to 70 left.
	for i := range 30 {
		if code, r := check(t, c.procs[i%n], "conv"); code != 200 || !r.Allowed {
			t.Fatalf("check %d: %d %+v", i, code, r)
		}
	}
	for _, p := range c.procs {
		eventually(t, p.name+" converges", 10*time.Second, func() bool { return remaining(t, p, "conv", 100) == 70 })
	}

	// SIGKILL some nodes (1 of 3, 3 of 8); the others answer every check.
	kill := max(1, n*3/8)
	dead := c.procs[n-kill:]
	live := c.procs[:n-kill]
	for _, p := range dead {
		c.kill(p)
	}
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline) && i < 3000; i++ {
		p := live[i%len(live)]
		code, _, err := request("GET", "http://"+p.http+"/check?key=during-"+strconv.Itoa(i%50))
		if err != nil || (code != 200 && code != 429) {
			t.Fatalf("check %d on %s after the kill: %d %v", i, p.name, code, err)
		}
	}
	for _, p := range live {
		eventually(t, p.name+" reports the killed nodes", 30*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == n-kill
		})
	}
	if m := metric(t, live[0], `limiterd_cluster_members{state="alive"}`); m != fmt.Sprintf(`limiterd_cluster_members{state="alive"} %d`, n-kill) {
		t.Fatalf("members metric after the kill: %q", m)
	}
	// Counts merged from the dead nodes keep counting.
	if got := remaining(t, live[0], "conv", 100); got != 70 {
		t.Fatalf("after the kill %s sees %d left, want 70", live[0].name, got)
	}

	// Restart the killed nodes under the same names: they learn back what
	// they had counted (and what the others counted).
	for _, p := range dead {
		c.start(p)
	}
	for _, p := range dead {
		eventually(t, p.name+" gets its counts back", 20*time.Second, func() bool { return remaining(t, p, "conv", 100) == 70 })
	}
}

// TestAccuracyOverHTTP drives 8 real nodes (LIMITERD_E2E_NODES) over HTTP
// with a client at 9x its limit and one at 0.9x, for two windows each,
// requests spread at random over the nodes. Set LIMITERD_E2E_LONG=1.
//
// The window is 10 s, so the sync interval defaults to the seed's ratio of
// sync to window (200 ms per 60 s: 33 ms); LIMITERD_E2E_SYNC sets another.
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
	n := envInt("LIMITERD_E2E_NODES", 8)
	limit := envInt("LIMITERD_E2E_LIMIT", 60)
	window := 10 * time.Second
	sync := (window * 200 / 60_000).Round(time.Millisecond) // the seed's 200 ms per 60 s: 33 ms
	if v := os.Getenv("LIMITERD_E2E_SYNC"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("LIMITERD_E2E_SYNC=%q: want a positive duration", v)
		}
		sync = d
	}
	bound, covered := derivedBound(t, n, int64(limit), window, sync)
	t.Logf("%d nodes, %d per %v, sync %v: derived worst case %d (%.3f x limit), within 1.1x: %v",
		n, limit, window, sync, bound, float64(bound)/float64(limit), covered)
	rules := fmt.Sprintf("rules:\n  - name: default\n    limit: %d\n    window: %s\n", limit, window)
	c := startCluster(t, n, rules, "-sync-interval", sync.String())
	for _, p := range c.procs {
		eventually(t, p.name+" sees all members", 20*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == n
		})
	}
	for _, tc := range []struct {
		name   string
		factor float64
	}{{"9x", 9}, {"0.9x", 0.9}} {
		rate := tc.factor * float64(limit) / window.Seconds()
		log := drive(t, c, "acc-"+tc.name, rate, 2*window)
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
}

type sent struct {
	at   time.Time // sent
	done time.Time // answered
	code int
}

// drive sends requests for key at rate per second for d, open loop (each at
// its scheduled instant, whatever the answers), to random nodes.
func drive(t *testing.T, c *testCluster, key string, rate float64, d time.Duration) []sent {
	t.Helper()
	total := int(rate * d.Seconds())
	log := make([]sent, total)
	start := time.Now().Add(100 * time.Millisecond)
	jobs := make(chan int)
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for i := range jobs {
				at := start.Add(time.Duration(float64(i) / rate * float64(time.Second)))
				time.Sleep(time.Until(at))
				p := c.procs[rand.IntN(len(c.procs))]
				now := time.Now()
				code, _, err := request("GET", "http://"+p.http+"/check?key="+key)
				if err != nil {
					code = -1
				}
				log[i] = sent{at: now, done: time.Now(), code: code}
			}
		})
	}
	for i := range total {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return log
}

// analyse returns the most requests accepted in any window-long interval
// by send instant, the most accepted whose whole round trip (from send to
// answer, so the instant a node decided it too) lies in one window-long
// interval, the rejections and the failures. The first is what a client
// sees; the second never counts a request a node decided outside the
// interval, so it is what the derived bound is held against: a request
// sent just before a window's end may be decided just after it.
func analyse(log []sent, window time.Duration) (best, definite, rejected, errs int) {
	var ok []sent
	for _, s := range log {
		switch s.code {
		case 200:
			ok = append(ok, s)
		case 429:
			rejected++
		default:
			errs++
		}
	}
	slices.SortFunc(ok, func(a, b sent) int { return a.at.Compare(b.at) })
	at := make([]time.Duration, len(ok))
	for i, s := range ok {
		at[i] = s.at.Sub(ok[0].at)
	}
	done := make([]time.Duration, len(ok))
	for i, s := range ok {
		done[i] = s.done.Sub(ok[0].at)
	}
	most, _ := oracle.MaxInWindow(at, nil, window)
	return int(most), int(oracle.MaxDecidedInWindow(at, done, window)), rejected, errs
}

// derivedBound returns the most requests of one key that n nodes with
// limiterd's default counter and cluster settings, syncing every sync, may
// accept in a window (counter.WorstCase), and whether that is within the
// single node's L + floor(0.1 L). edit changes the cluster settings first
// (say, coordination off: the bound of the budget's fallback).
func derivedBound(t *testing.T, n int, limit int64, window, sync time.Duration, edit ...func(*counter.ClusterConfig)) (int64, bool) {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	single := c.WorstCase(limit, window)
	cc := counter.DefaultClusterConfig("bound")
	cc.Nodes, cc.SyncInterval = n, sync
	for _, e := range edit {
		e(&cc)
	}
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	bound := c.WorstCase(limit, window)
	return bound, bound <= single
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
	c := startCluster(t, 4, rules100)
	for _, p := range c.procs {
		eventually(t, p.name+" sees all members alive", 20*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == 4
		})
	}
	awake, cut := c.procs[:2], c.procs[2:]
	// One request on every node first, so that no node's own view is ever
	// empty: remaining's probe (hits = the limit) is then always denied
	// where it is asked, and never counted.
	for _, p := range c.procs {
		if code, r := check(t, p, "part"); code != 200 || !r.Allowed {
			t.Fatalf("first check on %s: %d %+v", p.name, code, r)
		}
	}
	for _, p := range c.procs {
		eventually(t, p.name+" counts the first 4", 20*time.Second, func() bool { return remaining(t, p, "part", 100) == 96 })
	}
	for _, p := range cut {
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
	}
	stopped := time.Now()
	// Count only once the awake half holds the stalled half dead: from
	// then on it sends them nothing, so what it counts now never reaches
	// them as a delta (a real loss, not datagrams waiting in a buffer).
	for _, p := range awake {
		eventually(t, p.name+" to see the stalled half dead", 30*time.Second, func() bool {
			m, err := members(p)
			if err == nil && time.Since(stopped) > 25*time.Second {
				t.Logf("%s sees %v", p.name, m)
			}
			return err == nil && m[cut[0].name] == "dead" && m[cut[1].name] == "dead"
		})
	}
	for i := range 60 {
		if code, r := check(t, awake[i%2], "part"); code != 200 || !r.Allowed {
			t.Fatalf("check %d on %s: %d %+v", i, awake[i%2].name, code, r)
		}
	}
	time.Sleep(time.Until(stopped.Add(12 * time.Second))) // no-op if declaring them dead took longer
	for _, p := range cut {
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	healed := time.Now()
	for _, p := range c.procs {
		eventually(t, p.name+" counts the 64 admitted, no more", 20*time.Second, func() bool {
			left := remaining(t, p, "part", 100)
			if left < 36 {
				t.Fatalf("%s sees %d left: more than the 64 admitted counted", p.name, left)
			}
			return left == 36
		})
	}
	t.Logf("every node counts the 64 admitted %v after the stall", time.Since(healed).Round(100*time.Millisecond))
}
