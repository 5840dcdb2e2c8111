package engine

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// benchSyncer returns an engine over a counter in 8-node cluster mode
// with the design limit (600/60 s), as limiterd runs it, with peer up.
func benchSyncer(b *testing.B, name, peer string) (*counter.Counter, *Engine, counter.Limit) {
	b.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		b.Fatal(err)
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Coordinated = false // every check decided locally, as the measurements were made
	cc.Nodes = 8
	if err := c.SetCluster(cc); err != nil {
		b.Fatal(err)
	}
	lim, err := c.Limit("default", 600, time.Minute, 12)
	if err != nil {
		b.Fatal(err)
	}
	s, err := New(c, DefaultConfig(name))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := s.PeerUp(t0, peer); err != nil {
		b.Fatal(err)
	}
	return c, s, lim
}

// BenchmarkSyncerTickReceive measures one sync interval of the design load
// on one node's sync path, without a network: a peer counts 1,000 checks
// (5,000/s for 200 ms) over 200,000 clients and ticks; this node decodes
// and merges the deltas. Reported per interval, and per entry: ns/entry
// and allocs/entry are the cost of one entry synced, over the entries
// merged or ignored. Sub-benchmark sync times exactly the sync path: the
// peer's Tick (collect the changes, encode) and this node's Receive
// (decode, merge); the checks that make the changes run with the timer
// stopped, being the check path's cost, not sync's. Sub-benchmark all
// times the checks too, as this benchmark did before sync was measured
// alone, so that figures of then and now compare. Both also report
// tick-ns/entry and receive-ns/entry: the sending peer's Tick and this
// node's Receive apart.
//
//	go test ./cluster/engine -run '^$' -bench SyncerTickReceive -benchmem
func BenchmarkSyncerTickReceive(b *testing.B) {
	b.Run("sync", func(b *testing.B) { benchTickReceive(b, true) })
	b.Run("all", func(b *testing.B) { benchTickReceive(b, false) })
}

func benchTickReceive(b *testing.B, syncOnly bool) {
	const clients, perTick = 200_000, 1_000
	keys := make([]string, clients)
	for i := range keys {
		keys[i] = "client-" + strconv.Itoa(100000+i)
	}
	pc, ps, lim := benchSyncer(b, "n2", "n1")
	_, rs, _ := benchSyncer(b, "n1", "n2")
	rng := rand.New(rand.NewPCG(1, 2))
	var res [1]counter.Result
	now := t0
	checks := func() {
		for range perTick {
			_, _ = pc.Allow(now, keys[rng.IntN(clients)], 1, []counter.Limit{lim}, res[:])
		}
		now = now.Add(200 * time.Millisecond)
	}
	// The sync path's two halves, timed apart (two clock reads a tick).
	var ticking, receiving time.Duration
	sync := func() {
		t0 := time.Now()
		out, err := ps.Tick(now)
		if err != nil {
			b.Fatal(err)
		}
		t1 := time.Now()
		for _, m := range msgsTo(out, "n1") {
			if _, err := rs.Receive(now, m); err != nil {
				b.Fatal(err)
			}
		}
		ticking, receiving = ticking+t1.Sub(t0), receiving+time.Since(t1)
	}
	// Warm up a window's worth of state on both sides.
	for range 300 {
		checks()
		sync()
	}
	merged0 := rs.Stats.EntriesMerged.Load() + rs.Stats.EntriesIgnored.Load()
	ticking, receiving = 0, 0
	// Allocations counted as the timer runs (testing's allocs/op does the
	// same, but its figure is not readable here to divide by entries).
	var ms runtime.MemStats
	var allocs uint64
	count := func(sign int) {
		runtime.ReadMemStats(&ms)
		allocs += uint64(sign) * ms.Mallocs
	}
	b.ResetTimer()
	if syncOnly {
		for range b.N {
			b.StopTimer()
			checks()
			count(-1)
			b.StartTimer()
			sync()
			b.StopTimer()
			count(+1)
			b.StartTimer()
		}
	} else {
		count(-1)
		for range b.N {
			checks()
			sync()
		}
		b.StopTimer()
		count(+1)
	}
	b.StopTimer()
	entries := rs.Stats.EntriesMerged.Load() + rs.Stats.EntriesIgnored.Load() - merged0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
	b.ReportMetric(float64(allocs)/float64(entries), "allocs/entry")
	b.ReportMetric(float64(entries)/float64(b.N), "entries/tick")
	b.ReportMetric(float64(ticking.Nanoseconds())/float64(entries), "tick-ns/entry")
	b.ReportMetric(float64(receiving.Nanoseconds())/float64(entries), "receive-ns/entry")
}

// BenchmarkSyncerHot measures the anti-entropy scan of a node holding
// 200,000 clients of which none is hot: its cost is paid every second.
func BenchmarkSyncerHot(b *testing.B) {
	c, s, lim := benchSyncer(b, "n1", "n2")
	var res [1]counter.Result
	for i := range 200_000 {
		_, _ = c.Allow(t0, "client-"+strconv.Itoa(100000+i), 1, []counter.Limit{lim}, res[:])
	}
	b.ResetTimer()
	for range b.N {
		if es := c.AppendHot(nil, t0.Add(time.Second), s.cfg.Self); len(es) != 0 {
			b.Fatalf("%d hot entries, want none", len(es))
		}
	}
}
