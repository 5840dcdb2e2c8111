package counter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

type limitParams struct {
	max int64
	w   time.Duration
	k   int
}

// peekTwin is two counters fed the same Allows: a is peeked at as well, b
// never is, so b is the copy of a's state that Peek must leave unchanged.
type peekTwin struct {
	a, b   *Counter
	la, lb []Limit
}

func newPeekTwin(t *testing.T, cfg Config, ls []limitParams) peekTwin {
	t.Helper()
	tw := peekTwin{a: newCounter(t, cfg), b: newCounter(t, cfg)}
	for i, p := range ls {
		name := fmt.Sprintf("l%d", i)
		tw.la = append(tw.la, mustLimit(t, tw.a, name, p.max, p.w, p.k))
		tw.lb = append(tw.lb, mustLimit(t, tw.b, name, p.max, p.w, p.k))
	}
	return tw
}

func minMax(ls []Limit) int64 {
	m := ls[0].max
	for _, l := range ls[1:] {
		m = min(m, l.max)
	}
	return m
}

// TestPeekAgreesWithAllow runs random histories and checks, before every
// Allow, that a Peek of the same hits at the same instant reports what the
// Allow decides (on the twin that was never peeked at), with the same
// counts and, for a denial, the same results in full; and that the Allows
// of the peeked counter, peeks interleaved at random keys, instants and
// hits, decide and report exactly what the twin's do.
func TestPeekAgreesWithAllow(t *testing.T) {
	cases := []struct {
		name   string
		tol    float64
		limits []limitParams
		gapMs  int64 // mean gap between checks
	}{
		{"10 per second", 0.1, []limitParams{{10, time.Second, 10}}, 60},
		{"exact log", 0.1, []limitParams{{7, time.Second, 4}}, 90},
		{"one slice", 0.1, []limitParams{{3, 500 * time.Millisecond, 1}}, 100},
		{"two limits", 0.1, []limitParams{{5, time.Second, 4}, {20, 10 * time.Second, 10}}, 150},
		{"wide tolerance", 0.5, []limitParams{{50, 3 * time.Second, 7}}, 40},
		{"600 per minute", 0.1, []limitParams{{600, time.Minute, 12}}, 60},
	}
	for _, tc := range cases {
		for seed := uint64(1); seed <= 4; seed++ {
			t.Run(fmt.Sprintf("%s/seed%d", tc.name, seed), func(t *testing.T) {
				cfg := DefaultConfig()
				cfg.Tolerance = tc.tol
				tw := newPeekTwin(t, cfg, tc.limits)
				rng := rand.New(rand.NewPCG(seed, 20260801))
				lim := minMax(tw.la)
				n := len(tw.la)
				var pres, ares, bres [MaxLimitsPerCall]Result
				var allowed, denied int
				ms := int64(0)
				for step := range 3000 {
					ms += rng.Int64N(2 * tc.gapMs)
					now := ms
					if rng.IntN(10) == 0 {
						now -= rng.Int64N(50) // late: before the key's newest slice
					}
					key := fmt.Sprintf("k%d", rng.IntN(3))
					hits := int64(1)
					if rng.IntN(4) == 0 {
						hits = 1 + rng.Int64N(lim)
					}
					pd, err := tw.a.Peek(at(now), key, hits, tw.la, pres[:])
					if err != nil {
						t.Fatal(err)
					}
					// Peeks that must change nothing: another key, an
					// untracked one, another instant, 0 hits.
					for range rng.IntN(3) {
						other := fmt.Sprintf("k%d", rng.IntN(4))
						if _, err := tw.a.Peek(at(now+rng.Int64N(3000)-1000), other, rng.Int64N(lim+1), tw.la, ares[:]); err != nil {
							t.Fatal(err)
						}
					}
					bd, err := tw.b.Allow(at(now), key, hits, tw.lb, bres[:])
					if err != nil {
						t.Fatal(err)
					}
					ad, err := tw.a.Allow(at(now), key, hits, tw.la, ares[:])
					if err != nil {
						t.Fatal(err)
					}
					if ad != bd || ares != bres {
						t.Fatalf("step %d at %dms: after peeks Allow = %+v %+v, without peeks %+v %+v", step, now, ad, ares[:n], bd, bres[:n])
					}
					if pd.Allowed != bd.Allowed || pd.Coordinate || pd.Untracked {
						t.Fatalf("step %d at %dms, %s x%d: Peek = %+v, Allow = %+v", step, now, key, hits, pd, bd)
					}
					for i := range n {
						p, b := pres[i], bres[i]
						if p.Count != b.Count || p.Allowed != b.Allowed || p.Limit != b.Limit {
							t.Fatalf("step %d limit %d: Peek %+v, Allow %+v", step, i, p, b)
						}
						if !bd.Allowed && p != b {
							t.Fatalf("step %d limit %d, denied: Peek %+v, Allow %+v", step, i, p, b)
						}
						if bd.Allowed && (p.Remaining != p.Limit-p.Count || p.RetryAfter != 0) {
							t.Fatalf("step %d limit %d, allowed: Peek %+v: want Remaining %d and no RetryAfter", step, i, p, p.Limit-p.Count)
						}
					}
					if !bd.Allowed && pd.RetryAfter != bd.RetryAfter {
						t.Fatalf("step %d: Peek RetryAfter %v, Allow %v", step, pd.RetryAfter, bd.RetryAfter)
					}
					if bd.Allowed {
						allowed++
					} else {
						denied++
					}
				}
				if ka, kb := tw.a.Stats().Keys, tw.b.Stats().Keys; ka != kb {
					t.Errorf("peeked counter tracks %d pairs, the twin %d", ka, kb)
				}
				// Both outcomes must occur, or the comparison proved little.
				if allowed == 0 || denied == 0 {
					t.Errorf("history had %d allowed and %d denied checks; want both", allowed, denied)
				}
			})
		}
	}
}

