//go:build !race

package burst

import "testing"

// TestBurstGolden is limitsim burst itself (runBurst prints exactly this
// plan through writeBurst), the tables behind docs/blind-interval.md,
// checked like the quick plan. It is built without the race detector only:
// that would slow its 40 million simulated requests about 40-fold and has
// nothing to find in them (each run is one goroutine and the parallel runs
// share nothing); TestBurstQuickGolden covers every table in both modes.
func TestBurstGolden(t *testing.T) {
	p := DefaultPlan()
	br, out := runPlan(t, p)
	checkBurst(t, p, br)
	checkGolden(t, "burst.golden", out)
}
