package counter

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	oracle2 "github.com/limiterd/limiterd/internal/oracle"
)

// resetNode is one counter in cluster mode for the reset tests: no
// coordinator and no budget, so every check is decided on the node's own
// view, and what a test hits is what it counts.
type resetNode struct {
	name string
	c    *Counter
	lim  Limit
}

func newResetNode(tb testing.TB, name string, nodes int, limit int64, window time.Duration) resetNode {
	tb.Helper()
	c := newCounter(tb, DefaultConfig())
	cc := DefaultClusterConfig(name)
	cc.Nodes, cc.Budget, cc.Coordinated = nodes, false, false
	if err := c.SetCluster(cc); err != nil {
		tb.Fatal(err)
	}
	return resetNode{name, c, mustLimit(tb, c, "r", limit, window, 10)}
}

func (n resetNode) hit(tb testing.TB, ms int64, key string, k int) {
	tb.Helper()
	var res [1]Result
	for range k {
		if d, err := n.c.Allow(at(ms), key, 1, []Limit{n.lim}, res[:]); err != nil || !d.Allowed {
			tb.Fatalf("%s: hit of %q at %d ms: %+v %v", n.name, key, ms, d, err)
		}
	}
}

// count is the key's count at ms, by Peek (which changes nothing).
func (n resetNode) count(tb testing.TB, ms int64, key string) int64 {
	tb.Helper()
	var res [1]Result
	if _, err := n.c.Peek(at(ms), key, 0, []Limit{n.lim}, res[:]); err != nil {
		tb.Fatal(err)
	}
	return res[0].Count
}

func (n resetNode) reset(tb testing.TB, ms int64, key string) Reset {
	tb.Helper()
	r, _, err := n.c.Reset(at(ms), key, []string{n.lim.ID()})
	if err != nil {
		tb.Fatal(err)
	}
	return r
}

func (n resetNode) apply(tb testing.TB, ms int64, r Reset) ResetStats {
	tb.Helper()
	st, err := n.c.ApplyReset(at(ms), r)
	if err != nil {
		tb.Fatal(err)
	}
	return st
}

// TestResetRefusesALateDelta: a peer's slice that started before the
// reset, arriving after it (a delta in flight, a duplicate, a catch-up),
// is refused; its slice started after the reset is merged.
func TestResetRefusesALateDelta(t *testing.T) {
	// 1,000 a minute: 6 s slices whose tails take 15 requests each.
	a, b := newResetNode(t, "a", 2, 1000, time.Minute), newResetNode(t, "b", 2, 1000, time.Minute)
	b.hit(t, 0, "k", 5)
	late := b.c.AppendChanges(nil, at(200)) // sent, not yet delivered
	a.hit(t, 100, "k", 3)
	a.Merge(t, 150, late)
	if got := a.count(t, 300, "k"); got != 8 {
		t.Fatalf("before the reset a counts %d, want 8", got)
	}
	r := a.reset(t, 1000, "k")
	if got := a.count(t, 1000, "k"); got != 0 {
		t.Fatalf("after the reset a counts %d, want 0", got)
	}
	for _, es := range [][]Entry{late, b.c.AppendState(nil, at(1100), "b", 0)} {
		if ms := a.c.Merge(at(1100), es); ms.Erased != 1 || ms.Merged != 0 {
			t.Errorf("a merged b's slice from before the reset: %+v", ms)
		}
	}
	if got := a.count(t, 1100, "k"); got != 0 {
		t.Fatalf("a late delta brought %d back", got)
	}
	// b has not applied the reset yet: its open slice, which started
	// before R, takes 2 more hits after R, and its deltas are still
	// refused (those 2 go with the slice when b applies the reset); once
	// b has, its new slice starts at or after R and is merged.
	b.hit(t, 1200, "k", 2)
	if ms := a.c.Merge(at(1300), b.c.AppendChanges(nil, at(1300))); ms.Erased != 1 {
		t.Errorf("b's grown slice from before the reset: %+v", ms)
	}
	if st := b.apply(t, 1400, r); st.Erased != 7 {
		t.Errorf("b erased %d, want its 7 from before the reset", st.Erased)
	}
	b.hit(t, 1500, "k", 4)
	if ms := a.c.Merge(at(1600), b.c.AppendChanges(nil, at(1600))); ms.Merged != 1 {
		t.Errorf("b's slice from after the reset: %+v, want merged", ms)
	}
	if got, want := []int64{a.count(t, 1700, "k"), b.count(t, 1700, "k")}, []int64{4, 4}; !slices.Equal(got, want) {
		t.Errorf("a and b count %v, want %v", got, want)
	}
}

