//go:build !race

package main

import "testing"

// TestDupChangesNoDecision on 80 s of bursts (see checkDupChangesNoDecision),
// built without the race detector, which slows the simulated cluster about
// 40-fold; the Short version runs in both modes.
func TestDupChangesNoDecision(t *testing.T) {
	checkDupChangesNoDecision(t, 80_000)
}
