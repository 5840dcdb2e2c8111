//go:build !race

package burst

import (
	"testing"

	"github.com/limiterd/limiterd/counter"
)

// The property tests at full size, built without the race detector: it
// slows the single-goroutine simulations about 40-fold and has nothing to
// find in them; their Short versions (coord_test.go) run in both modes.

// TestCoordinatedPropertyAgainstOracle: every limit, every latency (see
// checkPropertyAgainstOracle).
func TestCoordinatedPropertyAgainstOracle(t *testing.T) {
	checkPropertyAgainstOracle(t, coordLimits(), coordLatencies(), counter.RouteAuto)
}

// TestRoutedPropertyAgainstOracle is TestCoordinatedPropertyAgainstOracle
// with every key's changes sent to its coordinator alone
// (counter.RouteAlways): no node knows its peers' counts, and the bounds
// hold all the same.
func TestRoutedPropertyAgainstOracle(t *testing.T) {
	checkPropertyAgainstOracle(t, coordLimits(), coordLatencies(), counter.RouteAlways)
}

// TestCoordinatedLossyNetwork: every limit (see checkLossyNetwork).
func TestCoordinatedLossyNetwork(t *testing.T) {
	checkLossyNetwork(t, coordLimits(), counter.RouteAuto)
}
