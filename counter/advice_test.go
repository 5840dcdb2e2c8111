package counter

import (
	"fmt"
	"testing"
	"time"
)

// TestAdvise checks the advice's figures on the default cluster settings
// with the coordinator off (the budget decides), as limiterd's warnings
// give them.
func TestAdvise(t *testing.T) {
	const ms = time.Millisecond
	cluster := func(nodes int, budget bool) ClusterConfig {
		cc := DefaultClusterConfig("a")
		cc.Nodes, cc.Budget, cc.Coordinated = nodes, budget, false
		return cc
	}
	for _, tc := range []struct {
		name   string
		cc     ClusterConfig
		limit  int64
		window time.Duration
		want   Advice
	}{
		// 67 ms: f = ceil(600 × 83 ms / 10 s) = 5, 600 + 40 + 16 = 656 <= 660; 68 ms: f = 6.
		{"short window", cluster(8, true), 600, 10 * time.Second,
			Advice{Promised: 660, Sync: 67 * ms, SyncBound: 656}},
		// 3 ms: f = ceil(120 × 3 ms / 500 ms) = 1; 4 ms: 5 ms with the grace, f = 2.
		{"very short window", cluster(8, true), 120, 500 * ms,
			Advice{Promised: 132, Sync: 3 * ms, SyncBound: 128}},
		// At 1 ms f = 1: 10 + 8 + 0 > 11. The smallest limit that fits is 80.
		{"too small to share", cluster(8, true), 10, time.Second,
			Advice{Promised: 11, Bound1ms: 18, Floor1ms: 1, Smallest: 80}},
		// f = 1 up to a span of 50 ms: 40 ms and its 10 ms grace.
		{"two nodes", cluster(2, true), 20, time.Second,
			Advice{Promised: 22, Sync: 40 * ms, SyncBound: 22}},
		// Without: 2·(600 + 9) = 1218. With: 600 + 2·3 + 2·9 = 624.
		{"the budget is enough", cluster(2, false), 600, time.Minute,
			Advice{Promised: 660, EnableBudget: true, BudgetBound: 624}},
		// With: 600 + 2·30 + 2·9 = 678; at 140 ms (175 ms with the grace) f = 21.
		{"the budget and a shorter interval", cluster(2, false), 600, 5 * time.Second,
			Advice{Promised: 660, EnableBudget: true, BudgetBound: 678, Sync: 140 * ms, SyncBound: 660}},
		// 1000 per 10 ms: each node's floor is 100 even at 1 ms, and never
		// falls below a tenth of the limit with it.
		{"no interval fits", cluster(4, true), 1000, 10 * ms,
			Advice{Promised: 1100, Bound1ms: 1000 + 400 + 4*7, Floor1ms: 100, Tails: 28}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.want.Limit, tc.want.Window, tc.want.Nodes, tc.want.EnableCoordinator = tc.limit, tc.window, tc.cc.Nodes, true
			got, ok := Advise(0.1, tc.cc, tc.limit, tc.window)
			if !ok || got != tc.want {
				t.Errorf("Advise = %+v, %v; want %+v", got, ok, tc.want)
			}
		})
	}
	if a, ok := Advise(0.1, DefaultClusterConfig("a"), 10, time.Second); ok {
		t.Errorf("one node: advice %+v", a)
	}
}

// TestAdviseAgreesWithCounter checks the advice's figures on a counter of
// their own: the suggested sync interval keeps the limit within 1.1x and
// one millisecond more does not; with none, not even 1 ms does; the
// smallest shareable limit fits at 1 ms and the one below it does not.
func TestAdviseAgreesWithCounter(t *testing.T) {
	worst := func(nodes int, sync time.Duration, limit int64, window time.Duration) int64 {
		c := newCounter(t, DefaultConfig())
		cc := DefaultClusterConfig("check")
		cc.Nodes, cc.SyncInterval, cc.Coordinated = nodes, sync, false
		if err := c.SetCluster(cc); err != nil {
			t.Fatal(err)
		}
		return c.WorstCase(limit, window)
	}
	promised := func(limit int64) int64 { return limit + limit/10 }
	const ms = time.Millisecond
	for _, nodes := range []int{2, 3, 8, 16, 64} {
		cc := DefaultClusterConfig("a")
		cc.Nodes, cc.Coordinated = nodes, false
		for _, limit := range []int64{5, 10, 100, 600, 6000, 100_000} {
			for _, window := range []time.Duration{100 * ms, time.Second, 10 * time.Second, time.Minute, time.Hour} {
				name := fmt.Sprintf("%d nodes %d/%v", nodes, limit, window)
				a, ok := Advise(DefaultConfig().Tolerance, cc, limit, window)
				s, smallest := a.Sync, a.Smallest
				switch {
				case !ok:
					t.Errorf("%s: no advice", name)
				case s == 0:
					if w := worst(nodes, ms, limit, window); w <= promised(limit) || w != a.Bound1ms {
						t.Errorf("%s: no sync interval suggested, but 1ms gives %d (advice: %d)", name, w, a.Bound1ms)
					}
				case worst(nodes, s, limit, window) > promised(limit) || worst(nodes, s, limit, window) != a.SyncBound:
					t.Errorf("%s: suggested %v gives %d > %d (advice: %d)", name, s, worst(nodes, s, limit, window), promised(limit), a.SyncBound)
				case s < 200*ms && worst(nodes, s+ms, limit, window) <= promised(limit):
					t.Errorf("%s: suggested %v, but %v fits too", name, s, s+ms)
				}
				if smallest > 0 {
					if w := worst(nodes, ms, smallest, window); w > promised(smallest) {
						t.Errorf("%s: smallest shareable %d gives %d at 1ms", name, smallest, w)
					}
					if l := smallest - 1; l > limit && worst(nodes, ms, l, window) <= promised(l) {
						t.Errorf("%s: smallest shareable %d, but %d fits", name, smallest, l)
					}
				}
			}
		}
	}
}
