//go:build !race

package scale

import "testing"

// TestScaleAccuracyUnaffectedByLoad: the accuracy clients as limitsim
// scale runs them, three windows (see checkAccuracyUnaffectedByLoad).
// Built without the race detector, which slows the simulation about
// 40-fold; the Short version runs in both modes.
func TestScaleAccuracyUnaffectedByLoad(t *testing.T) {
	checkAccuracyUnaffectedByLoad(t, AccuracyMs)
}
