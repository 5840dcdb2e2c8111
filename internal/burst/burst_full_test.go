//go:build !race

package burst

import (
	"testing"

	"github.com/limiterd/limiterd/internal/seedstudy"
)

// The plans at full size, built without the race detector: it slows the
// simulation about 40-fold and has nothing to find there (each run is one
// goroutine, and the parallel runs share nothing). TestBurstShort and
// TestBurstDeterministicShort cover every table in both modes.

// TestBurstGolden is limitsim burst itself (the command prints exactly
// this plan through Write), the tables behind docs/blind-interval.md,
// checked like the quick plan.
func TestBurstGolden(t *testing.T) {
	p := DefaultPlan()
	br, out := runPlan(t, p)
	checkBurst(t, p, br)
	checkGolden(t, "burst.golden", out)
}

// TestBurstQuickGolden checks the quick plan, two windows of every table.
func TestBurstQuickGolden(t *testing.T) {
	p := quickBurstPlan()
	br, out := runPlan(t, p)
	checkBurst(t, p, br)
	checkGolden(t, "burst_quick.golden", out)
	checkLatencyChainHole(t, p, br)
}

// TestBurstDeterministic runs a cut-down quick plan over one window twice.
func TestBurstDeterministic(t *testing.T) {
	checkDeterministic(t, deterministicPlan(quickBurstPlan(), seedstudy.WindowMs))
}
