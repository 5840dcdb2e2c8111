package counter

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkAllowExistingKey is the hot path: one key, already tracked, one
// limit (HS3: 600 per 60 s, 12 slices), the clock advancing 1 ms a call.
func BenchmarkAllowExistingKey(b *testing.B) {
	c := newCounter(b, DefaultConfig())
	l := mustLimit(b, c, "default", 600, time.Minute, 12)
	limits := []Limit{l}
	var res [1]Result
	key := "client-42"
	c.Allow(t0, key, 1, limits, res[:])
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		c.Allow(at(int64(i)), key, 1, limits, res[:])
	}
}

// BenchmarkAllowClusterFastPath is the hot path on a node of a
// coordinated 8-node cluster: one tracked key far from its limit (HS3),
// a sync tick every 200 calls (200 ms at 1 ms a call), so every check
// fits the node's blind share and is decided here, with no network: what
// every check of a key below its margin costs in the cluster. budget-alone
// is the same node without the coordinator (-coordinate=false), for the
// comparison.
func BenchmarkAllowClusterFastPath(b *testing.B) {
	for _, coordinated := range []bool{true, false} {
		name := "coordinated"
		if !coordinated {
			name = "budget-alone"
		}
		b.Run(name, func(b *testing.B) { benchClusterFastPath(b, coordinated) })
	}
}

func benchClusterFastPath(b *testing.B, coordinated bool) {
	c := newCounter(b, DefaultConfig())
	cc := DefaultClusterConfig("n1")
	cc.Nodes, cc.Coordinated = 8, coordinated
	if err := c.SetCluster(cc); err != nil {
		b.Fatal(err)
	}
	l := mustLimit(b, c, "default", 600, time.Minute, 12)
	limits := []Limit{l}
	var res [1]Result
	var buf []Entry
	keys := make([]string, 200)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if i%200 == 0 {
			b.StopTimer()
			buf = c.AppendChanges(buf[:0], at(int64(i)))
			b.StartTimer()
		}
		// One check a sync interval per key, over 200 keys: a client at
		// about its limit rate each, never past the blind share.
		d, _ := c.Allow(at(int64(i)), keys[i%200], 1, limits, res[:])
		if d.Coordinate {
			b.Fatal("a check below the blind share asked the coordinator")
		}
	}
}

// BenchmarkAllowParallel checks tracked keys from GOMAXPROCS goroutines;
// run with -cpu 1,2 to see how the sharded locks scale. "own-key": each
// goroutine checks its own key (no shared lock, no shared cache line: the
// ideal scaling); "shared-keys": all draw at random from the same 10,000
// keys, so cores also pull the same map memory back and forth.
func BenchmarkAllowParallel(b *testing.B) {
	for _, shared := range []bool{false, true} {
		name := "own-key"
		if shared {
			name = "shared-keys"
		}
		b.Run(name, func(b *testing.B) {
			c := newCounter(b, DefaultConfig())
			l := mustLimit(b, c, "default", 600, time.Minute, 12)
			limits := []Limit{l}
			var g atomic.Uint64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				id := g.Add(1)
				n := 1
				if shared {
					id, n = 0, 10_000
				}
				keys := make([]string, n)
				for i := range keys {
					keys[i] = "client-" + strconv.FormatUint(id, 10) + "-" + strconv.Itoa(i)
				}
				var res [1]Result
				rng := rand.New(rand.NewPCG(g.Add(1), 1))
				for i := 0; pb.Next(); i++ {
					c.Allow(at(int64(i)), keys[rng.IntN(n)], 1, limits, res[:])
				}
			})
		})
	}
}

// BenchmarkMemoryPerClient loads HS1 with the seed's average traffic: 200,000
// clients, 40,000 requests/s for 60 s at random (about 12 requests per
// client per minute), then reports the live heap per tracked client.
func BenchmarkMemoryPerClient(b *testing.B) {
	const clients, rate, seconds = 200_000, 40_000, 60
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(i)
	}
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c := newCounter(b, DefaultConfig())
		l := mustLimit(b, c, "default", 600, time.Minute, 12)
		limits := []Limit{l}
		var res [1]Result
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range rate * seconds {
			ms := int64(i) * 1000 / rate
			c.Allow(at(ms), keys[rng.IntN(clients)], 1, limits, res[:])
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := c.Stats().Keys
		slices := 0
		for i := range c.shards {
			s := &c.shards[i]
			for j := range s.tables {
				t := &s.tables[j]
				t.scan(func(k int) bool {
					var st state
					t.slab.load(uint32(t.idx[k]), s.buf(0), false, &st)
					slices += st.sl.n
					return false
				})
			}
		}
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/client")
		b.ReportMetric(float64(slices)/float64(n), "slices/client")
		b.ReportMetric(float64(n), "clients")
		runtime.KeepAlive(c)
	}
}

