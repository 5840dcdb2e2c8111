//go:build !race

package burst

import (
	"testing"

	"github.com/limiterd/limiterd/internal/seedstudy"
)

// TestIdleTicksChangeNothing at full size (see checkIdleTicksChangeNothing),
// built without the race detector, which slows the single-goroutine
// simulations about 40-fold; TestIdleTicksChangeNothingShort runs in both
// modes.
func TestIdleTicksChangeNothing(t *testing.T) {
	checkIdleTicksChangeNothing(t, idleTicksCases(2*seedstudy.WindowMs))
}
