package engine

import (
	"math/rand/v2"
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
// and merges the deltas. Reported per interval; ns/entry is the cost of
// one merged entry, encode and decode included.
//
//	go test ./cluster -run '^$' -bench SyncerTickReceive -benchmem
func BenchmarkSyncerTickReceive(b *testing.B) {
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
	// Warm up a window's worth of state on both sides.
	step := func() [][]byte {
		for range perTick {
			_, _ = pc.Allow(now, keys[rng.IntN(clients)], 1, []counter.Limit{lim}, res[:])
		}
		now = now.Add(200 * time.Millisecond)
		out, err := ps.Tick(now)
		if err != nil {
			b.Fatal(err)
		}
		return msgsTo(out, "n1")
	}
	for range 300 {
		for _, m := range step() {
			if _, err := rs.Receive(now, m); err != nil {
				b.Fatal(err)
			}
		}
	}
	merged0 := rs.Stats.EntriesMerged.Load() + rs.Stats.EntriesIgnored.Load()
	b.ResetTimer()
	for range b.N {
		for _, m := range step() {
			if _, err := rs.Receive(now, m); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.StopTimer()
	entries := rs.Stats.EntriesMerged.Load() + rs.Stats.EntriesIgnored.Load() - merged0
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(entries), "ns/entry")
	b.ReportMetric(float64(entries)/float64(b.N), "entries/tick")
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
		if _, err := s.hot(t0.Add(time.Second)); err != nil {
			b.Fatal(err)
		}
	}
}
