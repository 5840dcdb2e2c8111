package clustersim

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestRestartsKeepTheBound is fault scenario 3 of e2e/faults on the
// simulated network: 8 nodes and the lab's load (hotKeysMinute), nodes 1
// to 5 in turn stopped every 10 s and started again as new processes,
// routed and with every change broadcast.
//
//   - Left (SIGTERM): the node leaves, its peers take it down at once and
//     its keys move to their next nodes, then back when it is restarted
//     500 ms later. Every key stays within NFR1, 1.1 × its limit: the
//     nodes send their slices of the moved keys to the new coordinator at
//     once (engine.Moved). Sent at the next tick instead, routed keys
//     reached 1.12 and 1.20 × over these seeds: the new coordinator
//     granted for up to an interval on the part of the counts it held.
//   - Killed (SIGKILL): the node is silent for 1.5 s, its peers fail it
//     over on their missed asks, and the checks at the margin of its keys
//     meanwhile are the budget's: every key stays within the budget's
//     bound (BoundOf's Fallback).
func TestRestartsKeepTheBound(t *testing.T) {
	for _, routing := range []counter.Routing{counter.RouteAlways, counter.RouteNever} {
		for _, leave := range []bool{true, false} {
			for seed := uint64(1); seed <= 4; seed++ {
				name := fmt.Sprintf("%v %s seed %d", routing, map[bool]string{true: "left", false: "killed"}[leave], seed)
				t.Run(name, func(t *testing.T) { checkRestarts(t, routing, leave, seed) })
			}
		}
	}
}

func checkRestarts(t *testing.T, routing counter.Routing, leave bool, seed uint64) {
	sc := Config{Nodes: 8, Limit: 50, Window: 10 * time.Second, Slices: 10, Sync: 200 * time.Millisecond, Floor: 1, Grace: 0.25,
		Budget: true, Latency: time.Millisecond, NetSeed: seed, Routing: routing}
	s, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(0); err != nil {
		t.Fatal(err)
	}
	down, bound := int64(1500), sc.Bound().Fallback
	if leave {
		down, bound = 500, sc.Limit+sc.Limit/10
	}
	restarts, node := 0, 0
	event := func(ms int64) error {
		switch {
		case ms > 0 && ms%10_000 == 0:
			node = 1 + restarts%7
			if leave {
				return s.Leave(ms, node)
			}
			return s.Stop(ms, node)
		case ms > down && (ms-down)%10_000 == 0:
			restarts++
			return s.Restart(ms, node)
		}
		return nil
	}
	worst, st := hotKeysMinuteWith(t, s, seed, event)
	t.Logf("worst window %d of %d (%.2f ×), bound %d; %d restarts, %d checks fell back", worst, sc.Limit, float64(worst)/float64(sc.Limit), bound, restarts, st.Fallback)
	if restarts != 5 {
		t.Fatalf("%d restarts, want 5", restarts)
	}
	if !leave && st.Fallback == 0 {
		t.Fatal("nothing fell back: the killed nodes' silence does not show")
	}
	if int64(worst) > bound {
		t.Errorf("worst window %d, above the bound %d", worst, bound)
	}
}
