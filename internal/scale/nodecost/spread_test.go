package nodecost

import (
	"testing"
)

// TestPickerSpreadsEvenly: round robin gives every node the same share
// and random about the same; a silent node gets none, its share going to
// the others, and the random draw is the seed's.
func TestPickerSpreadsEvenly(t *testing.T) {
	const n, checks = 8, 80_000
	tests := []struct {
		spread Spread
		cut    int
		slack  float64 // how far a node's share may be from even
	}{
		{RoundRobin, -1, 0},
		{RoundRobin, 3, 0.001},
		{Random, -1, 0.05},
		{Random, 3, 0.05},
	}
	for _, tc := range tests {
		p := newPicker(tc.spread, n, 1)
		var got [n]int
		for i := range int64(checks) {
			got[p.node(i, tc.cut)]++
		}
		others := n
		if tc.cut >= 0 {
			others--
			if got[tc.cut] != 0 {
				t.Errorf("%s, node %d silent: it got %d checks", tc.spread, tc.cut, got[tc.cut])
			}
		}
		even := float64(checks) / float64(others)
		for node, c := range got {
			if node == tc.cut {
				continue
			}
			if d := float64(c)/even - 1; d > tc.slack || d < -tc.slack {
				t.Errorf("%s, cut %d: node %d got %d checks, even is %.0f", tc.spread, tc.cut, node, c, even)
			}
		}
	}
	// The random draw is the seed's, and another seed's differs.
	a, b, c := newPicker(Random, n, 1), newPicker(Random, n, 1), newPicker(Random, n, 2)
	differ := false
	for i := range int64(100) {
		x := a.node(i, -1)
		if y := b.node(i, -1); x != y {
			t.Fatalf("check %d: node %d, then %d with the same seed", i, x, y)
		}
		differ = differ || x != c.node(i, -1)
	}
	if !differ {
		t.Error("seeds 1 and 2 drew the same 100 nodes")
	}
}

// TestRandomSpreadRuns: a run spread at random is deterministic, differs
// from the round robin's, and keeps both halves of the promise.
func TestRandomSpreadRuns(t *testing.T) {
	cfg := quick(4)
	run := func(s Spread) Row {
		t.Helper()
		c := cfg
		c.Spread = s
		rows, err := Run(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := rows[0]
		if r.Spread != s {
			t.Errorf("row says spread %q, ran %q", r.Spread, s)
		}
		if r.WorstRatio > r.BoundRatio || r.FalseRejections != 0 {
			t.Errorf("%s: worst %.3f past its bound %.3f, or %d false rejections", s, r.WorstRatio, r.BoundRatio, r.FalseRejections)
		}
		return r
	}
	rr, random, again := run(RoundRobin), run(Random), run(Random)
	if d := sameRun(random, again); d != "" {
		t.Errorf("two random runs differ: %s", d)
	}
	if rr.Rejections == random.Rejections && rr.NetworkWaitShare == random.NetworkWaitShare {
		t.Errorf("random spread measured as round robin did (%d rejections, waited %.4f): the spread did not reach the run", rr.Rejections, rr.NetworkWaitShare)
	}
	t.Logf("waited: %.4f round robin, %.4f random", rr.NetworkWaitShare, random.NetworkWaitShare)
}
