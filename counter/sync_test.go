package counter

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"
)

// node is one counter in cluster mode for the sync tests.
type node struct {
	c   *Counter
	lim Limit
}

func newNode(t *testing.T, self string, nodes int, budget bool) node {
	t.Helper()
	c := newCounter(t, DefaultConfig())
	cc := DefaultClusterConfig(self)
	// These tests are about merging and the budget, so no coordinator:
	// coordinate_test.go covers it.
	cc.Nodes, cc.Budget, cc.Coordinated = nodes, budget, false
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	return node{c, mustLimit(t, c, "r", 100, 10*time.Second, 10)}
}

func (n node) allow(t *testing.T, ms int64, key string) bool {
	t.Helper()
	var res [1]Result
	d, err := n.c.Allow(at(ms), key, 1, []Limit{n.lim}, res[:])
	if err != nil {
		t.Fatal(err)
	}
	return d.Allowed
}

func (n node) count(t *testing.T, ms int64, key string) int64 {
	t.Helper()
	var res [1]Result
	// hits = limit: never fits unless empty, so nothing is counted.
	if _, err := n.c.Allow(at(ms), key, n.lim.max, []Limit{n.lim}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

func TestMergeIsIdempotentAndOrderFree(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	var batches [][]Entry
	for tick := int64(0); tick < 10; tick++ {
		for i := int64(0); i < 7; i++ {
			a.allow(t, tick*200+i, "k")
		}
		batches = append(batches, a.c.AppendChanges(nil, at(tick*200+199)))
	}
	want := int64(70)
	if got := a.count(t, 2000, "k"); got != want {
		t.Fatalf("a counts %d, want %d", got, want)
	}
	// Deliver every batch twice, in a shuffled order.
	rng := rand.New(rand.NewPCG(1, 2))
	all := append(append([][]Entry{}, batches...), batches...)
	rng.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	for _, batch := range all {
		b.c.Merge(at(2000), batch)
	}
	if got := b.count(t, 2000, "k"); got != want {
		t.Fatalf("b counts %d after duplicated, shuffled delivery; want %d", got, want)
	}
	// b's own requests add to a's: b decides on merged plus local.
	b.allow(t, 2001, "k")
	if got := b.count(t, 2002, "k"); got != want+1 {
		t.Fatalf("b counts %d, want %d", got, want+1)
	}
	// Nothing of b's came back to a as a's own: a still counts 70.
	if got := a.count(t, 2002, "k"); got != want {
		t.Fatalf("a counts %d, want %d", got, want)
	}
}

func TestMergedCountsExpireWithTheirSlices(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	a.allow(t, 0, "k")
	a.allow(t, 1500, "k")
	b.c.Merge(at(1600), a.c.AppendChanges(nil, at(1600)))
	if got := b.count(t, 1600, "k"); got != 2 {
		t.Fatalf("b counts %d, want 2", got)
	}
	if got := b.count(t, 10_000, "k"); got != 1 {
		t.Fatalf("at 10 s the slice from 0 must have left b's window: counts %d, want 1", got)
	}
	if got := b.count(t, 11_500, "k"); got != 0 {
		t.Fatalf("at 11.5 s b counts %d, want 0", got)
	}
	// A late entry for a slice already out of the window is ignored.
	if ms := b.c.Merge(at(20_000), []Entry{{Limit: a.lim.ID(), Key: "k", Origin: "a", Start: at(0).UnixMilli(), Count: 5}}); ms.Expired != 1 {
		t.Fatalf("merge of an expired slice: %+v", ms)
	}
}

func TestRestartLearnsBackOwnCounts(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	for i := int64(0); i < 40; i++ {
		a.allow(t, i*10, "k")
	}
	b.c.Merge(at(500), a.c.AppendChanges(nil, at(500)))

	// a restarts empty with the same name and asks b for what a counted.
	a2 := newNode(t, "a", 2, false)
	back := b.c.AppendState(nil, at(600), "a", 0)
	if ms := a2.c.Merge(at(600), back); ms.Merged == 0 {
		t.Fatalf("nothing restored: %+v", ms)
	}
	if got := a2.count(t, 600, "k"); got != 40 {
		t.Fatalf("restarted a counts %d, want the 40 it had", got)
	}
	// New local requests open a new slice; re-sending the restored ones
	// again changes nothing.
	a2.allow(t, 601, "k")
	a2.c.Merge(at(602), back)
	if got := a2.count(t, 602, "k"); got != 41 {
		t.Fatalf("after one more request and a duplicate restore: %d, want 41", got)
	}
	// The next changes carry the restored slices on (a peer that restarted
	// at the same time lost them too) and the new one; after that, only
	// what changes.
	changes := a2.c.AppendChanges(nil, at(603))
	var restored, fresh uint32
	for _, e := range changes {
		if e.Origin != "a" {
			t.Fatalf("change of origin %q", e.Origin)
		}
		if e.Start == at(601).UnixMilli() {
			fresh += e.Count
		} else {
			restored += e.Count
		}
	}
	if restored != 40 || fresh != 1 {
		t.Fatalf("changes after restart: %+v, want the restored 40 and a new slice of 1", changes)
	}
	if again := a2.c.AppendChanges(nil, at(604)); len(again) != 0 {
		t.Fatalf("restored slices sent twice: %+v", again)
	}
}

func TestAppendStateMinShare(t *testing.T) {
	a := newNode(t, "a", 2, false)
	for i := int64(0); i < 60; i++ {
		a.allow(t, i, "hot")
	}
	a.allow(t, 0, "cold")
	all := a.c.AppendState(nil, at(100), "a", 0)
	hot := a.c.AppendState(nil, at(100), "a", 0.5)
	keys := func(es []Entry) map[string]bool {
		m := map[string]bool{}
		for _, e := range es {
			m[e.Key] = true
		}
		return m
	}
	if k := keys(all); !k["hot"] || !k["cold"] {
		t.Fatalf("full state keys %v", k)
	}
	if k := keys(hot); !k["hot"] || k["cold"] {
		t.Fatalf("state of keys at >= 50%%: %v, want only hot", k)
	}
}

// TestBudgetLimitsTheBlindInterval shows the per-node budget: with 4 nodes,
// a limit of 100 per 10 s and a 200 ms sync (floor ceil(100 x 250ms / 10s)
// = 3), a node admits at most 3 + 100/4 of a fresh key before the next sync;
// for the 50 ms grace after the sync it counts what it sent as unknown to
// its peers still; then it gets 3 + (100-28)/4 = 21 more.
func TestBudgetLimitsTheBlindInterval(t *testing.T) {
	a := newNode(t, "a", 4, true)
	admitted := func(from, n int64) int {
		c := 0
		for i := range n {
			if a.allow(t, from+i, "k") {
				c++
			}
		}
		return c
	}
	if n := admitted(0, 50); n != 28 {
		t.Fatalf("admitted %d before a sync, want 3 + 100/4 = 28", n)
	}
	a.c.AppendChanges(nil, at(200))
	if n := admitted(200, 50); n != 0 {
		t.Fatalf("admitted %d in the grace after the sync, want 0", n)
	}
	if n := admitted(250, 50); n != 21 {
		t.Fatalf("admitted %d after the grace, want 3 + 72/4 = 21", n)
	}
	var res [1]Result
	d, _ := a.c.Allow(at(300), "k", 1, []Limit{a.lim}, res[:])
	if d.Allowed || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("budget denial: %+v, want a retry after one sync interval", d)
	}
	// The window has room, but none is left for this request on this
	// node: what the RateLimit header reports must not contradict the 429.
	if res[0].Remaining != 0 || res[0].Count >= 100 {
		t.Fatalf("budget denial reports %+v, want nothing remaining with room in the window", res[0])
	}
	// Without the budget, the same node admits the whole limit.
	b := newNode(t, "b", 4, false)
	n := 0
	for i := int64(0); i < 150; i++ {
		if b.allow(t, i, "k") {
			n++
		}
	}
	if n != 100 {
		t.Fatalf("without a budget admitted %d, want 100", n)
	}
}

func TestClusterTailShare(t *testing.T) {
	// 600 per 60 s over 4 nodes: each node's slices may hide 600*0.1*0.3/4 = 4.
	c := newCounter(t, DefaultConfig())
	cc := DefaultClusterConfig("a")
	cc.Nodes, cc.Budget = 4, false
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	if got := c.maxTail(600, c.cluster.Load()); got != 4 {
		t.Fatalf("per-node tail %d, want 4", got)
	}
	if err := c.SetCluster(DefaultClusterConfig("other")); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("renaming the node: %v", err)
	}
	if err := c.SetNodes(0); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("SetNodes(0): %v", err)
	}
}

