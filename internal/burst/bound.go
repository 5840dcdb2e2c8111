package burst

import (
	"github.com/limiterd/limiterd/internal/clustersim"
)

// The bound and its terms for a simulated cluster: counter.BoundOf's,
// the one derivation the nodes' counters, the daemon's advice and the
// tests share, read off under the names the tables print.

// GraceMs is the delivery grace in ms, as counter/cluster.go computes it.
func GraceMs(sc clustersim.Config) int64 {
	return int64(sc.Grace * float64(sc.Sync.Milliseconds()))
}

// BudgetFloorRequests is the budget's per-node floor f (counter.Bound.Floor):
// BudgetFloor x the requests a client at its limit rate sends in a sync
// interval plus the delivery grace, rounded up.
func BudgetFloorRequests(sc clustersim.Config) int64 { return sc.Bound().Floor }

// NodeTail is the most requests one node's expired slice may hide.
func NodeTail(sc clustersim.Config) int64 { return sc.Bound().Tail }

// BlindShare is a node's blind share b of a coordinated cluster.
func BlindShare(sc clustersim.Config) int64 { return sc.Bound().Blind }

// ClusterBound is the derived bound (docs/blind-interval.md, package
// counter) on what the cluster admits of one key in any window-long
// interval, for any client rate, with ticks at the same instant, no
// latency and no skew: with the coordinator (every answer in time)
// L + N x b + Λ + N x T; without it the budget's (counter.Bound.Fallback),
// or N x (L + T) without the budget.
func ClusterBound(sc clustersim.Config) int64 { return sc.Bound().WorstCase }
