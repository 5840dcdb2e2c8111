package cluster_test

import (
	"context"
	"fmt"
	"log"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
)

// A node alone on a free port: the counter goes into cluster mode under
// the node's name first, then the node is built, run, and asked for its
// view of the cluster. A second node would list this one's Addr in Join.
func Example() {
	ctr, err := counter.New(counter.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	cfg := cluster.DefaultConfig()
	cfg.NodeName = "edge-1"
	cfg.BindAddr = "127.0.0.1:0"
	if err := ctr.SetCluster(counter.DefaultClusterConfig(cfg.NodeName)); err != nil {
		log.Fatal(err)
	}
	node, err := cluster.New(cfg, ctr, prometheus.NewRegistry(), nil)
	if err != nil {
		log.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- node.Run(ctx) }()

	st := node.Status()
	fmt.Println("ready:", node.Ready() == nil)
	fmt.Println("self:", st.Self, "nodes:", st.Nodes)
	for _, m := range st.Members {
		fmt.Println("member:", m.Name, m.State)
	}

	cancel() // sends the last changes, leaves, shuts down

	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// ready: true
	// self: edge-1 nodes: 1
	// member: edge-1 alive
}
