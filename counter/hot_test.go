package counter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// sortEntries orders entries by key, then start, for comparison.
func sortEntries(es []Entry) []Entry {
	slices.SortFunc(es, func(a, b Entry) int {
		if a.Key != b.Key {
			if a.Key < b.Key {
				return -1
			}
			return 1
		}
		return int(a.Start - b.Start)
	})
	return es
}

// TestAppendHotMatchesFullScan checks the incremental hot set against the
// naive oracle, a scan of every key (AppendState with minShare HotShare):
// a node counts its own requests and merges a peer's, keys warm up, cool
// down and expire, and at random instants both must return the same
// entries for the node's own origin. For the peer's origin, AppendHot
// returns all the scan's entries of the keys the node has live slices of,
// and of the others (the set holds only keys the node counted) a subset.
func TestAppendHotMatchesFullScan(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	rng := rand.New(rand.NewPCG(3, 5))
	checked, hotSeen := 0, 0
	for step := int64(0); step < 4000; step++ {
		ms := step * 10
		// A few keys get bursts large enough to cross half the limit (100
		// per 10 s); the rest stay cold.
		key := fmt.Sprintf("k%d", rng.IntN(20))
		for range rng.IntN(8) {
			a.allow(t, ms, key)
		}
		for range rng.IntN(6) {
			b.allow(t, ms, fmt.Sprintf("k%d", rng.IntN(20)))
		}
		if step%20 == 0 {
			a.c.Merge(at(ms), b.c.AppendChanges(nil, at(ms)))
		}
		if step%37 == 0 {
			now := at(ms + rng.Int64N(500))
			for _, origin := range []string{"a", "b", "nobody"} {
				got := sortEntries(a.c.AppendHot(nil, now, origin))
				want := sortEntries(a.c.AppendState(nil, now, origin, 0.5))
				if origin == "b" {
					// Of the keys a has live slices of, every slice of
					// b's; of the others, at most b's slices of them.
					counted := map[string]bool{}
					for _, e := range a.c.AppendState(nil, now, "a", 0) {
						counted[e.Key] = true
					}
					of := func(es []Entry, own bool) []Entry {
						return slices.DeleteFunc(slices.Clone(es), func(e Entry) bool { return counted[e.Key] != own })
					}
					if rest := of(got, false); !isSubset(rest, want) {
						t.Fatalf("step %d: AppendHot(b) of keys a does not count %v, not in the scan", step, rest)
					}
					got, want = of(got, true), of(want, true)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("step %d origin %s: AppendHot %v\nfull scan %v", step, origin, got, want)
				}
				hotSeen += len(want)
			}
			checked++
		}
	}
	if hotSeen == 0 || checked == 0 {
		t.Fatalf("no hot entries in %d checks: the test exercises nothing", checked)
	}
	// Keys gone cold leave the set: after every window has passed, nothing.
	late := at(4000*10 + 20_000)
	if got := a.c.AppendHot(nil, late, "a"); len(got) != 0 {
		t.Fatalf("after the window: %v", got)
	}
	n := 0
	for i := range a.c.shards {
		n += len(a.c.shards[i].hot)
	}
	if n != 0 {
		t.Errorf("%d keys left in the hot set after they went cold", n)
	}
}

// isSubset reports whether every entry of sub is in set.
func isSubset(sub, set []Entry) bool {
	for _, e := range sub {
		if !slices.Contains(set, e) {
			return false
		}
	}
	return true
}

// TestHotSetHoldsOnlyKeysCountedHere: a key only a peer counts, merged
// past HotShare, is not in the hot set (this node has nothing of it to
// re-send), and enters it once this node counts it too.
func TestHotSetHoldsOnlyKeysCountedHere(t *testing.T) {
	a, b := newNode(t, "a", 2, false), newNode(t, "b", 2, false)
	hot := func() int {
		n := 0
		for i := range a.c.shards {
			n += len(a.c.shards[i].hot)
		}
		return n
	}
	for range 80 { // 80 of 100: past HotShare (0.5)
		b.allow(t, 0, "k")
	}
	a.c.Merge(at(10), b.c.AppendChanges(nil, at(10)))
	if got := a.c.AppendState(nil, at(20), "b", 0.5); len(got) == 0 {
		t.Fatal("the merged key is not hot at a: the test exercises nothing")
	}
	if n := hot(); n != 0 {
		t.Fatalf("%d keys in a's hot set, want 0: a counts none of them", n)
	}
	a.allow(t, 30, "k")
	if n := hot(); n != 1 {
		t.Fatalf("%d keys in a's hot set after a counted k, want 1", n)
	}
	if got := a.c.AppendHot(nil, at(40), "a"); len(got) != 1 || got[0].Key != "k" {
		t.Fatalf("AppendHot(a) = %v, want a's one slice of k", got)
	}
}

