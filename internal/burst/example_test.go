package burst_test

import (
	"fmt"

	"github.com/limiterd/limiterd/internal/burst"
)

// The bound on what the seed's cluster admits of one key in any window,
// for any client rate, per setting.
func ExampleClusterBound() {
	for _, s := range burst.VariedSettings() {
		fmt.Printf("%s: %d\n", s.Name, burst.ClusterBound(s.Sim()))
	}
	// Output:
	// no budget: 4816
	// floor 1: 640
	// coordinated: 660
}
