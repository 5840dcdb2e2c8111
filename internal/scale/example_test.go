package scale_test

import (
	"fmt"
	"log"
	"time"

	"github.com/limiterd/limiterd/internal/scale"
)

// A small run: 100 keys at 50 checks/s on 2 and 3 nodes, one second of
// warm-up and one measured; the traffic and the accuracy are
// deterministic.
func Example() {
	cfg := scale.DefaultConfig()
	cfg.Nodes, cfg.Keys, cfg.Rate, cfg.Seconds, cfg.Warmup, cfg.Cost = []int{2, 3}, 100, 50, 1, time.Second, false
	rows, err := scale.Run(cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		t := r.Traffic
		fmt.Printf("%d nodes: %d checks, %d delta and %d heartbeat messages, node 0 merged %d entries; burst %d, 9x client %d in a window\n",
			r.N, t.Checks, t.DeltaMsgs, t.AEMsgs, r.Merged, r.Burst.MaxInWindow, r.Hot.MaxInWindow)
	}
	// Output:
	// 2 nodes: 50 checks, 10 delta and 2 heartbeat messages, node 0 merged 25 entries; burst 624, 9x client 606 in a window
	// 3 nodes: 50 checks, 30 delta and 6 heartbeat messages, node 0 merged 33 entries; burst 627, 9x client 608 in a window
}
