package counter_test

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// BoundOf tells, without a Counter, what a cluster may admit of one key
// in a window: with the coordinator answering, and when every node falls
// back on its budget.
func ExampleBoundOf() {
	cc := counter.DefaultClusterConfig("")
	cc.Nodes = 8
	for _, w := range []time.Duration{time.Minute, 10 * time.Second} {
		b := counter.BoundOf(counter.DefaultConfig().Tolerance, cc, 600, w)
		fmt.Printf("600 per %v on 8 nodes: promised %d; worst case %d (tail %d, blind share %d a node, leases %d); budget alone %d (floor %d)\n",
			w, b.Promised, b.WorstCase, b.Tail, b.Blind, b.Leases, b.Fallback, b.Floor)
	}
	// Output:
	// 600 per 1m0s on 8 nodes: promised 660; worst case 660 (tail 2, blind share 3 a node, leases 20); budget alone 640 (floor 3)
	// 600 per 10s on 8 nodes: promised 660; worst case 660 (tail 2, blind share 3 a node, leases 20); budget alone 736 (floor 15)
}
