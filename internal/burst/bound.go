package burst

import (
	"math"

	"github.com/limiterd/limiterd/internal/clustersim"
)

// The bound and its terms, derived from a simulated cluster's
// configuration as the nodes' counters derive them; together in this file
// so that one function of package counter can take their place.

// GraceMs is the delivery grace in ms, as counter/cluster.go computes it.
func GraceMs(sc clustersim.Config) int64 {
	return int64(sc.Grace * float64(sc.Sync.Milliseconds()))
}

// BudgetFloorRequests is the budget's per-node floor f, as
// counter/cluster.go computes it: BudgetFloor x the requests a client at
// its limit rate sends in a sync interval plus the delivery grace (the
// longest span a node counts as unacknowledged), rounded up.
func BudgetFloorRequests(sc clustersim.Config) int64 {
	span := float64(sc.Sync.Milliseconds() + GraceMs(sc))
	return int64(math.Ceil(sc.Floor * float64(sc.Limit) * span / float64(sc.Window.Milliseconds())))
}

// NodeTail is the most requests one node's expired slice may hide, as
// the nodes' counters compute it (counter.Counter.Shares).
func NodeTail(sc clustersim.Config) int64 { return sc.Shares().Tail }

// BlindShare is a node's blind share b of a coordinated cluster, as the
// nodes' counters compute it (counter.Counter.Shares).
func BlindShare(sc clustersim.Config) int64 { return sc.Shares().Blind }

// ClusterBound is the derived bound (docs/blind-interval.md) on what the
// cluster admits of one key in any window-long interval, for any client
// rate, with ticks at the same instant, no latency and no skew. With the
// coordinator (every answer in time) it is the counter's own WorstCase,
// L + N x b + Λ + N x T, b the blind share and Λ the lease pool (package
// counter, "Coordination at the margin"). Without the budget it is
// N x (L + T), T the hidden tail of one node's slices. With it, if C of
// the window is known to every node at the last tick, each node admits at
// most min(L - C, max(1, f + (L - C) / N)) after it, f the per-node floor;
// the bound is the most C plus N of those can make, plus N x T:
// L + N x f + N x T whenever f >= 1 and N divides L.
func ClusterBound(sc clustersim.Config) int64 {
	n := int64(sc.Nodes)
	if !sc.Uncoordinated && sc.Nodes > 1 {
		sh := sc.Shares()
		return sc.Limit + n*sh.Blind + sh.Leases + n*sh.Tail
	}
	if !sc.Budget {
		return n * (sc.Limit + NodeTail(sc))
	}
	f, l := BudgetFloorRequests(sc), sc.Limit
	var most int64
	for c := int64(0); c < l; c++ {
		per := min(l-c, max(1, f+(l-c)/n))
		most = max(most, c+n*per)
	}
	return most + n*NodeTail(sc)
}
