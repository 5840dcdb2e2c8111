package clustersim_test

import (
	"fmt"
	"log"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/limiter"
)

// Three nodes, a limit of 4 per second, one client whose requests go to
// the nodes in turn: the key's coordinator decides past each node's blind
// share, so the cluster admits the limit exactly.
func Example() {
	cfg := clustersim.DefaultConfig()
	cfg.Nodes, cfg.Limit, cfg.Window, cfg.Slices, cfg.Sync = 3, 4, time.Second, 2, 100*time.Millisecond
	sim, err := clustersim.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	decided := map[limiter.Decider]string{
		limiter.DecidedHere: "here", limiter.DecidedByCoordinator: "by the coordinator",
		limiter.DecidedInFallback: "in fallback", limiter.DecidedOnLease: "on a lease",
	}
	var d limiter.Decision
	for i := range 6 {
		at := int64(10 * i)
		if err := sim.Check(at, "alice", i%3, 1, &d); err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%d ms on node %d: allowed %t, decided %s\n", at, i%3, d.Allowed, decided[d.Decided])
	}
	st, err := sim.Finish()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("by the coordinator %d, asks %d, fallbacks %d\n", st.Coordinator, st.Asks, st.Fallback)
	// Output:
	// 0 ms on node 0: allowed true, decided by the coordinator
	// 10 ms on node 1: allowed true, decided by the coordinator
	// 20 ms on node 2: allowed true, decided by the coordinator
	// 30 ms on node 0: allowed true, decided by the coordinator
	// 40 ms on node 1: allowed false, decided by the coordinator
	// 50 ms on node 2: allowed false, decided by the coordinator
	// by the coordinator 6, asks 4, fallbacks 0
}
