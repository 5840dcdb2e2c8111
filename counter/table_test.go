package counter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"
)

// TestMergeKeepsEveryValue merges random peer slices whose values span
// both forms of a stored slice list (packed.go): counts past 65,535,
// origins past 255, starts more than 2^24 ms apart in a long window, and
// starts before every slice already held. What AppendState returns for
// each origin must be exactly the largest count merged per (origin,
// start), as a plain map of them says.
func TestMergeKeepsEveryValue(t *testing.T) {
	for _, tc := range []struct {
		name     string
		window   time.Duration
		origins  int
		maxCount uint32
		wide     bool // some list ends up in the wide form
	}{
		{"narrow", time.Minute, 3, 100, false},
		{"big counts", time.Minute, 3, 1 << 20, true},
		{"many origins", time.Minute, 300, 100, true},
		{"long window", 20 * time.Hour, 3, 100, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCounter(t, Config{Shards: 4, MaxKeys: 1000, Tolerance: 0.1})
			cc := DefaultClusterConfig("self")
			cc.Nodes = 2
			if err := c.SetCluster(cc); err != nil {
				t.Fatal(err)
			}
			l := mustLimit(t, c, "l", MaxLimit, tc.window, 12)
			w := tc.window.Milliseconds()
			rng := rand.New(rand.NewPCG(7, uint64(tc.origins)))
			type name struct {
				key, origin string
				start       int64
			}
			want := map[name]uint32{}
			base, now := t0.UnixMilli(), int64(0)
			for range 3000 {
				e := Entry{
					Limit:  l.ID(),
					Key:    "k" + strconv.Itoa(rng.IntN(5)),
					Origin: "o" + strconv.Itoa(rng.IntN(tc.origins)),
					Start:  base + now - rng.Int64N(w-1),
					Count:  1 + rng.Uint32N(tc.maxCount),
				}
				if rng.IntN(4) == 0 {
					e.Count = want[name{e.Key, e.Origin, e.Start}] // a duplicate or a smaller count
					if e.Count == 0 {
						e.Count = 1
					}
				}
				if ms := c.Merge(at(now), []Entry{e}); ms.Refused+ms.NoRoom+ms.Expired != 0 {
					t.Fatalf("%+v: %+v", e, ms)
				}
				n := name{e.Key, e.Origin, e.Start}
				want[n] = max(want[n], e.Count)
				now += rng.Int64N(w / 50)
			}
			nowT := at(now)
			got := map[name]uint32{}
			for o := range tc.origins {
				for _, e := range c.AppendState(nil, nowT, "o"+strconv.Itoa(o), 0) {
					got[name{e.Key, e.Origin, e.Start}] = e.Count
				}
			}
			for n, cnt := range want {
				if n.start <= base+now-w {
					delete(want, n) // out of the window at the end
				} else if got[n] != cnt {
					t.Errorf("%+v: count %d, want %d", n, got[n], cnt)
				}
			}
			if len(got) != len(want) {
				t.Errorf("%d slices held, want %d", len(got), len(want))
			}
			wide := false
			for i := range c.shards {
				for _, tab := range c.shards[i].tables {
					for _, e := range tab.idx {
						wide = wide || e != 0 && tab.slab.b[refOff(uint32(e))+bFlags]&flagWide != 0
					}
				}
			}
			if wide != tc.wide {
				t.Errorf("a wide list: %v, want %v", wide, tc.wide)
			}
		})
	}
}

