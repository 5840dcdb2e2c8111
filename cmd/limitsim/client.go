package main

import (
	"github.com/limiterd/limiterd/internal/seed"

	"github.com/limiterd/limiterd/limiter"
)

// clientKey is the one client of the cluster experiments.
const clientKey = "client"

// clientRun is what one client's run on a simulated cluster found.
type clientRun struct {
	requests, accepted, rejected int
	falseRejections              int
	falseFallback                int // of which decided by the budget, as a fallback
	maxInWindow                  int // most accepted in any window-long interval (true time)
	stats                        simStats
	maxOffsetMs                  int64 // largest peer clock offset any node's Syncer observed
}

// runClient sends one client's requests, at the true instants at
// (non-decreasing, ms), request i to node(i), through a fresh simulated
// cluster.
func runClient(sc simConfig, at []int64, node func(i int) int) (clientRun, error) {
	sim, err := newSimCluster(sc)
	if err != nil {
		return clientRun{}, err
	}
	ty := newTally(sc.window.Milliseconds(), sc.limit)
	var d limiter.Decision
	for i, t := range at {
		if err := sim.check(t, clientKey, node(i), &d); err != nil {
			return clientRun{}, err
		}
		ty.recordDecision(t, clientKey, 1, &d)
	}
	st, err := sim.finish()
	if err != nil {
		return clientRun{}, err
	}
	n, _ := ty.busiest()
	return clientRun{
		requests: ty.requests, accepted: ty.accepted, rejected: ty.rejected,
		falseRejections: ty.falseRejections, falseFallback: ty.falseFallback, maxInWindow: n, stats: st,
		maxOffsetMs: sim.maxPeerOffset().Milliseconds(),
	}, nil
}

// lcgNodes returns the node choice of the seed's model: each request on the
// node its LCG, seeded with seed, draws among n.
func lcgNodes(seed uint32, n int) func(int) int {
	rnd := newLCG(seed)
	return func(int) int { return rnd.Node(n) }
}

// roundRobin sends request i to node i mod n.
func roundRobin(n int) func(int) int { return func(i int) int { return i % n } }

// steadyAt returns rate requests a second for durationMs: request i at
// floor(i*1000/rate) ms.
func steadyAt(rate float64, durationMs int64) []int64 {
	n := int64(rate * float64(durationMs) / 1000)
	at := make([]int64, n)
	for i := range at {
		at[i] = int64(float64(i) * 1000 / rate)
	}
	return at
}

// burstsAt returns, at the start of every window in durationMs, limit
// requests spread evenly over spanMs (the seed's intermittent pattern has
// a span of one slice, 5 s). Each burst is exactly the limit, so the client
// never exceeds it in any window-long interval.
func burstsAt(limit int, windowMs, spanMs, durationMs int64) []int64 {
	var at []int64
	for start := int64(0); start < durationMs; start += windowMs {
		at = append(at, seed.Spread(start, spanMs, limit)...)
	}
	return at
}
