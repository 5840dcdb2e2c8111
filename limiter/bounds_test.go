package limiter

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

const boundsRules = `
rules:
  - name: default
    limit: 600
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s, slices: 12}
  - name: burst
    match: "burst:*"
    limit: 600
    window: 10s
    slices: 10
  - name: trial
    match: "trial:*"
    limit: 120
    window: 500ms
    shadow: true
`

func TestBounds(t *testing.T) {
	type want struct {
		rule, policy, text string
		shadow             bool
		limit              int64
		window             time.Duration
		slices             int
		worst              int64
	}
	tests := []struct {
		name  string
		nodes int // 0: single-node mode
		// budgetOnly turns the coordinator off: the bound of a node that
		// decides alone with the budget (its fallback).
		budgetOnly bool
		want       []want
	}{
		{"single node: L + floor(0.1 L)", 0, false, []want{
			{"default", "default", "600/60s", false, 600, time.Minute, 12, 660},
			{"api", "api/1s", "10/1s", false, 10, time.Second, 12, 11},
			{"api", "api/60s", "600/60s", false, 600, time.Minute, 12, 660},
			{"burst", "burst", "600/10s", false, 600, 10 * time.Second, 10, 660},
			{"trial", "trial", "120/500ms", true, 120, 500 * time.Millisecond, 12, 132},
		}},
		// Coordinated: L + N·b + Λ + N·T with T = floor(L × 0.03 / 8), the
		// pool P = floor(0.1 L) − 8 T, the leases Λ = floor(0.46 P) and
		// b = (P − Λ) / 8, whatever the window.
		{"8 nodes, coordinated", 8, false, []want{
			{"default", "default", "600/60s", false, 600, time.Minute, 12, 600 + 8*3 + 20 + 8*2},
			{"api", "api/1s", "10/1s", false, 10, time.Second, 12, 10},
			{"api", "api/60s", "600/60s", false, 600, time.Minute, 12, 660},
			{"burst", "burst", "600/10s", false, 600, 10 * time.Second, 10, 660},
			{"trial", "trial", "120/500ms", true, 120, 500 * time.Millisecond, 12, 120 + 8*0 + 5},
		}},
		// The budget alone: L + N·f + N·T with f = ceil(L × 250ms / W).
		{"8 nodes at 200ms, budget alone", 8, true, []want{
			{"default", "default", "600/60s", false, 600, time.Minute, 12, 600 + 8*3 + 8*2},
			{"api", "api/1s", "10/1s", false, 10, time.Second, 12, 10 + 8*3 + 0},
			{"api", "api/60s", "600/60s", false, 600, time.Minute, 12, 640},
			{"burst", "burst", "600/10s", false, 600, 10 * time.Second, 10, 600 + 8*15 + 8*2},
			{"trial", "trial", "120/500ms", true, 120, 500 * time.Millisecond, 12, 120 + 8*60 + 0},
		}},
		{"one node in cluster mode: as alone", 1, false, []want{
			{"default", "default", "600/60s", false, 600, time.Minute, 12, 660},
			{"api", "api/1s", "10/1s", false, 10, time.Second, 12, 11},
			{"api", "api/60s", "600/60s", false, 600, time.Minute, 12, 660},
			{"burst", "burst", "600/10s", false, 600, 10 * time.Second, 10, 660},
			{"trial", "trial", "120/500ms", true, 120, 500 * time.Millisecond, 12, 132},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCounter(t)
			if tt.nodes > 0 {
				cc := counter.DefaultClusterConfig("a")
				cc.Nodes, cc.Coordinated = tt.nodes, !tt.budgetOnly
				if err := c.SetCluster(cc); err != nil {
					t.Fatal(err)
				}
			}
			l, err := New(c, mustParse(t, boundsRules))
			if err != nil {
				t.Fatal(err)
			}
			got := l.Bounds()
			if len(got) != len(tt.want) {
				t.Fatalf("%d bounds, want %d: %+v", len(got), len(tt.want), got)
			}
			for i, w := range tt.want {
				g := got[i]
				if g.Rule != w.rule || g.Policy != w.policy || g.LimitText() != w.text || g.Shadow != w.shadow ||
					g.Limit != w.limit || g.Window != w.window || g.Slices != w.slices || g.WorstCase != w.worst {
					t.Errorf("bound %d: %+v (%s), want %+v", i, g, g.LimitText(), w)
				}
				if r := g.Ratio(); r != float64(w.worst)/float64(w.limit) {
					t.Errorf("bound %d: ratio %v, want %v", i, r, float64(w.worst)/float64(w.limit))
				}
			}
		})
	}
}

// TestBoundsFollowNodesAndRules checks that Bounds reads the counter's
// current node count and the rules in force at each call.
func TestBoundsFollowNodesAndRules(t *testing.T) {
	c := newCounter(t)
	if err := c.SetCluster(counter.DefaultClusterConfig("a")); err != nil {
		t.Fatal(err)
	}
	l, err := New(c, mustParse(t, "rules:\n  - name: default\n    limit: 10\n    window: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	worst := func() int64 {
		t.Helper()
		b := l.Bounds()
		if len(b) != 1 {
			t.Fatalf("bounds: %+v", b)
		}
		return b[0].WorstCase
	}
	if w := worst(); w != 11 {
		t.Fatalf("one node: %d, want 11", w)
	}
	if err := c.SetNodes(8); err != nil {
		t.Fatal(err)
	}
	if w := worst(); w != 10 {
		t.Fatalf("8 nodes: %d, want 10 (the coordinator keeps it)", w)
	}
	if err := l.SetRules(mustParse(t, "rules:\n  - name: default\n    limit: 600\n    window: 60s\n")); err != nil {
		t.Fatal(err)
	}
	if w := worst(); w != 660 {
		t.Fatalf("8 nodes after reload: %d, want 660", w)
	}
}