// TestPeekSteps steps one key through fixed instants with peeks and checks
// every field of the peek, including 0 hits.
func TestPeekSteps(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "x", 3, 10*time.Second, 10)
	lims := []Limit{l}
	var res [1]Result
	allow := func(ms, hits int64) {
		t.Helper()
		if d, err := c.Allow(at(ms), "k", hits, lims, res[:]); err != nil || !d.Allowed {
			t.Fatalf("Allow at %dms: %+v, %v", ms, d, err)
		}
	}
	tests := []struct {
		name  string
		setup func()
		ms    int64
		hits  int64
		want  Result
	}{
		{"untracked key: nothing counted, all remaining", func() {}, 0, 1,
			Result{Allowed: true, Limit: 3, Remaining: 3}},
		{"untracked key, 0 hits", func() {}, 0, 0,
			Result{Allowed: true, Limit: 3, Remaining: 3}},
		{"room left", func() { allow(0, 1); allow(1000, 1) }, 2000, 1,
			Result{Allowed: true, Limit: 3, Count: 2, Remaining: 1, Reset: 9 * time.Second}},
		{"too many hits for the room", func() {}, 2000, 2,
			Result{Allowed: false, Limit: 3, Count: 2, Remaining: 1, RetryAfter: 8 * time.Second, Reset: 9 * time.Second}},
		{"full, 1 hit", func() { allow(2500, 1) }, 3000, 1,
			Result{Allowed: false, Limit: 3, Count: 3, Remaining: 0, RetryAfter: 7 * time.Second, Reset: 9500 * time.Millisecond}},
		{"full, 0 hits: at the limit is not over it", func() {}, 3000, 0,
			Result{Allowed: true, Limit: 3, Count: 3, Remaining: 0, Reset: 9500 * time.Millisecond}},
		{"oldest slice left the window", func() {}, 10_000, 1,
			Result{Allowed: true, Limit: 3, Count: 2, Remaining: 1, Reset: 2500 * time.Millisecond}},
		{"every slice left the window", func() {}, 60_000, 3,
			Result{Allowed: true, Limit: 3, Remaining: 3}},
	}
	for _, tt := range tests {
		tt.setup()
		d, err := c.Peek(at(tt.ms), "k", tt.hits, lims, res[:])
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if res[0] != tt.want || d.Allowed != tt.want.Allowed || d.RetryAfter != tt.want.RetryAfter {
			t.Errorf("%s: Peek = %+v %+v, want %+v", tt.name, d, res[0], tt.want)
		}
	}
	// The empty window at 60 s was not dropped by the peek: only an Allow
	// (or Sweep) drops it.
	if n := c.Stats().Keys; n != 1 {
		t.Errorf("after peeks at an empty window, %d keys tracked, want the 1 still stored", n)
	}
	if n := c.Sweep(at(60_000)); n != 1 {
		t.Errorf("Sweep dropped %d keys, want 1", n)
	}
}