// Merge is a resetNode's counter's Merge at ms.
func (n resetNode) Merge(tb testing.TB, ms int64, es []Entry) MergeStats {
	tb.Helper()
	return n.c.Merge(at(ms), es)
}

// TestResetTwice: a duplicated reset erases nothing counted after the
// first, and an older reset applied after a newer one changes nothing.
func TestResetTwice(t *testing.T) {
	for _, tc := range []struct {
		name   string
		second func(first Reset) Reset
	}{
		{"duplicate", func(r Reset) Reset { return r }},
		{"older after newer", func(r Reset) Reset { r.At -= 500; return r }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newResetNode(t, "a", 1, 100, 10*time.Second)
			a.hit(t, 0, "k", 5)
			r := a.reset(t, 1000, "k")
			a.hit(t, 1000, "k", 2)
			a.hit(t, 1100, "k", 3)
			if st := a.apply(t, 1200, tc.second(r)); st.Erased != 0 {
				t.Errorf("the second reset erased %d, want 0", st.Erased)
			}
			if got := a.count(t, 1300, "k"); got != 5 {
				t.Errorf("count %d after the second reset, want the 5 counted after the first", got)
			}
		})
	}
}

// TestResetOwnOpenSlice: the node's open slice goes with the reset, and
// the next hit opens a new one, which its next delta carries with a start
// at or after R.
func TestResetOwnOpenSlice(t *testing.T) {
	a, b := newResetNode(t, "a", 2, 100, 10*time.Second), newResetNode(t, "b", 2, 100, 10*time.Second)
	a.hit(t, 900, "k", 5) // the open slice, 5 requests
	b.Merge(t, 1000, a.c.AppendChanges(nil, at(1000)))
	r := a.reset(t, 1000, "k")
	b.apply(t, 1000, r)
	a.hit(t, 1050, "k", 1) // within a slice's length of the old start: it would have joined it
	es := a.c.AppendChanges(nil, at(1200))
	if len(es) != 1 || es[0].Start < r.At || es[0].Count != 1 {
		t.Fatalf("a's delta after the reset = %+v, want one slice of 1 starting at or after %d", es, r.At)
	}
	b.Merge(t, 1200, es)
	if got := b.count(t, 1300, "k"); got != 1 {
		t.Errorf("b counts %d, want 1", got)
	}
}

// TestResetClampsAClockBehind: a node whose clock is behind the reset's
// instant counts its requests at R, so that its peers, which refuse
// slices starting before R, count them too.
func TestResetClampsAClockBehind(t *testing.T) {
	a, b := newResetNode(t, "a", 2, 100, 10*time.Second), newResetNode(t, "b", 2, 100, 10*time.Second)
	r := a.reset(t, 1000, "k")
	b.apply(t, 700, r) // b's clock reads 300 ms less
	b.hit(t, 750, "k", 2)
	es := b.c.AppendChanges(nil, at(800))
	if len(es) != 1 || es[0].Start != r.At {
		t.Fatalf("b's delta = %+v, want its slice at R = %d", es, r.At)
	}
	if ms := a.Merge(t, 1100, es); ms.Merged != 1 {
		t.Errorf("a refused b's slice: %+v", ms)
	}
	if got := b.count(t, 800, "k"); got != 2 {
		t.Errorf("b counts %d, want 2", got)
	}
}

