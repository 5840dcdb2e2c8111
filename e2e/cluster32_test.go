package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/nodetest"
)

// rules600 is one rule of 600 per minute: on 32 nodes it leaves each node
// a blind share of 0 (counter.BoundOf), so every check past a lease is
// the coordinator's to decide.
const rules600 = `rules:
  - name: default
    limit: 600
    window: 60s
`

// TestThirtyTwoNodesFormDecideConverge is issue 20's "32 real nodes form,
// decide and converge": 32 limiterd processes on 127.0.0.1 (the binary
// nodetest.Build makes, never a race build, whatever the test's flags).
//
//   - Form: every node sees 32 members alive.
//   - Decide: a compliant client, 300 checks of a key over the 32 nodes
//     at once, is never denied; an over-limit client, 1,000 checks of
//     another key over the 32 nodes at once (all within a few seconds, so
//     within one window: 600 of them fit), gets at least the limit and at
//     most the derived bound admitted (nodetest.DerivedBound).
//   - Converge: once the traffic stops, the key's coordinator counts
//     exactly what was admitted of each key, and no node ever counts more
//     (nothing counted twice). On 32 nodes a limit of 600 leaves no node a
//     blind share, so its keys' changes go to their coordinator alone
//     (counter.RouteAuto): every other node knows only what it admitted
//     itself (and the coordinator's backup, the coordinator's admissions
//     too), so their counts, disjoint, add up to no more than the total,
//     and the coordinator, which merges them all, holds it.
//
// The nodes answer a coordinator within 500 ms: the promise is for a
// healthy cluster, and 32 processes beside the test on two cores answer
// later than the 5 ms default; a late answer falls back to the budget,
// which is not exact (the fallbacks are logged). Its figures (wall time,
// formation time, a node's RSS) go to nodetest.Figures.
func TestThirtyTwoNodesFormDecideConverge(t *testing.T) {
	const (
		n         = 32
		limit     = 600
		compliant = 300
		over      = 1000
	)
	window := 60 * time.Second
	bound, _ := nodetest.DerivedBound(t, n, limit, window, counter.DefaultClusterConfig("bound").SyncInterval)

	begin := time.Now()
	c := nodetest.Start(t, nodetest.Config{Nodes: n, Rules: []string{rules600},
		Args: []string{"-admin-addr", "127.0.0.1:0", "-log-level", "info", "-coordinator-deadline", "500ms"}})
	started := time.Since(begin)
	addrs := adminAddrs(t, c.Procs)

	// Form.
	c.WaitAlive(c.Procs, n, 45*time.Second)
	formed := time.Since(begin)
	if v, ok := c.Procs[n-1].Metrics(t).Value("limiterd_cluster_members", "state", "alive"); !ok || v != n {
		t.Fatalf(`%s: limiterd_cluster_members{state="alive"} %v (exported: %v), want %d`, c.Procs[n-1].Name, v, ok, n)
	}

	// Decide.
	if r := burstAt(t, c.Procs, "c32-compliant", compliant); r.allowed.Load() != compliant {
		t.Fatalf("%d compliant checks over %d nodes: %d allowed, %d denied (%v checks fell back)", compliant, n, r.allowed.Load(), r.denied.Load(), fallbacksOf(t, c.Procs))
	}
	r := burstAt(t, c.Procs, "c32-over", over)
	admitted := r.allowed.Load()
	if admitted > bound || admitted < limit {
		t.Fatalf("%d checks over %d nodes: %d admitted, want between the limit %d and the derived bound %d (%v checks fell back)", over, n, admitted, limit, bound, fallbacksOf(t, c.Procs))
	}
	decided := time.Now()

	// Converge.
	counts := func(key string) []int64 {
		out := make([]int64, len(addrs))
		for i, addr := range addrs {
			code, a := admin(t, c.HTTP, addr, "GET", key)
			if code != 200 || len(a.Limits) != 1 {
				t.Fatalf("GET %s on %s = %d %+v", key, c.Procs[i].Name, code, a)
			}
			out[i] = a.Limits[0].Count
		}
		return out
	}
	var coordinated time.Duration
	for _, k := range []struct {
		key  string
		want int64
	}{{"c32-compliant", compliant}, {"c32-over", admitted}} {
		_, a := admin(t, c.HTTP, addrs[0], "GET", k.key)
		ci := slices.Index(nodetest.Names(c.Procs), a.Coordinator)
		if ci < 0 {
			t.Fatalf("GET %s names the coordinator %q, not a node", k.key, a.Coordinator)
		}
		var got []int64
		check := func() []int64 {
			got = counts(k.key)
			for i, v := range got {
				if v > k.want {
					t.Fatalf("%s counts %d of %s, more than the %d admitted (coordinator %s)", c.Procs[i].Name, v, k.key, k.want, a.Coordinator)
				}
			}
			return got
		}
		nodetest.Eventually(t, fmt.Sprintf("the coordinator %s to count the %d admitted of %s", a.Coordinator, k.want, k.key), 20*time.Second,
			func() bool { return check()[ci] == k.want })
		coordinated = max(coordinated, time.Since(decided))
		var others int64
		for i, v := range check() {
			if i != ci {
				others += v
			}
		}
		if others > k.want {
			t.Errorf("the nodes other than the coordinator count %d of %s together, more than the %d admitted: some counted another's admissions", others, k.key, k.want)
		}
	}

	var rss, most int64
	for i, p := range c.Procs {
		b, err := p.ResidentBytes()
		if err != nil {
			t.Fatal(err)
		}
		if i == 1 {
			rss = b
		}
		most = max(most, b)
	}
	nodetest.Figures(t, "32 nodes form, decide and converge",
		"nodes", n,
		"started (serially, each ready)", started.Round(100*time.Millisecond),
		"formed (every node sees 32 alive)", formed.Round(100*time.Millisecond),
		"over-limit admitted", fmt.Sprintf("%d of %d (limit %d, derived bound %d)", admitted, over, limit, bound),
		"fallbacks", fallbacksOf(t, c.Procs),
		"coordinator counts all", coordinated.Round(100*time.Millisecond),
		"RSS node-1", fmt.Sprintf("%.1f MiB", float64(rss)/(1<<20)),
		"RSS max", fmt.Sprintf("%.1f MiB", float64(most)/(1<<20)),
		"wall to convergence (the 32 stop after, one by one)", time.Since(begin).Round(100*time.Millisecond))
}
