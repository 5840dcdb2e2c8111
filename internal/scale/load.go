package scale

import (
	"runtime"
	"strconv"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// load is one cluster size of limitsim scale --mesh: N nodes of the simulated
// cluster (package internal/clustersim: limiterd's real counter in
// cluster mode, counter.DefaultClusterConfig without the coordinator,
// limiter, decision layer and engine.Engine with engine.DefaultConfig,
// limiterd's datagram size and anti-entropy interval for UDP), the load
// spread over them. Every sync interval every node ticks its engine (which
// sends the deltas, and when due its hot keys or a heartbeat), all at the
// same instant, and every message reaches every peer at once.
//
// During the warm-up only node 0 receives (a partition cuts every other
// node off): the other nodes' merges cannot change what they send (a node
// sends only the slices it counted itself) nor, for keys far from their
// limit, what they admit, and skipping them takes the warm-up from N² to
// N merges per change (TestScaleWarmupOnlyNode0Receives checks that the
// figures are the same). During the measurement every node receives every
// message.
type load struct {
	cfg      Config
	n        int
	rate     int64 // checks per second, all nodes together
	sim      *clustersim.Cluster
	fullWarm bool // every node receives during the warm-up too (tests)
	measure  bool // past the warm-up: traffic is counted
	traffic  Traffic
	keyNames []string
	clients  []*client
	// Snapshots at the start and the end of the measurement.
	stats0         clustersim.Stats
	start, end     []engineCounts
	times0, times1 []clustersim.Times
}

// engineCounts is a snapshot of an Engine's counters.
type engineCounts struct {
	msgs, bytes, merged, ignored uint64
}

func countsOf(e *engine.Engine) engineCounts {
	return engineCounts{
		msgs: e.Stats.MessagesReceived.Load(), bytes: e.Stats.BytesReceived.Load(),
		merged: e.Stats.EntriesMerged.Load(), ignored: e.Stats.EntriesIgnored.Load(),
	}
}

// Traffic is what all nodes sent during the measurement. Every copy to
// every peer counts: one message to N-1 peers is N-1 messages sent.
type Traffic struct {
	DeltaMsgs, DeltaBytes int64 // Tick's deltas
	AEMsgs, AEBytes       int64 // Tick's anti-entropy: the hot keys, or the heartbeat when none is
	CtlMsgs, CtlBytes     int64 // hellos, their replies, catch-ups (none once the nodes know each other)
	Checks                int64 // requests checked, all keys
	BgRejected            int64 // background requests rejected, warm-up included (expected: none)
}

// client is an extra client with its own arrival pattern (tests): request
// i at at[i] on node(i), after the background requests of that
// millisecond, its decisions tallied against the truth.
type client struct {
	key  string
	at   []int64
	node func(int) int
	next int
	ty   *clustersim.Tally
}

// newLoad builds n nodes named "node-0", "node-1"... with limiterd's
// defaults (the budget's design: every check decided where it arrives).
func newLoad(cfg Config, n int) (*load, error) {
	sc := clustersim.BudgetConfig()
	sc.Nodes, sc.EveryTick, sc.Timed = n, true, cfg.Cost
	sc.Workers = runtime.GOMAXPROCS(0)
	sim, err := clustersim.New(sc)
	if err != nil {
		return nil, err
	}
	r := &load{cfg: cfg, n: n, rate: cfg.TotalRate(n), sim: sim}
	r.keyNames = make([]string, cfg.Keys)
	for i := range r.keyNames {
		// As cluster's BenchmarkSyncTransport names them: 13 bytes each.
		r.keyNames[i] = "client-" + strconv.Itoa(100000+i)
	}
	return r, nil
}

// run drives the load for the warm-up and the measured seconds. The
// background request i is at floor(i*1000/rate) ms on node i mod N (each
// node takes rate/N a second) for the key the seed's LCG draws, uniformly
// among the keys: every key gets the same average traffic, keys/rate
// seconds apart (HS1, HS2: 12 requests a minute). The nodes find each
// other just before true time 0 (clustersim.Cluster.Start).
func (r *load) run() error {
	warm := r.cfg.Warmup.Milliseconds()
	end := warm + r.cfg.Seconds*1000
	keys := seed.NewLCG(r.cfg.Seed)
	if !r.fullWarm {
		r.sim.SetCut(func(_, to int) bool { return to != 0 })
	}
	if err := r.sim.Start(0); err != nil {
		return err
	}
	var d limiter.Decision
	i := int64(0)
	for t := int64(0); t < end; t++ {
		if t == warm {
			// The tick at the end of the warm-up sends the warm-up's last
			// changes: it belongs to the warm-up.
			if err := r.sim.Advance(t); err != nil {
				return err
			}
			r.startMeasuring()
		}
		for ; i*1000/r.rate == t; i++ {
			k := r.keyNames[int(keys.Next()*float64(len(r.keyNames)))]
			if err := r.sim.Check(t, k, int(i%int64(r.n)), 1, &d); err != nil {
				return err
			}
			if r.measure {
				r.traffic.Checks++
			}
			if !d.Allowed {
				r.traffic.BgRejected++
			}
		}
		for _, c := range r.clients {
			for ; c.next < len(c.at) && c.at[c.next] == t; c.next++ {
				if err := r.sim.Check(t, c.key, c.node(c.next), 1, &d); err != nil {
					return err
				}
				c.ty.Record(t, c.key, d.Allowed, d.Untracked)
				if r.measure {
					r.traffic.Checks++
				}
			}
		}
	}
	// The tick at the end belongs to the measurement.
	if err := r.sim.Advance(end); err != nil {
		return err
	}
	r.stopMeasuring()
	return nil
}

// startMeasuring begins counting traffic and time; from now on every node
// receives.
func (r *load) startMeasuring() {
	r.measure = true
	r.sim.SetCut(nil)
	r.stats0 = r.sim.Stats()
	r.start, r.times0 = r.snapshot()
}

func (r *load) stopMeasuring() {
	r.measure = false
	r.end, r.times1 = r.snapshot()
	st := r.sim.Stats()
	sent := func(p engine.Purpose) clustersim.Traffic {
		return clustersim.Traffic{
			Messages: st.Sent[p].Messages - r.stats0.Sent[p].Messages,
			Bytes:    st.Sent[p].Bytes - r.stats0.Sent[p].Bytes,
		}
	}
	delta, ae, hb := sent(engine.PurposeDelta), sent(engine.PurposeAntiEntropy), sent(engine.PurposeHeartbeat)
	t := &r.traffic
	t.DeltaMsgs, t.DeltaBytes = int64(delta.Messages), delta.Bytes
	t.AEMsgs, t.AEBytes = int64(ae.Messages+hb.Messages), ae.Bytes+hb.Bytes
	t.CtlMsgs = int64(st.Messages-r.stats0.Messages) - t.DeltaMsgs - t.AEMsgs
	t.CtlBytes = st.Bytes - r.stats0.Bytes - t.DeltaBytes - t.AEBytes
}

func (r *load) snapshot() ([]engineCounts, []clustersim.Times) {
	counts := make([]engineCounts, r.n)
	times := make([]clustersim.Times, r.n)
	for i := range r.n {
		nd := r.sim.Node(i)
		counts[i], times[i] = countsOf(nd.Engine()), nd.Times()
	}
	return counts, times
}

// received returns what node i received during the measurement:
// messages, bytes, entries decoded and entries merged (that raised a
// count or added a slice).
func (r *load) received(i int) (msgs, bytes, entries, merged int64) {
	s, e := r.start[i], r.end[i]
	merged = int64(e.merged - s.merged)
	return int64(e.msgs - s.msgs), int64(e.bytes - s.bytes), merged + int64(e.ignored-s.ignored), merged
}

// times returns the time node i spent in its Engine during the
// measurement.
func (r *load) times(i int) clustersim.Times {
	a, b := r.times0[i], r.times1[i]
	return clustersim.Times{Tick: b.Tick.Sub(a.Tick), Hot: b.Hot.Sub(a.Hot), Receive: b.Receive.Sub(a.Receive)}
}

// state returns what node i holds at true time t: the (limit, key) pairs
// it tracks and the live slices of all origins (its own and its peers').
func (r *load) state(i int, t int64) (pairs, slices int64) {
	c := r.sim.Node(i).Counter()
	now := r.sim.Clock(i, t)
	var buf []counter.Entry
	for j := range r.n {
		buf = c.AppendState(buf[:0], now, "node-"+strconv.Itoa(j), 0)
		slices += int64(len(buf))
	}
	return int64(c.Stats().Keys), slices
}
