package burst

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// TestIdleTicksChangeNothing: the simulator skips the ticks of nodes that
// counted nothing since their last one, where limiterd ticks every node at
// every interval. The budget depends on ticks (a tick starts a sync
// interval and the delivery grace), so this checks that the shortcut
// changes no decision and no message, with latency, tick phases and skew.
func TestIdleTicksChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 9))
	base := Floor1().Sim()
	bursty := RandomBursty(rng, 2*seedstudy.WindowMs)
	chain := TailsThen(base, LatencyChain())
	tests := []struct {
		name                   string
		latency, stagger, skew time.Duration
		at                     []int64
		seed                   uint32 // of the LCG that picks the nodes; 0: the pattern's own
		clockTicks             bool
	}{
		{"latency chain", time.Millisecond, 0, 0, chain.At, 0, false},
		{"bursty, latency 3ms", 3 * time.Millisecond, 0, 0, bursty, 3, false},
		{"bursty, latency 60ms", 60 * time.Millisecond, 0, 0, bursty, 4, false},
		{"bursty, staggered", time.Millisecond, 200 * time.Millisecond, 0, bursty, 5, false},
		{"bursty, skewed", 0, 0, 50 * time.Millisecond, bursty, 6, false},
		{"steady 90/s", 2 * time.Millisecond, 0, 0, clustersim.SteadyAt(90, seedstudy.WindowMs), 7, false},
		{"bursty, skewed, ticks on each clock", time.Millisecond, 0, 70 * time.Millisecond, bursty, 8, true},
	}
	for _, tt := range tests {
		var runs [2]clustersim.ClientRun
		for i, every := range []bool{false, true} {
			sc := base
			sc.Latency, sc.Stagger, sc.Skew, sc.ClockTicks, sc.EveryTick = tt.latency, tt.stagger, tt.skew, tt.clockTicks, every
			node := chain.Node()
			if tt.seed != 0 {
				node = clustersim.LCGNodes(tt.seed, sc.Nodes)
			}
			r, err := clustersim.RunClient(sc, tt.at, node)
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = r
		}
		if runs[0] != runs[1] {
			t.Errorf("%s: skipping idle ticks gives %+v, ticking every node %+v", tt.name, runs[0], runs[1])
		}
		if runs[0].Rejected == 0 {
			t.Errorf("%s: nothing rejected; the budget was never tested", tt.name)
		}
	}
}
