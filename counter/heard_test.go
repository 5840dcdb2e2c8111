package counter

import (
	"fmt"
	"testing"
	"time"
)

// TestFallbackHearsTheOthersOfARoutedKey: of a routed key a node counts
// only its own admissions, so the budget, deciding a check no answer came
// for, judges it against what the coordinator's last answer said the
// others had admitted, for a slice length; of a broadcast key the merged
// slices are the others' count, and nothing is heard.
func TestFallbackHearsTheOthersOfARoutedKey(t *testing.T) {
	const limit, sliceMs = 100, 1000
	cases := []struct {
		name    string
		routing Routing
		filled  int64 // what the coordinator admitted itself before the ask
		granted bool  // the answer: a grant, or a denial
		// the fallback's verdicts at 20 ms and after the heard count
		// expired (a slice length after the answer)
		wantNow, wantLater bool
	}{
		{"routed, granted to the last room", RouteAlways, limit - 1, true, false, true},
		{"routed, denied", RouteAlways, limit, false, false, true},
		{"routed, room left", RouteAlways, limit - 10, true, true, true},
		{"broadcast, denied: nothing heard", RouteNever, limit, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*Counter, 2)
			lims := make([]Limit, 2)
			for i := range nodes {
				c := newCounter(t, DefaultConfig())
				cc := DefaultClusterConfig(fmt.Sprintf("n%d", i))
				cc.Nodes, cc.Routing, cc.LeaseShare = 3, tc.routing, 0
				if err := c.SetCluster(cc); err != nil {
					t.Fatal(err)
				}
				nodes[i], lims[i] = c, mustLimit(t, c, "r", limit, 10*time.Second, 10)
			}
			asker, coord := nodes[0], nodes[1]
			const key = "k"
			var res [1]Result
			// The coordinator's own admissions, decided by itself.
			var ask Ask
			coord.PrepareAsk(at(0), key, tc.filled, lims[1:], &ask)
			if d, err := coord.Coordinate(at(0), "n1", 1, &ask, res[:]); err != nil || !d.Allowed {
				t.Fatalf("the coordinator's own %d: %+v, %v", tc.filled, d, err)
			}
			// The asker's check goes to the coordinator, and the answer comes.
			asker.PrepareAsk(at(10), key, 1, lims[:1], &ask)
			d, err := coord.Coordinate(at(10), "n0", 2, &ask, res[:])
			if err != nil || d.Allowed != tc.granted {
				t.Fatalf("the ask: %+v, %v; want allowed %v", d, err, tc.granted)
			}
			if d.Allowed {
				if _, err := asker.Grant(at(10), key, 1, lims[:1], res[:]); err != nil {
					t.Fatal(err)
				}
			} else {
				asker.RememberDenial(at(10), key, 1, lims[:1], res[:])
			}
			// The next check's answer is lost: the budget decides.
			for _, step := range []struct {
				ms   int64
				want bool
			}{{20, tc.wantNow}, {10 + sliceMs + 1, tc.wantLater}} {
				fd, err := asker.AllowFallback(at(step.ms), key, 1, lims[:1], res[:])
				if err != nil {
					t.Fatal(err)
				}
				if fd.Allowed != step.want {
					t.Errorf("fallback at %d ms: allowed %v, want %v (%+v)", step.ms, fd.Allowed, step.want, res[0])
				}
			}
		})
	}
}

// TestGrantOnOneNode: Grant on a counter that is not in a cluster counts
// the hits and ignores a lease or counts in the results (nothing is held
// or heard), rather than reading cluster settings it does not have.
func TestGrantOnOneNode(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	lim := mustLimit(t, c, "r", 10, time.Second, 10)
	res := []Result{{Allowed: true, Limit: 10, Count: 5, Lease: 3, LeaseGen: 1}}
	d, err := c.Grant(at(0), "k", 1, []Limit{lim}, res)
	if err != nil || !d.Allowed || res[0].Count != 0 || res[0].Remaining != 9 {
		t.Fatalf("Grant on one node: %+v %v, results %+v; want the hit counted", d, err, res[0])
	}
}
