//go:build !race

package seedplot

import "testing"

// TestPlots checks the quick plan's charts, with two charts byte for byte:
// a window chart and the sync-interval chart (the full client-rate chart
// is pinned by cmd/limitsim's TestDocsImages). Built without the race
// detector, which slows the cluster charts about 40-fold;
// TestPlotsShort runs in both modes.
func TestPlots(t *testing.T) {
	checkPlots(t, quickPlotPlan(), []string{"window-slice-end.svg", "cluster-sync-interval.svg"})
}