func TestPeekErrors(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "x", 5, time.Second, 1)
	var res [MaxLimitsPerCall + 1]Result
	many := make([]Limit, MaxLimitsPerCall+1)
	for i := range many {
		many[i] = l
	}
	tests := []struct {
		name    string
		hits    int64
		limits  []Limit
		results []Result
		want    error
	}{
		{"negative hits", -1, []Limit{l}, res[:], ErrInvalidHits},
		{"hits over limit", 6, []Limit{l}, res[:], ErrInvalidHits},
		{"too many limits", 1, many, res[:], ErrTooManyLimits},
		{"results too short", 1, []Limit{l, l}, res[:1], nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := c.Peek(t0, "k", tt.hits, tt.limits, tt.results)
			if err == nil || tt.want != nil && !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
		})
	}
	for _, hits := range []int64{0, 5} {
		if _, err := c.Peek(t0, "k", hits, []Limit{l}, res[:]); err != nil {
			t.Errorf("Peek of %d hits: %v, want no error", hits, err)
		}
	}
	if n := c.Stats().Keys; n != 0 {
		t.Fatalf("peeks tracked %d keys", n)
	}
}

// TestPeekInCluster checks that a peek in a coordinated cluster decides on
// the window as this node knows it (its own slices, its peer's merged ones,
// its pending grants and a remembered denial), never asks for coordination,
// and leaves the grants and the denial in place.
func TestPeekInCluster(t *testing.T) {
	mk := func(self string) (*Counter, Limit) {
		c := newCounter(t, DefaultConfig())
		cc := DefaultClusterConfig(self)
		cc.Nodes = 2
		if err := c.SetCluster(cc); err != nil {
			t.Fatal(err)
		}
		return c, mustLimit(t, c, "r", 10, 10*time.Second, 10)
	}
	a, la := mk("a")
	b, lb := mk("b")
	var res [1]Result
	grant := func(c *Counter, l Limit, ms int64, n int) {
		t.Helper()
		for range n {
			if _, err := c.Grant(at(ms), "k", 1, []Limit{l}, res[:]); err != nil {
				t.Fatal(err)
			}
		}
	}
	peek := func(ms, hits int64) (Decision, Result) {
		t.Helper()
		d, err := a.Peek(at(ms), "k", hits, []Limit{la}, res[:])
		if err != nil {
			t.Fatal(err)
		}
		return d, res[0]
	}
	grant(b, lb, 0, 6)
	grant(a, la, 100, 2)
	a.Merge(at(200), b.AppendChanges(nil, at(200)))

	// 8 in the window: Allow must ask the coordinator (10 per 10 s on two
	// nodes has no blind share); Peek decides here.
	if d, err := a.Allow(at(300), "k", 1, []Limit{la}, res[:]); err != nil || !d.Coordinate {
		t.Fatalf("Allow = %+v, %v; want Decision.Coordinate", d, err)
	}
	if d, r := peek(300, 2); !d.Allowed || d.Coordinate || r.Count != 8 || r.Remaining != 2 {
		t.Errorf("Peek of 2 with 8 counted = %+v %+v, want allowed, count 8, 2 remaining", d, r)
	}
	if d, r := peek(300, 3); d.Allowed || d.Coordinate || r.RetryAfter != 9700*time.Millisecond {
		t.Errorf("Peek of 3 with 8 counted = %+v %+v, want denied for 9.7s, until b's slice at 0 leaves", d, r)
	}

	// a coordinates the key and grants b one hit that it has not merged.
	var ask Ask
	b.PrepareAsk(at(400), "k", 1, []Limit{lb}, &ask)
	if d, err := a.Coordinate(at(400), "b", 1, &ask, res[:]); err != nil || !d.Allowed {
		t.Fatalf("Coordinate = %+v, %v", d, err)
	}
	for range 2 {
		if d, r := peek(500, 2); d.Allowed || r.Count != 9 || r.Pending != 1 {
			t.Errorf("Peek of 2 with a pending grant = %+v %+v, want denied, count 9 of which 1 pending", d, r)
		}
	}

	// A remembered denial of one hit denies a peek of one until it ends;
	// a peek of 0 hits asks only whether the window is over its limit.
	a.RememberDenial(at(1000), "k", 1, []Limit{la}, []Result{{Limit: 10, Count: 10, RetryAfter: 2 * time.Second}})
	if d, r := peek(1500, 1); d.Allowed || r.RetryAfter != 1500*time.Millisecond || r.Remaining != 0 {
		t.Errorf("Peek of 1 under a remembered denial = %+v %+v, want denied for 1.5s", d, r)
	}
	if d, _ := peek(1500, 0); !d.Allowed {
		t.Errorf("Peek of 0 under a remembered denial = %+v, want allowed (the window is not over its limit)", d)
	}
	if d, _ := peek(1600, 1); d.Allowed {
		t.Errorf("second Peek under a remembered denial = %+v: the first dropped it", d)
	}
	if d, _ := peek(3000, 1); !d.Allowed {
		t.Errorf("Peek after the denial ended = %+v, want allowed", d)
	}
}
