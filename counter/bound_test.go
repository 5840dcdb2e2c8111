package counter

import (
	"testing"
	"time"
)

// TestBoundOf checks every figure of the bound on the seed's cluster (8
// nodes, 200 ms sync, grace 0.25, TailShare 0.3, LeaseShare 0.46) and on
// its edges; the WorstCase rows are TestWorstCase's.
func TestBoundOf(t *testing.T) {
	cluster := func(nodes int, edit func(*ClusterConfig)) ClusterConfig {
		cc := DefaultClusterConfig("")
		cc.Nodes = nodes
		if edit != nil {
			edit(&cc)
		}
		return cc
	}
	uncoordinated := func(cc *ClusterConfig) { cc.Coordinated = false }
	for _, tc := range []struct {
		name   string
		cc     ClusterConfig
		limit  int64
		window time.Duration
		want   Bound
	}{
		{"no cluster", ClusterConfig{}, 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 60}, Fallback: 660, WorstCase: 660}},
		{"one node in cluster mode", cluster(1, nil), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 60}, Fallback: 660, WorstCase: 660}},
		// T = floor(0.1 x 0.3 x 600 / 8) = 2, pool 60 − 16 = 44, Λ = 20,
		// b = 3; f = ceil(600 x 250 ms / 60 s) = 3.
		{"coordinated", cluster(8, nil), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 2, Blind: 3, Leases: 20}, Floor: 3, Fallback: 600 + 24 + 16, WorstCase: 660}},
		{"coordinated short window", cluster(8, nil), 600, 10 * time.Second,
			Bound{Promised: 660, Shares: Shares{Tail: 2, Blind: 3, Leases: 20}, Floor: 15, Fallback: 736, WorstCase: 660}},
		// Tolerance 1: no tail, no blind share, no lease.
		{"coordinated small limit", cluster(8, nil), 10, time.Second,
			Bound{Promised: 11, Floor: 3, Fallback: 34, WorstCase: 10}},
		// On more than MeshNodes nodes a limit with no blind share is
		// routed (RouteAuto): no node knows the count, and each keeps to
		// its floor, L + (N − 1)·f.
		{"coordinated small limit, routed", cluster(32, nil), 10, time.Second,
			Bound{Promised: 11, Floor: 3, Fallback: 10 + 31*3, WorstCase: 10}},
		// RouteAlways: no blind share, the leases as before.
		{"routed always", cluster(8, func(cc *ClusterConfig) { cc.Routing = RouteAlways }), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 2, Leases: 20}, Floor: 3, Fallback: 600 + 7*3 + 16, WorstCase: 636}},
		{"budget alone", cluster(8, uncoordinated), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 2}, Floor: 3, Fallback: 640, WorstCase: 640}},
		{"floor 0", cluster(8, func(cc *ClusterConfig) { cc.Coordinated, cc.BudgetFloor = false, 0 }), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 2}, Fallback: 600 - 1 + 8 + 16, WorstCase: 623}},
		{"no budget", cluster(8, func(cc *ClusterConfig) { cc.Coordinated, cc.Budget = false, false }), 600, time.Minute,
			Bound{Promised: 660, Shares: Shares{Tail: 2}, Floor: 3, Fallback: 8 * 602, WorstCase: 4816}},
		// f = 25 is more than the limit: every node fills its window alone
		// after a tick, as without the budget, and no more (not L + N·f).
		{"window shorter than the sync interval", cluster(8, uncoordinated), 10, 100 * time.Millisecond,
			Bound{Promised: 11, Floor: 25, Fallback: 80, WorstCase: 80}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := BoundOf(0.1, tc.cc, tc.limit, tc.window); got != tc.want {
				t.Errorf("BoundOf(%d, %v) = %+v, want %+v", tc.limit, tc.window, got, tc.want)
			}
		})
	}
}

// TestBoundOfIsTheCounters checks that a Counter's WorstCase and Shares
// are BoundOf's for its settings, across node counts, limits, windows and
// the coordinator and budget on and off.
func TestBoundOfIsTheCounters(t *testing.T) {
	for _, nodes := range []int{1, 2, 3, 8, 64} {
		for _, coord := range []bool{true, false} {
			for _, budget := range []bool{true, false} {
				c := newCounter(t, DefaultConfig())
				cc := DefaultClusterConfig("n")
				cc.Nodes, cc.Coordinated, cc.Budget = nodes, coord, budget
				if err := c.SetCluster(cc); err != nil {
					t.Fatal(err)
				}
				for _, limit := range []int64{1, 5, 10, 600, 6000, 100_000} {
					for _, window := range []time.Duration{time.Millisecond, 100 * time.Millisecond, time.Second, time.Minute, time.Hour} {
						b := BoundOf(DefaultConfig().Tolerance, cc, limit, window)
						if got := c.WorstCase(limit, window); got != b.WorstCase {
							t.Errorf("%d nodes, coordinated %v, budget %v, %d/%v: WorstCase %d, BoundOf %+v", nodes, coord, budget, limit, window, got, b)
						}
						if got := c.Shares(limit); got != b.Shares {
							t.Errorf("%d nodes, coordinated %v, budget %v, %d: Shares %+v, BoundOf %+v", nodes, coord, budget, limit, got, b)
						}
					}
				}
			}
		}
	}
}

// TestBudgetMost checks the budget's bound against the maximum over every
// count the nodes may have known at the last tick.
func TestBudgetMost(t *testing.T) {
	for l := int64(1); l <= 150; l++ {
		for n := int64(2); n <= 12; n++ {
			for f := int64(0); f <= 80; f++ {
				var want int64
				for c := int64(0); c < l; c++ {
					want = max(want, c+n*min(l-c, max(1, f+(l-c)/n)))
				}
				if got := budgetMost(l, n, f); got != want {
					t.Fatalf("budgetMost(L %d, N %d, f %d) = %d, want %d", l, n, f, got, want)
				}
			}
		}
	}
}