// TestResetLimits: a reset of some limits of a key leaves the others, a
// limit this node does not know is skipped and counted, and too many
// resets in force are refused whole until the oldest expire.
func TestResetLimits(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Shards = 1 // every key in one shard: the tombstone cap is reached
	c := newCounter(t, cfg)
	sec, minute := mustLimit(t, c, "api", 10, time.Second, 10), mustLimit(t, c, "api", 600, time.Minute, 12)
	var res [2]Result
	for range 3 {
		if d, err := c.Allow(at(0), "k", 1, []Limit{sec, minute}, res[:]); err != nil || !d.Allowed {
			t.Fatal(d, err)
		}
	}
	st, err := c.ApplyReset(at(100), Reset{Key: "k", Limits: []string{minute.ID(), "gone|1000|1"}, At: at(100).UnixMilli()})
	if err != nil || st.Erased != 3 || st.Unknown != 1 {
		t.Fatalf("ApplyReset = %+v, %v; want 3 erased, 1 unknown limit", st, err)
	}
	if _, err := c.Peek(at(200), "k", 0, []Limit{sec, minute}, res[:]); err != nil || res[0].Count != 3 || res[1].Count != 0 {
		t.Fatalf("counts %d and %d after resetting the minute, want 3 and 0 (%v)", res[0].Count, res[1].Count, err)
	}

	for i := range maxResets - 1 {
		if _, _, err := c.Reset(at(1000), fmt.Sprint("x", i), []string{sec.ID()}); err != nil {
			t.Fatalf("reset %d: %v", i, err)
		}
	}
	// The shard holds maxResets tombstones: a new one is refused, and
	// nothing of the key is erased.
	if _, err := c.Allow(at(1000), "y", 1, []Limit{sec}, res[:]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reset(at(1001), "y", []string{sec.ID()}); !errors.Is(err, ErrTooManyResets) {
		t.Fatalf("reset past the cap: %v, want ErrTooManyResets", err)
	}
	if _, err := c.Peek(at(1001), "y", 0, []Limit{sec}, res[:]); err != nil || res[0].Count != 1 {
		t.Fatalf("a refused reset erased: count %d (%v)", res[0].Count, err)
	}
	// Once the second-long window has passed, the tombstones go.
	if _, _, err := c.Reset(at(2001), "y", []string{sec.ID()}); err != nil {
		t.Fatalf("reset once the others expired: %v", err)
	}
	c.Sweep(at(70_000))
	if n := len(c.shards[0].coord.resets); n != 0 {
		t.Errorf("%d tombstones after their windows, want 0", n)
	}
}

// TestResetEndsGrantsAndDenials: a coordinator's pending grant counted in
// a slice from before the reset stops counting, a remembered denial goes,
// and a denial answered within the answer delay after the reset is not
// remembered.
func TestResetEndsGrantsAndDenials(t *testing.T) {
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
	var ask Ask
	b.PrepareAsk(at(0), "k", 1, []Limit{lb}, &ask)
	if d, err := a.Coordinate(at(0), "b", 1, &ask, res[:]); err != nil || !d.Allowed {
		t.Fatalf("Coordinate = %+v, %v", d, err)
	}
	if _, err := a.Peek(at(10), "k", 0, []Limit{la}, res[:]); err != nil || res[0].Pending != 1 {
		t.Fatalf("pending %d before the reset, want 1 (%v)", res[0].Pending, err)
	}
	if _, _, err := a.Reset(at(20), "k", []string{la.ID()}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Peek(at(30), "k", 0, []Limit{la}, res[:]); err != nil || res[0].Count != 0 {
		t.Fatalf("count %d after the reset, want 0: the grant's slice started before it (%v)", res[0].Count, err)
	}

	full := []Result{{Limit: 10, Count: 10, RetryAfter: 5 * time.Second}}
	b.RememberDenial(at(100), "k", 1, []Limit{lb}, full)
	if d, err := b.Allow(at(200), "k", 1, []Limit{lb}, res[:]); err != nil || d.Allowed || d.Coordinate {
		t.Fatalf("Allow under a remembered denial = %+v, %v; want denied here", d, err)
	}
	if _, _, err := b.Reset(at(300), "k", []string{lb.ID()}); err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{400, 1200} {
		// At 1200 ms, a denial decided before the reset and answered late.
		b.RememberDenial(at(ms), "k", 1, []Limit{lb}, full)
		if d, err := b.Allow(at(ms), "k", 1, []Limit{lb}, res[:]); err != nil || !d.Coordinate {
			t.Errorf("Allow at %d ms after the reset = %+v, %v; want it put to the coordinator", ms, d, err)
		}
	}
	b.RememberDenial(at(1400), "k", 1, []Limit{lb}, full)
	if d, _ := b.Allow(at(1500), "k", 1, []Limit{lb}, res[:]); d.Allowed || d.Coordinate {
		t.Errorf("a denial answered over a second after the reset was not remembered: %+v", d)
	}
}

// TestResetSingleNodeIsAFreshStart: on one node a reset at R, after every
// request before R, leaves the key exactly as a counter that never saw it:
// every later decision is the fresh counter's, field by field, so the
// property tests' NFR1, NFR2 and exact RetryAfter hold from R on; checked
// here against the oracle too, for the requests after R alone.
func TestResetSingleNodeIsAFreshStart(t *testing.T) {
	cases := []params{
		{limit: 600, windowMs: 60_000, slices: 12, tol: 0.1},
		{limit: 10, windowMs: 1_000, slices: 10, tol: 0.1},
		{limit: 7, windowMs: 1_000, slices: 4, tol: 0.1},
		{limit: 50, windowMs: 3_000, slices: 7, tol: 0.5},
	}
	for _, p := range cases {
		rng := rand.New(rand.NewPCG(3, 20260730))
		for name, arr := range patterns(p, rng) {
			for _, frac := range []int{3, 2} {
				k := len(arr) / frac
				for k < len(arr) && (k == 0 || arr[k-1].t == arr[k].t) {
					k++
				}
				if k >= len(arr) {
					continue
				}
				t.Run(fmt.Sprintf("%v/%s/at %d of %d", p, name, k, len(arr)), func(t *testing.T) {
					runResetAgainstFresh(t, p, arr, k)
				})
			}
		}
	}
}

func runResetAgainstFresh(t *testing.T, p params, arr []arrival, k int) {
	cfg := DefaultConfig()
	cfg.Tolerance = p.tol
	reset, fresh := newCounter(t, cfg), newCounter(t, cfg)
	window := time.Duration(p.windowMs) * time.Millisecond
	lr, lf := mustLimit(t, reset, "p", p.limit, window, p.slices), mustLimit(t, fresh, "p", p.limit, window, p.slices)
	var rr, rf [1]Result
	for _, a := range arr[:k] {
		if _, err := reset.Allow(at(a.t), "k", a.hits, []Limit{lr}, rr[:]); err != nil {
			t.Fatal(err)
		}
	}
	// Made at the last request's instant: R, the millisecond after it, is
	// at or before the next request's.
	if _, _, err := reset.Reset(at(arr[k-1].t), "k", []string{lr.ID()}); err != nil {
		t.Fatal(err)
	}
	o := &oracle{}
	for _, a := range arr[k:] {
		dr, err1 := reset.Allow(at(a.t), "k", a.hits, []Limit{lr}, rr[:])
		df, err2 := fresh.Allow(at(a.t), "k", a.hits, []Limit{lf}, rf[:])
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if dr != df || rr != rf {
			t.Fatalf("at %d ms the reset counter decided %+v %+v, a fresh one %+v %+v", a.t, dr, rr[0], df, rf[0])
		}
		if inWin := o.inWindow(a.t, p.windowMs); !dr.Allowed && inWin+a.hits <= p.limit {
			t.Fatalf("at %d ms rejected %d hits with %d accepted in the window since the reset (NFR2)", a.t, a.hits, inWin)
		}
		if dr.Allowed {
			o.accept(a.t, a.hits)
		}
	}
	if got := o.maxInAnyWindow(p.windowMs); got > p.bound() {
		t.Fatalf("%d accepted after the reset in one window > bound %d (NFR1)", got, p.bound())
	}
}

// TestResetClusterAgainstOracle races a reset with checks on several
// nodes whose clocks differ, over a network that delays, duplicates,
// reorders and drops sync messages, with the reset reaching each node at
// its own moment. Every node that applied the reset counts at most the
// requests it may keep (none admitted before R on its origin's clock and
// before its origin applied the reset), and, once every slice has been
// exchanged, every node counts the same, between the requests admitted
// after their node applied the reset (each in a slice at or after R) and
// those it may keep: nothing counted before the reset comes back, and
// nothing is counted twice.
func TestResetClusterAgainstOracle(t *testing.T) {
	for seed := uint64(1); seed <= 40; seed++ {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) { runResetCluster(t, seed) })
	}
}