func TestAppendHotSingleNode(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	lim := mustLimit(t, c, "r", 10, time.Second, 10)
	var res [1]Result
	for range 10 {
		if _, err := c.Allow(at(0), "k", 1, []Limit{lim}, res[:]); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.AppendHot(nil, at(1), ""); len(got) != 0 {
		t.Fatalf("single node: %v", got)
	}
}

func TestShardSize(t *testing.T) {
	if n := unsafe.Sizeof(shard{}); n != 128 {
		t.Fatalf("shard is %d bytes, want 128 (a cache-line pair, see the padding)", n)
	}
}

// TestAppendHotChangedHoldsEveryRecentChange: AppendHotChanged returns
// AppendHot's entries, less only slices that have not changed within
// recent: every slice whose count last changed within recent of now is
// there, with AppendHot's count, whatever recent is.
func TestAppendHotChangedHoldsEveryRecentChange(t *testing.T) {
	a := newNode(t, "a", 2, false)
	rng := rand.New(rand.NewPCG(7, 11))
	type name struct {
		key   string
		start int64
	}
	changed := map[name]int64{} // each own slice's last change, in ms
	counts := map[name]uint32{}
	omitted, kept := 0, 0
	for step := int64(0); step < 3000; step++ {
		ms := step * 10
		key := fmt.Sprintf("k%d", rng.IntN(5))
		for range rng.IntN(4) {
			a.allow(t, ms, key)
		}
		for _, e := range a.c.AppendState(nil, at(ms), "a", 0) {
			if n := (name{e.Key, e.Start}); counts[n] != e.Count {
				counts[n], changed[n] = e.Count, ms
			}
		}
		if step%13 != 0 {
			continue
		}
		recent := time.Duration(10+rng.IntN(3000)) * time.Millisecond
		now := at(ms)
		got := map[name]uint32{}
		for _, e := range a.c.AppendHotChanged(nil, now, "a", recent) {
			got[name{e.Key, e.Start}] = e.Count
		}
		for _, e := range a.c.AppendHot(nil, now, "a") {
			n := name{e.Key, e.Start}
			c, ok := got[n]
			switch {
			case ok && c != e.Count:
				t.Fatalf("step %d: %v counts %d, AppendHot %d", step, n, c, e.Count)
			case ok:
				kept++
				delete(got, n)
			case changed[n] >= ms-recent.Milliseconds():
				t.Fatalf("step %d: %v changed at %d ms, within %v of %d, is missing", step, n, changed[n], recent, ms)
			default:
				omitted++
			}
		}
		if len(got) != 0 {
			t.Fatalf("step %d: %v are not among AppendHot's", step, got)
		}
	}
	if omitted == 0 || kept == 0 {
		t.Fatalf("%d slices kept and %d omitted: the test exercises nothing", kept, omitted)
	}
}

// TestAppendHotChangedSkipsFollowedSlices: of a key whose slices close
// every few admissions, AppendHotChanged returns only the slices counted
// in within recent (the newest, and those whose next one opened within
// recent), not every slice younger than a slice length.
func TestAppendHotChangedSkipsFollowedSlices(t *testing.T) {
	a := newNode(t, "a", 2, false)
	// 80 admissions 50 ms apart: the slices' tails close them every few.
	for ms := int64(0); ms < 4000; ms += 50 {
		if !a.allow(t, ms, "k") {
			t.Fatalf("request at %d ms denied", ms)
		}
	}
	now, recent := at(3950), 200*time.Millisecond
	all := a.c.AppendHot(nil, now, "a")
	got := a.c.AppendHotChanged(nil, now, "a", recent)
	young := 0 // slices started within a slice length and recent: what a start alone would keep
	for _, e := range all {
		if e.Start > now.UnixMilli()-1000-recent.Milliseconds() {
			young++
		}
	}
	// The slices' starts, the newest last: the last ones whose successor
	// opened at or after now − recent, and the newest.
	var want []Entry
	for i, e := range all {
		if i == len(all)-1 || all[i+1].Start >= now.UnixMilli()-recent.Milliseconds() {
			want = append(want, e)
		}
	}
	if !slices.Equal(got, want) {
		t.Fatalf("AppendHotChanged = %v, want %v", got, want)
	}
	if len(got) >= young || len(all) < 20 {
		t.Fatalf("%d slices returned of %d started within a slice length and recent (%d in all): nothing skipped", len(got), young, len(all))
	}
	t.Logf("%d of %d slices, %d of them young", len(got), len(all), young)
}
