package clustersim

import (
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// ClientKey is the key of the one client RunClient sends.
const ClientKey = "client"

// ClientRun is what one client's run on a simulated cluster found.
type ClientRun struct {
	Requests, Accepted, Rejected int
	FalseRejections              int
	FalseFallback                int // of which decided by the budget, as a fallback
	MaxInWindow                  int // most accepted in any window-long interval (true time)
	Stats                        Stats
	MaxOffsetMs                  int64 // largest peer clock offset any node's Engine observed
}

// RunClient sends one client's requests, at the true instants at
// (non-decreasing, ms), request i to node(i), through a fresh simulated
// cluster, and tallies them against the truth.
func RunClient(cfg Config, at []int64, node func(i int) int) (ClientRun, error) {
	sim, err := New(cfg)
	if err != nil {
		return ClientRun{}, err
	}
	ty := NewTally(cfg.Window.Milliseconds(), cfg.Limit)
	var d limiter.Decision
	for i, t := range at {
		if err := sim.Check(t, ClientKey, node(i), 1, &d); err != nil {
			return ClientRun{}, err
		}
		ty.RecordDecision(t, ClientKey, 1, &d)
	}
	st, err := sim.Finish()
	if err != nil {
		return ClientRun{}, err
	}
	n, _ := ty.Busiest()
	return ClientRun{
		Requests: ty.Requests, Accepted: ty.Accepted, Rejected: ty.Rejected,
		FalseRejections: ty.FalseRejections, FalseFallback: ty.FalseFallback, MaxInWindow: n, Stats: st,
		MaxOffsetMs: sim.MaxPeerOffset().Milliseconds(),
	}, nil
}

// LCGNodes returns the node choice of the seed's model: each request on
// the node its LCG, seeded with s, draws among n.
func LCGNodes(s uint32, n int) func(int) int {
	rnd := seed.NewLCG(s)
	return func(int) int { return rnd.Node(n) }
}

// RoundRobin sends request i to node i mod n.
func RoundRobin(n int) func(int) int { return func(i int) int { return i % n } }

// SteadyAt returns rate requests a second for durationMs: request i at
// floor(i*1000/rate) ms.
func SteadyAt(rate float64, durationMs int64) []int64 {
	n := int64(rate * float64(durationMs) / 1000)
	at := make([]int64, n)
	for i := range at {
		at[i] = int64(float64(i) * 1000 / rate)
	}
	return at
}
