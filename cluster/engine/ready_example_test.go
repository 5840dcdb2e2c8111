package engine_test

import (
	"fmt"
	"log"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
)

// A process that has just joined is ready to take checks once every live
// peer has spoken to it: here peer "a" has (its hello), "b" has not yet
// seen it up. cluster.Node.Ready, and so /readyz, answers with Ready.
func ExampleEngine_Ready() {
	newEngine := func(name string) *engine.Engine {
		c, err := counter.New(counter.DefaultConfig())
		if err != nil {
			log.Fatal(err)
		}
		if err := c.SetCluster(counter.DefaultClusterConfig(name)); err != nil {
			log.Fatal(err)
		}
		e, err := engine.New(c, engine.DefaultConfig(name))
		if err != nil {
			log.Fatal(err)
		}
		return e
	}
	n, a := newEngine("n"), newEngine("a")
	joined := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	for _, peer := range []string{"a", "b"} {
		if _, err := n.PeerUp(joined, peer); err != nil {
			log.Fatal(err)
		}
	}
	// a sees n up and greets it.
	out, err := a.PeerUp(joined, "n")
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range out {
		for _, m := range o.Msgs {
			if _, err := n.Receive(joined, m); err != nil {
				log.Fatal(err)
			}
		}
	}
	fmt.Println(n.Unheard(nil))
	fmt.Println(n.Ready(joined.Add(time.Second), joined))
	fmt.Println(n.Ready(joined.Add(5*time.Second), joined)) // CatchUpWait passed
	// Output:
	// [b]
	// engine: live peers not heard from yet: b, 1s after joining (at most 5s)
	// <nil>
}