// TestMergeBoundsSlicesPerOrigin: a forged message cannot make one key's
// slices grow past what an origin's window can hold (issue 9, finding 5:
// 58,500 forged entries for one key cost over a second of CPU, as every
// merge scanned all of them), while an honest origin's slices, even one
// request per millisecond up to the limit, are all merged.
func TestMergeBoundsSlicesPerOrigin(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	for i := range int64(100) {
		if !a.allow(t, 1000+i, "honest") {
			t.Fatalf("request %d denied", i)
		}
	}
	ms := b.c.Merge(at(1100), a.c.AppendChanges(nil, at(1100)))
	if ms.Refused != 0 || ms.Unchanged != 0 {
		t.Fatalf("an honest origin's 100 requests at distinct instants: %+v, want every slice merged", ms)
	}
	if got := b.count(t, 1100, "honest"); got != 100 {
		t.Fatalf("b counts %d, want 100", got)
	}

	per := limitInfo{windowMs: 10_000, sliceMs: 1000, max: 100}.perOrigin()
	const forged = 58_500
	es := make([]Entry, forged)
	for i := range es {
		// Every start a window may hold, and more than once.
		es[i] = Entry{Limit: b.lim.ID(), Key: "victim", Origin: "a", Start: at(2000 - 9_999 + int64(i%19_999)).UnixMilli(), Count: 1}
	}
	ms = b.c.Merge(at(2000), es)
	if ms.Merged != per || ms.Refused+ms.Unchanged != forged-per {
		t.Fatalf("%d forged entries: %+v, want %d merged and the rest refused or unchanged", forged, ms, per)
	}
	if got := b.count(t, 2000, "victim"); got != int64(per) {
		t.Fatalf("victim counts %d, want %d (one per slice kept)", got, per)
	}
	// The cap is per origin: another origin's slices still merge.
	if ms := b.c.Merge(at(2000), []Entry{{Limit: b.lim.ID(), Key: "victim", Origin: "c", Start: at(1999).UnixMilli(), Count: 3}}); ms.Merged != 1 {
		t.Fatalf("another origin's slice: %+v, want merged", ms)
	}
}