// admission is one request admitted in the cluster run.
type admission struct {
	node      int
	trueMs    int64 // on the true clock
	clockMs   int64 // on its node's clock
	afterSelf bool  // its node had applied the reset
}

func runResetCluster(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 19))
	const (
		n        = 3
		windowMs = 10_000
		endMs    = 4_000
		syncMs   = 200
		limit    = 400
	)
	var nodes []resetNode
	off := make([]int64, n) // node clock minus the true clock
	for i := range n {
		nodes = append(nodes, newResetNode(t, fmt.Sprint("n", i), n, limit, windowMs*time.Millisecond))
		if seed%4 != 0 {
			off[i] = rng.Int64N(601) - 300
		}
	}
	coord := rng.IntN(n)
	resetTrue := 1000 + rng.Int64N(1500)
	applyAt := make([]int64, n) // true instant each node applies the reset
	for i := range applyAt {
		applyAt[i] = resetTrue
		if i != coord {
			applyAt[i] += rng.Int64N(600)
		}
	}
	applied := make([]bool, n)
	var r Reset
	type flight struct {
		atMs    int64
		to      int
		entries []Entry
	}
	var flights []flight
	var adm []admission
	mayKeep := func(a admission) bool { return a.afterSelf || at(a.clockMs).UnixMilli() >= r.At }
	eligible := func() int64 {
		var k int64
		for _, a := range adm {
			if mayKeep(a) {
				k++
			}
		}
		return k
	}
	var res [1]Result
	for ms := int64(0); ms <= endMs; ms++ {
		for i := range n {
			if !applied[i] && ms >= applyAt[i] && (i == coord || applied[coord]) {
				if i == coord {
					r = nodes[i].reset(t, ms+off[i], "k")
				} else {
					nodes[i].apply(t, ms+off[i], r)
				}
				applied[i] = true
			}
		}
		kept := flights[:0]
		for _, f := range flights {
			if f.atMs <= ms {
				nodes[f.to].Merge(t, ms+off[f.to], f.entries)
			} else {
				kept = append(kept, f)
			}
		}
		flights = kept
		if ms%syncMs == 0 {
			for i := range n {
				es := nodes[i].c.AppendChanges(nil, at(ms+off[i]))
				for j := range n {
					if j == i || len(es) == 0 || rng.IntN(10) == 0 {
						continue // lost
					}
					for range 1 + rng.IntN(2) { // duplicated now and then
						flights = append(flights, flight{atMs: ms + rng.Int64N(400), to: j, entries: es})
					}
				}
			}
		}
		if rng.IntN(3) != 0 {
			continue
		}
		i := rng.IntN(n)
		d, err := nodes[i].c.Allow(at(ms+off[i]), "k", 1, []Limit{nodes[i].lim}, res[:])
		if err != nil {
			t.Fatal(err)
		}
		if applied[i] {
			if e := eligible(); res[0].Count > e {
				t.Logf("R at %d ms on the coordinator n%d's clock; applied at %v ms; clock offsets %v", r.At-t0.UnixMilli(), coord, applyAt, off)
				t.Fatalf("node %d at %d ms counted %d after the reset, more than the %d requests it may keep", i, ms, res[0].Count, e)
			}
		}
		if d.Allowed {
			adm = append(adm, admission{node: i, trueMs: ms, clockMs: ms + off[i], afterSelf: applied[i]})
		}
	}
	// Every node's every live slice to every other: the exchange a heal's
	// catch-up makes, which the network above may have lost.
	end := int64(endMs + 1)
	for i := range n {
		for j := range n {
			if i != j {
				nodes[j].Merge(t, end+off[j], nodes[i].c.AppendState(nil, at(end+off[i]), nodes[i].name, 0))
			}
		}
	}
	var lower, upper int64
	var keptAt []int64
	for _, a := range adm {
		if a.afterSelf {
			lower++
		}
		if mayKeep(a) {
			upper++
			keptAt = append(keptAt, a.trueMs)
		}
	}
	// The oracle's count of what may be kept in the window at the end: all
	// of it (the run is shorter than the window), so a count above it
	// counts something twice or brings back something erased.
	if w := oracle2.InWindow(keptAt, nil, end, windowMs); w != upper {
		t.Fatalf("oracle: %d of %d in the window", w, upper)
	}
	counts := make([]int64, n)
	for i := range n {
		counts[i] = nodes[i].count(t, end+off[i], "k")
	}
	if counts[0] != counts[1] || counts[1] != counts[2] {
		t.Fatalf("nodes disagree after the exchange: %v", counts)
	}
	if counts[0] < lower || counts[0] > upper {
		t.Fatalf("nodes count %d; admitted after their node applied the reset %d, may keep %d (of %d admitted; offsets %v)", counts[0], lower, upper, len(adm), off)
	}
}