// TestLargeCountsAtOneInstant counts more than 65,535 hits in one slice, so
// the key's list turns wide, and checks the count and the retry advice.
func TestLargeCountsAtOneInstant(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "big", 1_000_000, time.Minute, 12)
	var res [1]Result
	for i := range 3 {
		if d, err := c.Allow(at(int64(i)), "k", 300_000, []Limit{l}, res[:]); err != nil || !d.Allowed {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	if d, _ := c.Allow(at(10), "k", 200_000, []Limit{l}, res[:]); d.Allowed {
		t.Fatal("over the limit and allowed")
	}
	// The first 300,000 must leave: at 60 s, 59.99 s after the check.
	if res[0].Count != 900_000 || res[0].RetryAfter != 59_990*time.Millisecond {
		t.Fatalf("count %d, retry %v; want 900000 and 59.99s", res[0].Count, res[0].RetryAfter)
	}
}

// TestCheckSweepsWithStatesInUse makes a two-limit check need the sweep
// for its new key while its other key's state, with slices to expire, is
// in use: the sweep rewrites the shard's blocks, and the check must still
// count that state exactly.
func TestCheckSweepsWithStatesInUse(t *testing.T) {
	c := newCounter(t, Config{Shards: 1, MaxKeys: 2, Tolerance: 0.1})
	a := mustLimit(t, c, "a", 100, time.Second, 10)
	b := mustLimit(t, c, "b", 100, time.Second, 10)
	var res [2]Result
	allow := func(ms int64, key string, hits int64, limits ...Limit) Decision {
		t.Helper()
		d, err := c.Allow(at(ms), key, hits, limits, res[:])
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow(0, "k", 5, a)   // expires by 1,000
	allow(500, "k", 7, a) // still counted at 1,200
	allow(0, "x", 1, b)   // the shard is full: x's window empties at 1,000
	if d := allow(1200, "k", 1, a, b); !d.Allowed || d.Untracked {
		t.Fatalf("%+v: want allowed and tracked (the sweep frees x)", d)
	}
	if res[0].Count != 7 || res[1].Count != 0 {
		t.Fatalf("counts %d, %d; want 7 and 0", res[0].Count, res[1].Count)
	}
	if got := c.Stats().Keys; got != 2 {
		t.Fatalf("%d keys tracked, want 2", got)
	}
	if d := allow(1201, "k", 1, a, b); !d.Allowed || res[0].Count != 8 || res[1].Count != 1 {
		t.Fatalf("%+v %+v: want counts 8 and 1", d, res)
	}
}

// TestRepeatedLimitCountsOnce names one limit twice in a check: each sees
// the window as it was, and the hits are counted once, as before the
// states were read in place.
func TestRepeatedLimitCountsOnce(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "l", 10, time.Minute, 12)
	var res [2]Result
	for i := range 3 {
		if d, err := c.Allow(at(int64(i)*10_000), "k", 2, []Limit{l, l}, res[:]); err != nil || !d.Allowed {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
		if res[0].Count != int64(2*i) || res[1].Count != int64(2*i) {
			t.Fatalf("call %d: counts %d, %d; want %d", i, res[0].Count, res[1].Count, 2*i)
		}
	}
}

// TestSlabReusesAndCompacts checks that keys coming and going reuse their
// blocks (a steady load does not grow the slab) and that Sweep gives the
// memory of a flood of keys back.
func TestSlabReusesAndCompacts(t *testing.T) {
	c := newCounter(t, Config{Shards: 1, MaxKeys: 1 << 20, Tolerance: 0.1})
	l := mustLimit(t, c, "l", 100, time.Second, 10)
	var res [1]Result
	slab := func() int { return len(c.shards[0].tables[0].slab.b) }
	round := func(from, n int, ms int64) {
		for i := range n {
			c.Allow(at(ms), "key-"+strconv.Itoa(from+i), 1, []Limit{l}, res[:])
		}
	}
	round(0, 1000, 0)
	c.Sweep(at(2000))
	first := slab()
	for r := 1; r <= 5; r++ {
		round(r*1000, 1000, int64(r)*2000)
		c.Sweep(at(int64(r)*2000 + 2000))
	}
	if slab() != first {
		t.Fatalf("slab %d bytes after five rounds of new keys, %d after the first", slab(), first)
	}
	round(10_000, 50_000, 20_000) // a flood
	round(60_000, 100, 21_500)    // and a few later
	if c.Sweep(at(21_200)); c.Stats().Keys != 100 {
		t.Fatalf("%d keys after the sweep, want 100", c.Stats().Keys)
	}
	if got := cap(c.shards[0].tables[0].slab.b); got > 100*200 {
		t.Fatalf("slab capacity %d after the flood left, want it rebuilt", got)
	}
	if got := len(c.shards[0].tables[0].idx); got > 1024 {
		t.Fatalf("index of %d slots for 100 keys", got)
	}
}

// aliased returns s as a string over buf's bytes, which the caller
// overwrites after use: a decode buffer that the cluster codec reuses.
func aliased(buf *[]byte, s string) string {
	*buf = append((*buf)[:0], s...)
	return unsafe.String(&(*buf)[0], len(s))
}

// TestMergeDoesNotRetainStrings is Entry's contract: Merge copies what it
// keeps. It merges entries whose strings alias buffers (new keys, hot
// keys, restored own slices, a new origin), overwrites the buffers, and
// checks that the counter holds what an identical counter merged from
// ordinary strings holds.
func TestMergeDoesNotRetainStrings(t *testing.T) {
	mk := func() (*Counter, Limit) {
		c := newCounter(t, Config{Shards: 4, MaxKeys: 1000, Tolerance: 0.1})
		cc := DefaultClusterConfig("self")
		cc.Nodes = 2
		if err := c.SetCluster(cc); err != nil {
			t.Fatal(err)
		}
		return c, mustLimit(t, c, "l", 10, time.Minute, 12)
	}
	plain, l := mk()
	alias, _ := mk()
	var entries, aliasedEntries []Entry
	for i := range 40 {
		e := Entry{Limit: l.ID(), Key: "key-" + strconv.Itoa(i%10), Origin: []string{"peer", "self", "other"}[i%3], Start: at(int64(i)).UnixMilli(), Count: uint32(1 + i%7)}
		entries = append(entries, e)
	}
	bufs := make([][]byte, 3*len(entries))
	for i, e := range entries {
		e.Limit = aliased(&bufs[3*i], e.Limit)
		e.Key = aliased(&bufs[3*i+1], e.Key)
		e.Origin = aliased(&bufs[3*i+2], e.Origin)
		aliasedEntries = append(aliasedEntries, e)
	}
	now := at(100)
	if a, b := plain.Merge(now, entries), alias.Merge(now, aliasedEntries); a != b {
		t.Fatalf("merge stats %+v and %+v", a, b)
	}
	for _, b := range bufs {
		for i := range b {
			b[i] = '#'
		}
	}
	var ra, rb [1]Result
	for i := range 10 {
		key := "key-" + strconv.Itoa(i)
		plain.Peek(now, key, 1, []Limit{l}, ra[:])
		alias.Peek(now, key, 1, []Limit{l}, rb[:])
		if ra != rb {
			t.Errorf("%s: peek %+v, want %+v", key, rb[0], ra[0])
		}
	}
	state := func(c *Counter) string {
		var b strings.Builder
		for _, o := range []string{"self", "peer", "other"} {
			es := c.AppendState(nil, now, o, 0)
			slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
			fmt.Fprintln(&b, es)
		}
		hot := c.AppendHot(nil, now, "peer")
		slices.SortFunc(hot, func(a, b Entry) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		fmt.Fprintln(&b, hot)
		changes := c.AppendChanges(nil, now) // the restored own slices
		slices.SortFunc(changes, func(a, b Entry) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
		fmt.Fprintln(&b, changes)
		return b.String()
	}
	if a, b := state(plain), state(alias); a != b {
		t.Errorf("state after the buffers were overwritten:\n%s\nwant\n%s", b, a)
	}
	if strings.Contains(state(alias), "#") {
		t.Error("the counter kept a string of the caller's buffers")
	}
	for i := range 10 {
		key := "key-" + strconv.Itoa(i)
		da, _ := plain.Allow(now, key, 1, []Limit{l}, ra[:])
		db, _ := alias.Allow(now, key, 1, []Limit{l}, rb[:])
		if da != db || ra != rb {
			t.Errorf("%s: allow %+v %+v, want %+v %+v", key, db, rb[0], da, ra[0])
		}
	}
}

// TestCoordinateDoesNotRetainStrings is the same contract for an Ask: the
// coordinator's grant is kept under a copy of the key, so after the ask's
// buffers are overwritten the grant still counts for the key (Pending).
func TestCoordinateDoesNotRetainStrings(t *testing.T) {
	c := newCounter(t, Config{Shards: 4, MaxKeys: 1000, Tolerance: 0.1})
	cc := DefaultClusterConfig("coord")
	cc.Nodes = 2
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	l := mustLimit(t, c, "l", 10, time.Minute, 12)
	var kb, lb, ob, eb []byte
	ask := &Ask{
		Key:     aliased(&kb, "client"),
		Hits:    2,
		Limits:  []string{aliased(&lb, l.ID())},
		Preds:   []Pred{{Start: at(0).UnixMilli(), After: 2}},
		Entries: []Entry{{Limit: l.ID(), Key: aliased(&eb, "client"), Origin: aliased(&ob, "asker"), Start: at(-5).UnixMilli(), Count: 3}},
	}
	var res [1]Result
	if d, err := c.Coordinate(at(0), "asker", 1, ask, res[:]); err != nil || !d.Allowed {
		t.Fatalf("%+v %v", d, err)
	}
	for _, b := range [][]byte{kb, lb, ob, eb} {
		for i := range b {
			b[i] = '#'
		}
	}
	if _, err := c.Peek(at(1), "client", 1, []Limit{l}, res[:]); err != nil {
		t.Fatal(err)
	}
	if res[0].Count != 5 || res[0].Pending != 2 {
		t.Fatalf("count %d, pending %d; want the merged 3 and the granted 2", res[0].Count, res[0].Pending)
	}
	if strings.Contains(fmt.Sprint(c.AppendState(nil, at(1), "asker", 0)), "#") {
		t.Fatal("the counter kept a string of the ask's buffers")
	}
}
