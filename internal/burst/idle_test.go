package burst

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// idleTicksCase is one run of checkIdleTicksChangeNothing.
type idleTicksCase struct {
	name                   string
	latency, stagger, skew time.Duration
	at                     []int64
	seed                   uint32 // of the LCG that picks the nodes; 0: the pattern's own
	clockTicks             bool
}

// idleTicksCases are the runs of TestIdleTicksChangeNothing, with random
// bursts over burstyMs.
func idleTicksCases(burstyMs int64) []idleTicksCase {
	rng := rand.New(rand.NewPCG(20260730, 9))
	bursty := RandomBursty(rng, burstyMs)
	return []idleTicksCase{
		{"latency chain", time.Millisecond, 0, 0, TailsThen(Floor1().Sim(), LatencyChain()).At, 0, false},
		{"bursty, latency 3ms", 3 * time.Millisecond, 0, 0, bursty, 3, false},
		{"bursty, latency 60ms", 60 * time.Millisecond, 0, 0, bursty, 4, false},
		{"bursty, staggered", time.Millisecond, 200 * time.Millisecond, 0, bursty, 5, false},
		{"bursty, skewed", 0, 0, 50 * time.Millisecond, bursty, 6, false},
		{"steady 90/s", 2 * time.Millisecond, 0, 0, clustersim.SteadyAt(90, seedstudy.WindowMs), 7, false},
		{"bursty, skewed, ticks on each clock", time.Millisecond, 0, 70 * time.Millisecond, bursty, 8, true},
	}
}

// TestIdleTicksChangeNothingShort is TestIdleTicksChangeNothing
// (idle_full_test.go) with bursts over 20 s instead of two windows and
// without its steady client, which the race detector runs too.
func TestIdleTicksChangeNothingShort(t *testing.T) {
	cases := idleTicksCases(20_000)
	checkIdleTicksChangeNothing(t, append(cases[:5:5], cases[6]))
}

// checkIdleTicksChangeNothing: the simulator skips the ticks of nodes that
// counted nothing since their last one, where limiterd ticks every node at
// every interval. The budget depends on ticks (a tick starts a sync
// interval and the delivery grace), so this checks that the shortcut
// changes no decision and no message, with latency, tick phases and skew.
func checkIdleTicksChangeNothing(t *testing.T, tests []idleTicksCase) {
	t.Helper()
	base := Floor1().Sim()
	chain := TailsThen(base, LatencyChain())
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
