package clustersim

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestOneClockAheadKeepsTheBound is fault scenario 5 of e2e/faults on the
// simulated network: 8 nodes, one of them (node 0) with its clock 200 ms
// ahead, every node ticking on its own clock, for a minute of 16 keys
// checked at all nodes at about five times their limit, routed and in the
// full mesh. Node 0 sees the others' slices leave its window 200 ms early
// and, coordinating a quarter of the keys, granted into that room: 1.12–
// 1.22 × the limit over these seeds. Its askers tell it how far ahead it
// is (counter.Ask.Lead) and it judges its windows that much later
// (counter.SetClockLead): every key keeps NFR1's 1.1. With 50 ms of
// latency and one clock, no node takes a lead: a delay never looks like
// one.
func TestOneClockAheadKeepsTheBound(t *testing.T) {
	for _, tc := range []struct {
		name    string
		routing counter.Routing
		ahead   time.Duration
		latency time.Duration
	}{
		{"routed, 200ms ahead", counter.RouteAlways, 200 * time.Millisecond, time.Millisecond},
		{"mesh, 200ms ahead", counter.RouteNever, 200 * time.Millisecond, time.Millisecond},
		{"routed, one clock, 50ms latency", counter.RouteAlways, 0, 50 * time.Millisecond},
	} {
		for seed := uint64(1); seed <= 3; seed++ {
			t.Run(fmt.Sprint(tc.name, ", seed ", seed), func(t *testing.T) {
				sc := Config{Nodes: 8, Limit: 50, Window: 10 * time.Second, Slices: 10, Sync: 200 * time.Millisecond, Floor: 1, Grace: 0.25,
					Budget: true, Latency: tc.latency, NetSeed: seed, Routing: tc.routing, Ahead: tc.ahead, ClockTicks: true, Deadline: 150 * time.Millisecond}
				s, err := New(sc)
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Start(0); err != nil {
					t.Fatal(err)
				}
				worst, _ := hotKeysMinute(t, s, seed)
				bound := sc.Limit * 11 / 10
				t.Logf("worst window %d of %d (%.2f ×); node 0's clock lead %v", worst, sc.Limit, float64(worst)/float64(sc.Limit), s.Node(0).Counter().ClockLead())
				if int64(worst) > bound {
					t.Errorf("worst window %d, above 1.1 × the limit (%d)", worst, bound)
				}
				for i := range sc.Nodes {
					lead := s.Node(i).Counter().ClockLead()
					switch {
					case i == 0 && tc.ahead > 0 && (lead > tc.ahead || lead < tc.ahead*3/4):
						t.Errorf("node 0, %v ahead, took a clock lead of %v", tc.ahead, lead)
					case (i > 0 || tc.ahead == 0) && lead != 0:
						t.Errorf("node %d, on true time, took a clock lead of %v", i, lead)
					}
				}
			})
		}
	}
}