// BenchmarkMergeForgedKey is issue 9's finding 5: one message of 58,500
// forged entries for one key (600 per minute), each a slice of its own.
// Before the per-origin bound and the binary search, every entry scanned
// all the key's slices so far (1 to 1.7 s a message, measured on a node).
func BenchmarkMergeForgedKey(b *testing.B) {
	c := newCounter(b, DefaultConfig())
	cc := DefaultClusterConfig("self")
	cc.Nodes = 2
	if err := c.SetCluster(cc); err != nil {
		b.Fatal(err)
	}
	l := mustLimit(b, c, "default", 600, time.Minute, 12)
	es := make([]Entry, 58_500)
	for i := 0; b.Loop(); i++ {
		base := int64(i) * 200_000 // a fresh window each time
		for j := range es {
			es[j] = Entry{Limit: l.ID(), Key: "victim", Origin: "peer", Start: at(base + int64(j)).UnixMilli(), Count: 1}
		}
		if ms := c.Merge(at(base+58_500), es); ms.Expired != 0 {
			b.Fatalf("%+v: the entries must be live", ms)
		}
	}
}

// BenchmarkMergeSteady is the receive side of cluster sync at the design
// load, the shape of the cluster's SyncerTickReceive without the codec: a
// peer counts 1,000 checks (5,000/s for 200 ms) over 200,000 clients and
// ticks, and this node merges the tick's delta, one entry per key checked
// (the peer's newest slice of it), its starts advancing with the clock.
// A window's worth of ticks warms both sides first, so keys come and go
// as in steady state. Only Merge is timed; ns/entry is per merged entry,
// and allocs/op is per 1,000-entry tick.
func BenchmarkMergeSteady(b *testing.B) { benchMerge(b, 2, 200_000, 1_000) }

// BenchmarkMergeHotKeys is the same on 8 nodes with the 1,000 keys of
// scripts/bench-loopback.sh's KEYS=1000 run, each checked about 35 times
// a second against 600 a minute: past their limit, each key keeps a
// slice for every three admissions or so (a slice's tail holds 2 on 8
// nodes), some 200 in its window, and the peer's newest lies at the end.
func BenchmarkMergeHotKeys(b *testing.B) { benchMerge(b, 8, 1_000, 7_000) }

// BenchmarkMergeManySlices is a peer's merge in scripts/bench-loopback.sh's
// KEYS=100000 run on 8 nodes: node 1 checks some 55,000 keys a second out
// of 100,000, so a key has a slice in most 5 s slices of its window, about
// a dozen, and its block spans two or three cache lines past its header.
func BenchmarkMergeManySlices(b *testing.B) { benchMerge(b, 8, 100_000, 11_000) }

// BenchmarkMergeKnown is BenchmarkMergeSteady's ticks each merged a second
// time, only that one timed: every entry is known already, as most of
// anti-entropy's re-sends are.
func BenchmarkMergeKnown(b *testing.B) { benchMergeAgain(b, 2, 200_000, 1_000, true) }

// benchMerge times the merge of a peer's ticks on a cluster of nodes,
// the peer checking perTick random keys of clients each tick.
func benchMerge(b *testing.B, nodes, clients, perTick int) {
	benchMergeAgain(b, nodes, clients, perTick, false)
}

// benchMergeAgain is benchMerge; with again, each tick is merged once
// untimed and then again, timed.
func benchMergeAgain(b *testing.B, nodes, clients, perTick int, again bool) {
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(100000+i)
	}
	node := func(self string) (*Counter, Limit) {
		c := newCounter(b, DefaultConfig())
		cc := DefaultClusterConfig(self)
		cc.Nodes, cc.Coordinated = nodes, false // every check decided locally, as in the cluster benchmark
		if err := c.SetCluster(cc); err != nil {
			b.Fatal(err)
		}
		return c, mustLimit(b, c, "default", 600, time.Minute, 12)
	}
	peer, lim := node("n2")
	c, _ := node("n1")
	limits := []Limit{lim}
	var res [1]Result
	rng := rand.New(rand.NewPCG(1, 2))
	var ms int64
	var delta []Entry
	step := func() []Entry {
		for range perTick {
			peer.Allow(at(ms), keys[rng.IntN(clients)], 1, limits, res[:])
		}
		ms += 200
		delta = peer.AppendChanges(delta[:0], at(ms))
		return delta
	}
	for range 300 { // a 60 s window
		c.Merge(at(ms), step())
	}
	entries := 0
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		es := step()
		if again {
			c.Merge(at(ms), es)
		}
		b.StartTimer()
		st := c.Merge(at(ms), es)
		if st.Merged+st.Unchanged != len(es) || again && st.Unchanged != len(es) {
			b.Fatalf("%+v of %d entries: all must merge (merged again: all unchanged)", st, len(es))
		}
		entries += len(es)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
	b.ReportMetric(float64(entries)/float64(b.N), "entries/op")
}
