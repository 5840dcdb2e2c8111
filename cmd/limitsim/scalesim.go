package main

import (
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// simEpochMs is true time 0 of the simulations (this scale one, and the
// cluster replays of relative traces), as unix ms: 2026-01-01 00:00 UTC.
// Slice starts and send times are then as large as a real cluster's, and msgpack encodes them in as many bytes (9, where instants
// near 1970 would take 3 to 5). It is a multiple of every interval used.
const simEpochMs = 1_767_225_600_000

// scaleTime is the instant at true time t (ms since simEpochMs).
func scaleTime(t int64) time.Time { return time.UnixMilli(simEpochMs + t) }

// scaleRun is one cluster size of limitsim scale: N nodes, each with
// limiterd's real counter (cluster mode, counter.DefaultClusterConfig),
// limiter and engine.Engine (engine.DefaultConfig: limiterd's
// datagram size and anti-entropy interval for UDP), the load spread over
// them. Every sync interval every node ticks its engine (which sends the
// deltas, and when due its hot keys or a heartbeat), and every message
// goes to every peer at the same instant.
//
// During the warm-up only node 0 receives: the other nodes' merges cannot
// change what they send (a node sends only the slices it counted itself)
// nor, for keys far from their limit, what they admit, and skipping them
// takes the warm-up from N² to N merges per change
// (TestScaleWarmupOnlyNode0Receives checks that the figures are the same).
// During the measurement every node receives every message.
type scaleRun struct {
	cfg      scaleConfig
	n        int
	rate     int64 // checks per second, all nodes together
	nodes    []*scaleNode
	syncMs   int64
	fullWarm bool // every node receives during the warm-up too (tests)
	all      bool // every node receives (else node 0 only)
	measure  bool // past the warm-up: traffic and time are counted
	traffic  scaleTraffic
	keyNames []string
	clients  []*scaleClient
}

// scaleNode is one node and what it did during the measurement.
type scaleNode struct {
	c   *counter.Counter
	lim *limiter.Limiter
	eng *engine.Engine
	out []engine.Outbound // the messages of the current round
	in  []engine.Outbound // what this node's receives answered (hellos' replies, catch-ups)
	// Time inside the Engine during the measurement: Tick on ticks
	// without anti-entropy (collecting the changes and encoding them), Tick
	// on the ticks with it (the same, plus scanning for hot keys and
	// encoding them, or the heartbeat) and Receive (decoding and merging).
	tick, hot, receive syncTime
	start, end         syncCounts
}

// syncCounts is a snapshot of an Engine's counters.
type syncCounts struct {
	msgs, bytes, merged, ignored uint64
}

func countsOf(s *engine.Engine) syncCounts {
	return syncCounts{
		msgs: s.Stats.MessagesReceived.Load(), bytes: s.Stats.BytesReceived.Load(),
		merged: s.Stats.EntriesMerged.Load(), ignored: s.Stats.EntriesIgnored.Load(),
	}
}

// scaleTraffic is what all nodes sent during the measurement. Every copy
// to every peer counts: one message to N-1 peers is N-1 messages sent.
type scaleTraffic struct {
	deltaMsgs, deltaBytes int64 // Tick's deltas
	aeMsgs, aeBytes       int64 // Tick's anti-entropy: the hot keys, or the heartbeat when none is
	ctlMsgs, ctlBytes     int64 // hellos, their replies, catch-ups (none once the nodes know each other)
	checks                int64 // requests checked, all keys
	bgRejected            int64 // background requests rejected, warm-up included (expected: none)
}

// scaleClient is an extra client with its own arrival pattern (tests):
// request i at at[i] on node(i), after the background requests of that
// millisecond, its decisions tallied against the truth.
type scaleClient struct {
	key  string
	at   []int64
	node func(int) int
	next int
	ty   *tally
}

// newScaleRun builds n nodes named "node-0", "node-1"... with limiterd's
// defaults: counter.DefaultConfig, counter.DefaultClusterConfig (budget
// on) and engine.DefaultConfig; every node sees every other up.
func newScaleRun(cfg scaleConfig, n int) (*scaleRun, error) {
	rs := &limiter.RuleSet{Source: "limitsim", Rules: []limiter.Rule{{
		Name:   simRule,
		Limits: []limiter.LimitSpec{{Policy: simRule, Limit: seedLimit, Window: seedWindowMs * time.Millisecond, Slices: seedSlices}},
	}}}
	r := &scaleRun{cfg: cfg, n: n, rate: cfg.totalRate(n)}
	for i := range n {
		name := "node-" + strconv.Itoa(i)
		c, err := counter.New(counter.DefaultConfig())
		if err != nil {
			return nil, err
		}
		cc := counter.DefaultClusterConfig(name)
		cc.Coordinated = false // the budget's design: every check decided where it arrives
		cc.Nodes = n
		if err := c.SetCluster(cc); err != nil {
			return nil, err
		}
		r.syncMs = cc.SyncInterval.Milliseconds()
		lim, err := limiter.New(c, rs)
		if err != nil {
			return nil, err
		}
		eng, err := engine.New(c, engine.DefaultConfig(name))
		if err != nil {
			return nil, err
		}
		r.nodes = append(r.nodes, &scaleNode{c: c, lim: lim, eng: eng})
	}
	// The nodes find each other at true time 0: hellos, which node 0 (or
	// every node, with fullWarm) receives in the first round; nothing is
	// counted yet, so the replies and catch-ups are empty.
	for _, nd := range r.nodes {
		for j := range n {
			out, err := nd.eng.PeerUp(scaleTime(0), "node-"+strconv.Itoa(j))
			if err != nil {
				return nil, err
			}
			nd.in = append(nd.in, out...)
		}
	}
	r.keyNames = make([]string, cfg.keys)
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
// seconds apart (HS1, HS2: 12 requests a minute).
func (r *scaleRun) run() error {
	warm := r.cfg.warmup.Milliseconds()
	end := warm + r.cfg.seconds*1000
	keys := newLCG(r.cfg.seed)
	r.all = r.fullWarm
	if warm == 0 {
		r.startMeasuring()
	}
	var d limiter.Decision
	i := int64(0)
	for t := int64(0); ; t++ {
		if t > 0 && t%r.syncMs == 0 {
			// The tick at the end of the warm-up sends the warm-up's last
			// changes: it belongs to the warm-up.
			if err := r.sync(t); err != nil {
				return err
			}
			if t == warm {
				r.startMeasuring()
			}
		}
		if t == end {
			r.stopMeasuring()
			return nil
		}
		for ; i*1000/r.rate == t; i++ {
			k := r.keyNames[int(keys.Next()*float64(len(r.keyNames)))]
			if err := r.nodes[int(i%int64(r.n))].lim.Check(scaleTime(t), limiter.Request{Key: k, Hits: 1}, &d); err != nil {
				return err
			}
			if r.measure {
				r.traffic.checks++
			}
			if !d.Allowed {
				r.traffic.bgRejected++
			}
		}
		for _, c := range r.clients {
			for ; c.next < len(c.at) && c.at[c.next] == t; c.next++ {
				if err := r.nodes[c.node(c.next)].lim.Check(scaleTime(t), limiter.Request{Key: c.key, Hits: 1}, &d); err != nil {
					return err
				}
				c.ty.record(t, c.key, d.Allowed, d.Untracked)
				if r.measure {
					r.traffic.checks++
				}
			}
		}
	}
}

// sync runs the sync work due at true time t, a multiple of the sync
// interval: every node ticks its engine and the messages reach every peer
// (or node 0 alone during a warm-up that is not full). All nodes tick at
// the same instant and messages take no time, as in limitsim burst's base
// cluster.
func (r *scaleRun) sync(t int64) error {
	now := scaleTime(t)
	err := r.eachNode(r.n, func(i int) error {
		nd := r.nodes[i]
		w := r.startWatch()
		out, err := nd.eng.Tick(now)
		nd.out = append(nd.in, out...)
		nd.in = nil
		ae := false
		for _, o := range out {
			ae = ae || o.Purpose == engine.PurposeAntiEntropy || o.Purpose == engine.PurposeHeartbeat
		}
		if ae {
			w.stop(&nd.hot)
		} else {
			w.stop(&nd.tick)
		}
		if err != nil {
			return fmt.Errorf("node-%d: %w", i, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for {
		if err := r.round(now); err != nil {
			return err
		}
		more := false
		for _, nd := range r.nodes {
			nd.out, nd.in = nd.in, nil
			more = more || len(nd.out) > 0
		}
		if !more {
			return nil
		}
	}
}

// round counts each node's outbound messages, each copy to each peer, into
// the traffic while measuring, and delivers them: to every node, or to
// node 0 alone during a warm-up that is not full. Receivers take the
// messages in sender order; what their receives answer waits in in.
func (r *scaleRun) round(now time.Time) error {
	if r.measure {
		for _, nd := range r.nodes {
			for _, o := range nd.out {
				msgs, bytes := &r.traffic.ctlMsgs, &r.traffic.ctlBytes
				switch o.Purpose {
				case engine.PurposeDelta:
					msgs, bytes = &r.traffic.deltaMsgs, &r.traffic.deltaBytes
				case engine.PurposeAntiEntropy, engine.PurposeHeartbeat:
					msgs, bytes = &r.traffic.aeMsgs, &r.traffic.aeBytes
				}
				for _, m := range o.Msgs {
					*msgs++
					*bytes += int64(len(m))
				}
			}
		}
	}
	receivers := 1
	if r.all {
		receivers = r.n
	}
	return r.eachNode(receivers, func(j int) error {
		nd := r.nodes[j]
		name := "node-" + strconv.Itoa(j)
		w := r.startWatch()
		for i, from := range r.nodes {
			if i == j {
				continue
			}
			for _, o := range from.out {
				if o.To != name {
					continue
				}
				for _, m := range o.Msgs {
					rcv, err := nd.eng.Receive(now, m)
					back := rcv.Out
					if errors.Is(err, engine.ErrReplay) {
						continue // a hello answered already
					}
					if err != nil {
						return fmt.Errorf("node-%d receiving from node-%d: %w", j, i, err)
					}
					nd.in = append(nd.in, back...)
				}
			}
		}
		w.stop(&nd.receive)
		return nil
	})
}

// syncTime is time spent in the Engine, in ns: wall clock, and CPU time
// of the thread that made the calls (cpuOK false where the platform does
// not tell). Wall-clock time also counts the time the thread waited for a
// core, which on a shared machine can be most of it; CPU time does not.
type syncTime struct {
	wall, cpu int64
	cpuOK     bool
}

// stopwatch measures one stretch of Engine calls; the zero value, which
// startWatch returns outside the measurement, measures nothing.
type stopwatch struct {
	on    bool
	wall  time.Time
	cpu   int64
	cpuOK bool
}

func (r *scaleRun) startWatch() stopwatch {
	if !r.measure {
		return stopwatch{}
	}
	cpu, ok := threadCPU()
	return stopwatch{on: true, wall: time.Now(), cpu: cpu, cpuOK: ok}
}

// stop adds the time since startWatch to t.
func (w stopwatch) stop(t *syncTime) {
	if !w.on {
		return
	}
	t.wall += time.Since(w.wall).Nanoseconds()
	cpu, ok := threadCPU()
	t.cpuOK = ok && w.cpuOK
	t.cpu += cpu - w.cpu
}

// eachNode runs f for the nodes 0..n-1, spread over GOMAXPROCS
// goroutines: worker k takes nodes k, k+W, k+2W... Each node is touched
// by one goroutine only, in the same order as sequentially, so the
// results do not depend on scheduling; only the wall-clock times do.
func (r *scaleRun) eachNode(n int, f func(i int) error) error {
	w := min(runtime.GOMAXPROCS(0), n)
	if w == 1 {
		// Stay on one OS thread, so that its CPU time measures the calls.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		for i := range n {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, w)
	var wg sync.WaitGroup
	for k := range w {
		wg.Go(func() {
			// Stay on one OS thread, so that its CPU time measures the
			// calls; unlocked before the goroutine ends, or the runtime
			// would end the thread with it.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			for i := k; i < n; i += w {
				if err := f(i); err != nil {
					errs[k] = err
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// startMeasuring begins counting traffic and time; from now on every node
// receives.
func (r *scaleRun) startMeasuring() {
	r.measure, r.all = true, true
	for _, nd := range r.nodes {
		nd.start = countsOf(nd.eng)
	}
}

func (r *scaleRun) stopMeasuring() {
	r.measure = false
	for _, nd := range r.nodes {
		nd.end = countsOf(nd.eng)
	}
}

// received returns what node i received during the measurement:
// messages, bytes, entries decoded and entries merged (that raised a
// count or added a slice).
func (nd *scaleNode) received() (msgs, bytes, entries, merged int64) {
	s, e := nd.start, nd.end
	merged = int64(e.merged - s.merged)
	return int64(e.msgs - s.msgs), int64(e.bytes - s.bytes), merged + int64(e.ignored-s.ignored), merged
}

// state returns what node i holds at true time t: the (limit, key) pairs
// it tracks and the live slices of all origins (its own and its peers').
func (r *scaleRun) state(i int, t int64) (pairs, slices int64) {
	nd := r.nodes[i]
	now := scaleTime(t)
	var buf []counter.Entry
	for j := range r.n {
		buf = nd.c.AppendState(buf[:0], now, "node-"+strconv.Itoa(j), 0)
		slices += int64(len(buf))
	}
	return int64(nd.c.Stats().Keys), slices
}

// dropHeap returns the live heap that node i (its counter, limiter and
// Engine) holds, measured as what a garbage collection frees once the
// node is dropped; the node is unusable afterwards. Nothing else may run.
func (r *scaleRun) dropHeap(i int) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r.nodes[i] = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The other nodes must stay reachable until now, or the collection
	// frees them too.
	runtime.KeepAlive(r)
	if after.HeapAlloc > before.HeapAlloc {
		return 0
	}
	return before.HeapAlloc - after.HeapAlloc
}
