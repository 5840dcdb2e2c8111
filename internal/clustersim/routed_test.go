package clustersim

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestRoutedLossStaysWithinTheBudgetBound is fault scenario 2 of
// e2e/faults on the simulated network, routed: 8 nodes, every limit's
// changes sent to its keys' coordinators alone, 20 % of the messages lost
// and node 1's never reaching node 2, for a minute of 16 keys checked at
// all nodes at about five times their limit. Every key's busiest window
// stays within the budget's bound (BoundOf's Fallback), as it does with
// every change broadcast.
//
// Two rules hold it (docs/faults.md, "On routed sync"): a node asked
// about a routed key passes the ask on to the coordinator while it hears
// it, failed over or not (else the runner-up of a spurious failover, under
// loss, granted on the part of the counts it holds: up to 1.62 × the
// limit over these seeds), and the budget judges a routed check against
// the others' count the coordinator's last answer told (counter,
// heard.go).
func TestRoutedLossStaysWithinTheBudgetBound(t *testing.T) {
	for seed := uint64(1); seed <= 6; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			sc := Config{Nodes: 8, Limit: 50, Window: 10 * time.Second, Slices: 10, Sync: 200 * time.Millisecond, Floor: 1, Grace: 0.25,
				Budget: true, Latency: time.Millisecond, Loss: 0.2, NetSeed: seed, Routing: counter.RouteAlways}
			s, err := New(sc)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(0); err != nil {
				t.Fatal(err)
			}
			s.SetCut(func(from, to int) bool { return from == 1 && to == 2 })
			worst, st := hotKeysMinute(t, s, seed)
			bound := sc.Bound().Fallback
			t.Logf("worst window %d of %d (%.2f ×), bound %d; %d checks fell back", worst, sc.Limit, float64(worst)/float64(sc.Limit), bound, st.Fallback)
			if st.Fallback == 0 {
				t.Fatal("nothing fell back: the loss does not show")
			}
			if int64(worst) > bound {
				t.Errorf("worst window %d, above the budget's bound %d", worst, bound)
			}
		})
	}
}
