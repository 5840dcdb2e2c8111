package counter

import (
	"testing"
	"time"
)

// TestWorstCase checks the bound against the rows derived and reached in
// docs/blind-interval.md (the seed's cluster: 8 nodes, 600 per 60 s,
// 200 ms sync, grace 0.25, TailShare 0.3) and against short windows.
func TestWorstCase(t *testing.T) {
	for _, tc := range []struct {
		name   string
		single bool
		coord  bool
		budget bool
		floor  float64
		grace  float64
		nodes  int
		max    int64
		window time.Duration
		want   int64
	}{
		{name: "single node", single: true, max: 600, window: time.Minute, want: 660},
		{name: "floor 0.5", budget: true, floor: 0.5, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 632},
		{name: "floor 1", budget: true, floor: 1, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 640},
		{name: "floor 2", budget: true, floor: 2, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 656},
		{name: "floor 4", budget: true, floor: 4, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 696},
		{name: "floor 1 no grace", budget: true, floor: 1, nodes: 8, max: 600, window: time.Minute, want: 632},
		{name: "floor 0", budget: true, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 600 - 1 + 8 + 16},
		{name: "no budget", floor: 1, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 4816},
		{name: "one node in cluster mode", budget: true, floor: 1, grace: 0.25, nodes: 1, max: 600, window: time.Minute, want: 660},
		// 10 s window: f = ceil(600 x 250 / 10,000) = 15, 600 + 8 x 15 + 16.
		{name: "short window", budget: true, floor: 1, grace: 0.25, nodes: 8, max: 600, window: 10 * time.Second, want: 736},
		// 10 per second: f = 3, T = 0.
		{name: "small limit", budget: true, floor: 1, grace: 0.25, nodes: 8, max: 10, window: time.Second, want: 34},
		// Coordinated: L + N·b + Λ + N·T, T = floor(0.1 x 0.3 x L / N), the
		// pool P = floor(0.1 L) - N·T, Λ = floor(0.6 P), b = (P - Λ) / N.
		// 600: T = 2, P = 44, Λ = 20, b = 3: 600 + 16 + 20 + 24.
		{name: "coordinated", coord: true, budget: true, floor: 1, grace: 0.25, nodes: 8, max: 600, window: time.Minute, want: 660},
		{name: "coordinated short window", coord: true, budget: true, floor: 1, grace: 0.25, nodes: 8, max: 600, window: 10 * time.Second, want: 660},
		// 10: tolerance 1, T = 0, b = 0: every request at the margin is the coordinator's.
		{name: "coordinated small limit", coord: true, budget: true, floor: 1, grace: 0.25, nodes: 8, max: 10, window: time.Second, want: 10},
		// 6000: T = 22, P = 424, Λ = 254, b = 21: 6000 + 168 + 254 + 176.
		{name: "coordinated premium", coord: true, budget: true, floor: 1, grace: 0.25, nodes: 8, max: 6000, window: time.Minute, want: 6595},
		{name: "coordinated one node", coord: true, budget: true, floor: 1, grace: 0.25, nodes: 1, max: 600, window: time.Minute, want: 660},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := New(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if !tc.single {
				cc := DefaultClusterConfig("n1")
				cc.Nodes, cc.Budget, cc.BudgetFloor, cc.DeliveryGrace, cc.Coordinated = tc.nodes, tc.budget, tc.floor, tc.grace, tc.coord
				if err := c.SetCluster(cc); err != nil {
					t.Fatal(err)
				}
			}
			if got := c.WorstCase(tc.max, tc.window); got != tc.want {
				t.Errorf("WorstCase(%d, %v) = %d, want %d", tc.max, tc.window, got, tc.want)
			}
		})
	}
}
