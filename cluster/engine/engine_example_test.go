package engine_test

import (
	"fmt"
	"log"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
)

// Two engines joined by a loop that plays the network: events in (the
// time, a peer up, a message), messages out. Node does the same over
// memberlist, limitsim over a simulated network.
func ExampleEngine() {
	newNode := func(name string) (*counter.Counter, *engine.Engine, counter.Limit) {
		c, err := counter.New(counter.DefaultConfig())
		if err != nil {
			log.Fatal(err)
		}
		cc := counter.DefaultClusterConfig(name) // the sync interval (200ms) is the counter's
		cc.Coordinated = false                   // decide every check locally
		if err := c.SetCluster(cc); err != nil {
			log.Fatal(err)
		}
		lim, err := c.Limit("default", 600, time.Minute, 12)
		if err != nil {
			log.Fatal(err)
		}
		e, err := engine.New(c, engine.DefaultConfig(name))
		if err != nil {
			log.Fatal(err)
		}
		return c, e, lim
	}
	ca, a, lim := newNode("a")
	cb, b, limB := newNode("b")
	engines := map[string]*engine.Engine{"a": a, "b": b}
	// deliver carries messages, and whatever their receivers answer.
	var deliver func(now time.Time, out []engine.Outbound)
	deliver = func(now time.Time, out []engine.Outbound) {
		for _, o := range out {
			for _, m := range o.Msgs {
				rcv, err := engines[o.To].Receive(now, m)
				back := rcv.Out
				if err != nil {
					log.Fatal(err)
				}
				deliver(now, back)
			}
		}
	}

	now := time.Date(2026, 7, 28, 9, 0, 0, 0, time.UTC)
	for _, pair := range [][2]string{{"a", "b"}, {"b", "a"}} {
		out, err := engines[pair[0]].PeerUp(now, pair[1])
		if err != nil {
			log.Fatal(err)
		}
		for _, o := range out {
			fmt.Println(pair[0], "->", o.To+":", o.Purpose)
		}
		deliver(now, out)
	}

	var res [1]counter.Result
	for range 3 {
		if _, err := ca.Allow(now.Add(10*time.Millisecond), "client-42", 1, []counter.Limit{lim}, res[:]); err != nil {
			log.Fatal(err)
		}
	}
	tick := a.NextTick(now)
	out, err := a.Tick(tick)
	if err != nil {
		log.Fatal(err)
	}
	for _, o := range out {
		fmt.Println("tick at", tick.Format("15:04:05.000"), "a ->", o.To+":", o.Purpose, "spread:", o.Spread)
	}
	deliver(tick, out)

	// b now counts a's three requests: a denied request of the whole
	// limit reports the count without adding to it.
	if _, err := cb.Allow(tick, "client-42", 600, []counter.Limit{limB}, res[:]); err != nil {
		log.Fatal(err)
	}
	fmt.Println("b counts", res[0].Count, "for client-42; nodes:", b.Nodes())
	// Output:
	// a -> b: hello
	// b -> a: hello
	// tick at 09:00:00.200 a -> b: delta spread: true
	// b counts 3 for client-42; nodes: 2
}
