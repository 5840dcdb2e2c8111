//go:build !race

package burst

import "testing"

// The property tests at full size, built without the race detector: it
// slows the single-goroutine simulations about 40-fold and has nothing to
// find in them; their Short versions (coord_test.go) run in both modes.

// TestCoordinatedPropertyAgainstOracle: every limit, every latency (see
// checkPropertyAgainstOracle).
func TestCoordinatedPropertyAgainstOracle(t *testing.T) {
	checkPropertyAgainstOracle(t, coordLimits(), coordLatencies())
}

// TestCoordinatedLossyNetwork: every limit (see checkLossyNetwork).
func TestCoordinatedLossyNetwork(t *testing.T) {
	checkLossyNetwork(t, coordLimits())
}
