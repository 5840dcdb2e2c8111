package counter

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"
)

// ownSlices returns origin's live slices as a node holds them, sorted.
func ownSlices(c *Counter, now time.Time, origin string) []Entry {
	return sortEntries(c.AppendState(nil, now, origin, 0))
}

// TestChangesSendEachSliceOnceUnchanged drives a node whose slices close on
// every new instant (8 nodes share a tail of 0) and checks, tick by tick,
// that (1) a peer merging only the changes holds exactly the node's own
// slices, and (2) no change re-sends a slice with the count already sent.
func TestChangesSendEachSliceOnceUnchanged(t *testing.T) {
	a, b := newNode(t, "a", 8, false), newNode(t, "b", 8, false)
	rng := rand.New(rand.NewPCG(7, 11))
	type sliceID struct {
		key   string
		start int64
	}
	sent := make(map[sliceID]uint32)
	var entries, resent int
	for tick := int64(1); tick <= 300; tick++ {
		for range rng.IntN(12) {
			ms := (tick-1)*200 + rng.Int64N(200)
			a.allow(t, ms, fmt.Sprintf("k%d", rng.IntN(5)))
		}
		now := at(tick * 200)
		ch := a.c.AppendChanges(nil, now)
		for _, e := range ch {
			id := sliceID{e.Key, e.Start}
			if n, ok := sent[id]; ok && n == e.Count {
				resent++
			}
			sent[id] = e.Count
		}
		entries += len(ch)
		b.c.Merge(now, ch)
		if got, want := ownSlices(b.c, now, "a"), ownSlices(a.c, now, "a"); !slices.Equal(got, want) {
			t.Fatalf("tick %d: peer holds %v\nnode holds %v", tick, got, want)
		}
	}
	if resent > 0 {
		t.Errorf("%d of %d entries re-sent a slice unchanged", resent, entries)
	}
	if entries == 0 {
		t.Fatal("no entries sent")
	}
}

// TestChangesConvergeUnderConcurrentAllows runs Allows on several goroutines
// while ticks collect changes, the race the skip of unchanged slices must
// survive: after the load stops and one more tick, a peer that merged every
// change holds exactly the node's slices.
func TestChangesConvergeUnderConcurrentAllows(t *testing.T) {
	a, b := newNode(t, "a", 8, false), newNode(t, "b", 8, false)
	var (
		mu    sync.Mutex
		nowMs int64 = 1000
		wg    sync.WaitGroup
		stop  = make(chan struct{})
	)
	clock := func() int64 { mu.Lock(); defer mu.Unlock(); return nowMs }
	// The ticks start once every goroutine has counted: on a loaded machine
	// the 200 ticks could otherwise be over before any of them ran.
	var started sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 3))
			var res [1]Result
			for i := 0; i < 20_000; i++ {
				if i == 1 {
					started.Done()
				}
				select {
				case <-stop:
					return
				default:
				}
				_, _ = a.c.Allow(at(clock()), fmt.Sprintf("k%d", rng.IntN(50)), 1, []Limit{a.lim}, res[:])
			}
		}()
	}
	started.Wait()
	for range 200 {
		mu.Lock()
		nowMs += 7
		now := nowMs
		mu.Unlock()
		b.c.Merge(at(now), a.c.AppendChanges(nil, at(now)))
	}
	close(stop)
	wg.Wait()
	now := at(clock() + 1)
	b.c.Merge(now, a.c.AppendChanges(nil, now))
	got, want := ownSlices(b.c, now, "a"), ownSlices(a.c, now, "a")
	if !slices.Equal(got, want) {
		t.Fatalf("after the load: peer holds %d slices of a, a holds %d\npeer %v\na    %v", len(got), len(want), got, want)
	}
	if len(want) == 0 {
		t.Fatal("no slices counted")
	}
}

// TestChangesKeepAKeysSlicesTogether: the changes of a tick list each
// key's slices together and in the order they opened, though the checks
// that grew them came interleaved in one shard. (They encode shortest so,
// and their order must not depend on which keys share a shard, which the
// hash seed picks.)
func TestChangesKeepAKeysSlicesTogether(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Shards = 1
	c := newCounter(t, cfg)
	cc := DefaultClusterConfig("a")
	cc.Nodes, cc.Coordinated = 8, false // a tail share of 0: each new instant opens a slice
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	n := node{c, mustLimit(t, c, "r", 100, 10*time.Second, 10)}
	for ms := int64(0); ms < 40; ms += 10 {
		for _, key := range []string{"x", "y", "z"} {
			n.allow(t, ms, key)
		}
	}
	ch := c.AppendChanges(nil, at(200))
	if len(ch) != 12 {
		t.Fatalf("%d changes, want 12 (4 slices of 3 keys): %v", len(ch), ch)
	}
	for i, e := range ch {
		if want := at(int64(i%4) * 10).UnixMilli(); e.Key != ch[i/4*4].Key || e.Start != want || e.Count != 1 {
			t.Fatalf("change %d is %+v, want key %s's slice at %d with 1: %v", i, e, ch[i/4*4].Key, want, ch)
		}
	}
	if keys := []string{ch[0].Key, ch[4].Key, ch[8].Key}; keys[0] == keys[1] || keys[1] == keys[2] || keys[0] == keys[2] {
		t.Fatalf("keys %v, want three", keys)
	}
}

// A state's changed field names its change and the interval it was
// recorded in: a change of an earlier interval, whose list is gone, is
// told apart without reading the list, and an index past the field's
// bits names none.
func TestChangeRef(t *testing.T) {
	for _, tc := range []struct {
		name      string
		i         int
		tick, now uint32
		ok        bool
	}{
		{"first change, same interval", 0, 7, 7, true},
		{"a later change", 4095, 7, 7, true},
		{"the interval after", 3, 7, 8, false},
		{"the tick's bits wrapped", 3, 7, 7 + 1<<12, true}, // the key compare decides then
		{"ticks past the field's bits", 5, 1<<12 + 9, 9, true},
		{"the last index the bits hold", changeIndexMask - 1, 2, 2, true},
		{"an index past the bits", changeIndexMask, 2, 2, false},
	} {
		ref := changeRef(tc.i, tc.tick)
		i, ok := changeAt(ref, tc.now)
		if ok != tc.ok || ok && i != tc.i {
			t.Errorf("%s: changeAt(changeRef(%d, %d), %d) = %d, %v; want %d, %v", tc.name, tc.i, tc.tick, tc.now, i, ok, tc.i, tc.ok)
		}
	}
	if _, ok := changeAt(0, 0); ok {
		t.Error("a state never changed names a change")
	}
}
