package nodecost_test

import (
	"fmt"
	"log"
	"time"

	"github.com/limiterd/limiterd/internal/scale/nodecost"
)

// A small run: 3 nodes, 1,000 checks/s each over 30 keys for 2 s of model
// time, healthy: the hottest keys reach their limit. Everything printed
// is deterministic.
func Example() {
	cfg := nodecost.DefaultConfig()
	cfg.Nodes, cfg.Scenarios = []int{3}, []nodecost.Scenario{nodecost.Healthy}
	cfg.RatePerNode, cfg.KeysPerNode, cfg.Duration = 1000, 10, 2*time.Second
	rows, err := nodecost.Run(cfg, nil)
	if err != nil {
		log.Fatal(err)
	}
	for _, r := range rows {
		fmt.Printf("%d nodes, %s: %d checks over %d keys (%d judged), %d rejected, worst ratio %.3f (bound %.3f), %d false rejections\n",
			r.Nodes, r.Scenario, r.Checks, r.Keys, r.JudgedKeys, r.Rejections, r.WorstRatio, r.BoundRatio, r.FalseRejections)
	}
	// Output:
	// 3 nodes, healthy: 6000 checks over 30 keys (30 judged), 1621 rejected, worst ratio 1.032 (bound 1.097), 0 false rejections
}
