package clustersim

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// rule is the name of the one rule a simulated node enforces (and of its
// policy).
const rule = "replay"

// EpochMs is true time 0 of a simulation whose times are relative (before
// realTimeMs), as Unix ms: 2026-01-01 00:00 UTC. Slice starts and send
// times are then as large as a real cluster's, and msgpack encodes them in
// as many bytes (9, where instants near 1970 would take 3 to 5). It is a
// multiple of every interval used.
const EpochMs = 1_767_225_600_000

// realTimeMs separates relative trace times from Unix timestamps: 1e12 ms
// is 2001-09-09, before any log a user replays.
const realTimeMs = 1_000_000_000_000

// Node is one simulated node: its clock offset and limiterd's real
// components.
type Node struct {
	name    string
	offset  int64 // ms added to true time to read this node's clock
	phase   int64 // true time of its ticks modulo the sync interval, in [0, interval)
	c       *counter.Counter
	lim     *limiter.Limiter
	limit   counter.Limit // the rule's limit on c
	dec     *decision.Decider
	res     decision.Result // Decide's destination, reused
	eng     *engine.Engine
	changed bool  // counted a request since its last Tick
	ticking bool  // has a tick scheduled (from Start until Finish)
	down    bool  // stopped (Stop) and not restarted yet: sends and receives nothing
	left    bool  // down by Leave: its peers took it down
	since   int64 // true time it started (joined), for Ready
	// unseen[j]: node j restarted after leaving and this node has not
	// seen it back yet (Config.SeeAfter), so sends it nothing.
	unseen   []bool
	nextTick int64 // true time of its next tick; meaningful while ticking
	times    Times // with Config.Timed

	// The work of one instant's batch (network.go).
	out      []engine.Outbound
	produced uint64
}

// Name is the node's name, "node-i".
func (n *Node) Name() string { return n.name }

// Counter is the node's counter.
func (n *Node) Counter() *counter.Counter { return n.c }

// Limiter is the node's limiter; its rules may be replaced (SetRules).
func (n *Node) Limiter() *limiter.Limiter { return n.lim }

// Limit is the configured limit as registered on the node's counter: it
// shares the counts of the rule the limiter enforces.
func (n *Node) Limit() counter.Limit { return n.limit }

// Engine is the node's engine.
func (n *Node) Engine() *engine.Engine { return n.eng }

// Times is the time the node spent in its Engine (Config.Timed).
func (n *Node) Times() Times { return n.times }

// Stats is the traffic a simulation produced.
type Stats struct {
	Produced int   // delta messages Tick encoded ("counter touches": one sync write to the peers)
	Messages int   // copies sent, every purpose (deltas, anti-entropy, heartbeats, hellos, catch-ups), twice with Dup
	Bytes    int64 // bytes of those copies
	// Sent is Messages and Bytes by purpose (index: engine.Purpose).
	Sent     [engine.PurposeSilence + 1]Traffic
	Requests int   // requests checked
	FirstAt  int64 // true time of the first request
	LastAt   int64 // true time of the last request

	// How the checks were decided (limiter.Decision.Decided): on the node
	// alone, by the key's coordinator (this node or another), or by the
	// budget because no answer came in time.
	Here, Coordinator, Fallback int
	// Leased counts, of Here, the checks decided on a lease from the
	// key's coordinator (past the node's blind share).
	Leased int
	// SelfCoordinated counts the checks at the margin on the key's
	// coordinator itself, decided without a message.
	SelfCoordinated int
	// Orphans counts the grants whose answer was lost and whose asker's
	// fallback denied: over-counted at the coordinator for a while.
	Orphans int
	// Coordination traffic, apart from the sync figures above: copies
	// sent (lost ones included) and their bytes.
	Asks, Answers, Releases int
	// Granted counts the asks whose answer, in time, allowed the check.
	Granted                             int
	AskBytes, AnswerBytes, ReleaseBytes int64
}

// Traffic is copies sent (lost and cut ones included) and their bytes.
type Traffic struct {
	Messages int
	Bytes    int64
}

// SyncDurationMs is the time sync figures are averaged over: the whole
// sync intervals that the requests span, from the start of the first
// request's to the end of the last request's; 0 without requests.
func (st Stats) SyncDurationMs(syncMs int64) int64 {
	if st.Requests == 0 {
		return 0
	}
	return (floorDiv(st.LastAt, syncMs)+1)*syncMs - floorDiv(st.FirstAt, syncMs)*syncMs
}

// Cluster runs the nodes on one simulated clock (true time, ms). Events
// at one instant run in a fixed order: ticks (in node order), then
// deliveries (in send order), then the request. It is single-use. Its
// methods are not safe for concurrent use: one goroutine drives it, and
// with Config.Workers it spreads one instant's ticks and deliveries over
// goroutines of its own, which end before the method returns.
type Cluster struct {
	cfg     Config
	nodes   []*Node
	queue   deliveryQueue
	seq     uint64
	syncMs  int64
	latMs   int64
	started bool
	// epochMs is added to true time on every node's clock: EpochMs when
	// the first instant is before realTimeMs (relative times, as the
	// patterns limitsim generates), so that slice starts and send times
	// encode in as many bytes as a real cluster's; 0 for real timestamps.
	epochMs int64
	// now is the true time of the check being decided: the Deciders'
	// clock.
	now int64
	// lostGrant is the grant the current check's ask left at its
	// coordinator without an answer reaching the asker (valid while
	// lostGrant.hits > 0); orphans are those the asker did not count (its
	// fallback denied): the one over-count the coordinated design has,
	// until the release arrives or the grant expires. The simulator keeps
	// them as an oracle only, to tell that over-count from a fault.
	lostGrant orphan
	orphans   []orphan
	stats     Stats
	// firstTick is the earliest nextTick of a ticking node, valid while
	// firstTickOK: advance runs before every check, and scanning every
	// node each time would make a check cost O(N) at 1,000 nodes. Any
	// change that may raise it (a tick rescheduled, ticking stopped)
	// clears firstTickOK; a change that lowers a node's tick lowers it.
	firstTick   int64
	firstTickOK bool
	rec         *recorder               // Config.Record
	rng         *rand.Rand              // the network's randomness: loss and reordering
	cut         func(from, to int) bool // a partition: nil, nothing cut
	byName      map[string]int
	sights      []sight // peers seeing a restarted node back, by time (Config.SeeAfter)

	// Buffers of one instant's batch (network.go).
	due                []int
	batch              []delivery
	results            []received
	first, next, order []int
}

// orphan is a grant that its coordinator counts and its asker did not: it
// counts hits of key until true time until.
type orphan struct {
	key   string
	hits  int64
	until int64
}

// New builds the nodes. Node i is named "node-i".
func New(cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Cluster{cfg: cfg, syncMs: cfg.Sync.Milliseconds(), latMs: cfg.Latency.Milliseconds(),
		rng: rand.New(rand.NewPCG(cfg.NetSeed, 0x6e6574)), byName: make(map[string]int)}
	for i := range cfg.Nodes {
		n, err := s.newNode(i, coordinator{s, i}, 0)
		if err != nil {
			return nil, err
		}
		s.byName[n.name] = i
		s.nodes = append(s.nodes, n)
	}
	if cfg.Record != nil {
		s.rec = &recorder{node: cfg.RecordNode, w: bufio.NewWriterSize(cfg.Record, 1<<16)}
	}
	return s, nil
}

// newNode builds node i of s's configuration, asking its coordinators
// through coord; its engine's ask ids start above firstAsk
// (engine.Config.FirstAskID).
func (s *Cluster) newNode(i int, coord decision.Coordinator, firstAsk uint64) (*Node, error) {
	cfg := s.cfg
	rs := &limiter.RuleSet{Source: "limitsim", Rules: []limiter.Rule{{
		Name:   rule,
		Limits: []limiter.LimitSpec{{Policy: rule, Limit: cfg.Limit, Window: cfg.Window, Slices: cfg.Slices}},
	}}}
	name := "node-" + strconv.Itoa(i)
	c, err := cfg.newCounter(name)
	if err != nil {
		return nil, err
	}
	lim, err := limiter.New(c, rs)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	n := &Node{name: name, offset: cfg.skewOffset(i), c: c, lim: lim}
	if n.limit, err = c.Limit(rule, cfg.Limit, cfg.Window, cfg.Slices); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	// limiterd's engine configuration for UDP (cluster.DefaultConfig):
	// the message sizes, anti-entropy and catch-up are limiterd's.
	ec := engine.DefaultConfig(name)
	if cfg.EditEngine != nil {
		cfg.EditEngine(&ec)
	}
	ec.FirstAskID = max(ec.FirstAskID, firstAsk)
	if n.eng, err = engine.New(c, ec); err != nil {
		return nil, err
	}
	// The frontends' decision layer, on this node's clock at the
	// instant being simulated; its metrics go to a registry of its own.
	dc := decision.Config{Now: func() time.Time { return s.clock(n, s.now) }, Coordinator: coord, Deadline: cfg.Deadline}
	if n.dec, err = decision.New(dc, lim, prometheus.NewRegistry(), nil); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	n.phase = int64(i) * cfg.Stagger.Milliseconds() / int64(cfg.Nodes)
	if cfg.ClockTicks {
		// Node i's clock reads true time + offset: it reads a multiple
		// of the interval at true times -offset modulo the interval.
		n.phase = n.phase - n.offset - floorDiv(n.phase-n.offset, s.syncMs)*s.syncMs
	}
	return n, nil
}

// Config is the configuration the cluster was built with.
func (s *Cluster) Config() Config { return s.cfg }

// Len is the number of nodes.
func (s *Cluster) Len() int { return len(s.nodes) }

// Node returns node i.
func (s *Cluster) Node(i int) *Node { return s.nodes[i] }

// Stats is the traffic and the decisions so far.
func (s *Cluster) Stats() Stats { return s.stats }

// SetCut partitions the network: from now on every copy sent from node
// from to node to for which cut returns true is lost (counted as sent),
// and so are asks, answers and releases between them; nil heals it.
func (s *Cluster) SetCut(cut func(from, to int) bool) { s.cut = cut }

// Clock is node i's clock at true time at (ms).
func (s *Cluster) Clock(i int, at int64) time.Time { return s.clock(s.nodes[i], at) }

func (s *Cluster) clock(n *Node, at int64) time.Time {
	return time.UnixMilli(s.epochMs + at + n.offset)
}

// OrphanHits is the hits of key that grants without an answer count at
// true time at: what a coordinator may over-count then (see Stats.Orphans).
func (s *Cluster) OrphanHits(key string, at int64) int64 {
	var h int64
	for _, o := range s.orphans {
		if o.key == key && o.until > at {
			h += o.hits
		}
	}
	return h
}

// Start lets the nodes find each other just before true time at and ticks
// them from the first tick instant at or after it: their hellos arrive,
// and are answered with empty state, before anything is counted (a reply
// sent after a request would carry its count, ahead of the tick). Check
// calls it at the first request; a caller that counts on the nodes'
// counters directly calls it first. The clocks' epoch is chosen here (see
// EpochMs).
func (s *Cluster) Start(at int64) error {
	if s.started {
		return fmt.Errorf("clustersim: started twice")
	}
	s.started = true
	if at < realTimeMs {
		s.epochMs = EpochMs
	}
	hello := at - s.latMs - 1
	s.recordStart()
	for i, n := range s.nodes {
		for _, p := range s.nodes {
			s.recordPeerUp(i, hello, p.name)
			out, err := n.eng.PeerUp(s.clock(n, hello), p.name)
			if err != nil {
				return fmt.Errorf("node-%d: %w", i, err)
			}
			s.sendAll(hello, i, out)
		}
	}
	for _, n := range s.nodes {
		n.ticking, n.since = true, hello
		s.schedule(n, at)
	}
	s.firstTickOK = false
	return nil
}

// Ready runs every event due by true time at and reports whether node i
// then takes checks, as a load balancer that follows limiterd's /readyz
// sends them: it is up, and its engine is ready (engine.Engine.Ready:
// every live peer heard from since it started, or CatchUpWait passed).
func (s *Cluster) Ready(at int64, i int) (bool, error) {
	if err := s.advance(at, false); err != nil {
		return false, err
	}
	n := s.nodes[i]
	return !n.down && n.eng.Ready(s.clock(n, at), s.clock(n, n.since)) == nil, nil
}

// Check runs every event due by true time at, then decides one request of
// hits hits of key arriving at node at that instant (read on the node's
// clock), as a frontend does, through the node's decision.Decider: a
// check at the margin goes to the key's coordinator or, without an answer
// in time, to the budget. Instants must not decrease from call to call.
func (s *Cluster) Check(at int64, key string, node int, hits int64, d *limiter.Decision) error {
	if !s.started {
		if err := s.Start(at); err != nil {
			return err
		}
	}
	if s.stats.Requests == 0 {
		s.stats.FirstAt = at
	}
	if err := s.advance(at, false); err != nil {
		return err
	}
	n := s.nodes[node]
	if n.down {
		return fmt.Errorf("%w: %s at %d ms", ErrNodeDown, n.name, at)
	}
	s.stats.Requests++
	s.stats.LastAt = at
	s.now = at
	s.lostGrant = orphan{}
	req := s.cfg.request(key, hits)
	s.recordCheck(node, at, key, hits)
	if err := n.dec.Decide(context.Background(), req, &n.res); err != nil {
		return err // bad input (the key, the hits): the trace's fault, not the node's
	}
	s.recordDecision(node, n.res.Decision)
	if n.res.Internal {
		// Decide failed open: a fault of the code under test, never a
		// decision to measure.
		return fmt.Errorf("node-%d: the decision failed open (an internal error in the limiter or the coordination)", node)
	}
	*d = n.res.Decision
	if s.lostGrant.hits > 0 && !d.Allowed {
		s.orphans = slices.DeleteFunc(s.orphans, func(o orphan) bool { return o.until <= at })
		s.orphans = append(s.orphans, s.lostGrant)
		s.stats.Orphans++
	}
	switch d.Decided {
	case limiter.DecidedByCoordinator:
		s.stats.Coordinator++
	case limiter.DecidedInFallback:
		s.stats.Fallback++
	case limiter.DecidedOnLease:
		s.stats.Leased++
		s.stats.Here++
	default:
		s.stats.Here++
	}
	if (d.Allowed && !d.Untracked || d.Decided == limiter.DecidedInFallback) && !n.changed {
		// A tick with nothing to send changes no decision (see EveryTick),
		// so a node ticks after a change, after an ask it gave up (which
		// may fail its coordinator over, and the tick tells the peers:
		// engine, "Failover") or when anti-entropy is due: a sparse trace
		// does not iterate over every idle interval. Its next tick is the
		// first after at (one at at itself ran before the request).
		n.changed = true
		n.nextTick = min(n.nextTick, s.gridAtOrAfter(n, at+1))
		if n.ticking {
			s.firstTick = min(s.firstTick, n.nextTick)
		}
	}
	return nil
}

// Advance runs the ticks and deliveries due at or before true time t.
func (s *Cluster) Advance(t int64) error { return s.advance(t, false) }

// gridAtOrAfter is node n's first tick instant at or after true time t.
func (s *Cluster) gridAtOrAfter(n *Node, t int64) int64 {
	return -floorDiv(n.phase-t, s.syncMs)*s.syncMs + n.phase
}

// schedule sets node n's next tick after one at true time t (or from t,
// at Start): every interval with EveryTick, else the first tick where its
// engine runs anti-entropy, or after a change.
func (s *Cluster) schedule(n *Node, t int64) {
	if s.cfg.EveryTick {
		n.nextTick = s.gridAtOrAfter(n, t)
		return
	}
	ae := n.eng.NextAntiEntropy(s.clock(n, t)).UnixMilli() - s.epochMs - n.offset
	n.nextTick = s.gridAtOrAfter(n, max(t, ae))
	if n.changed {
		n.nextTick = min(n.nextTick, s.gridAtOrAfter(n, t))
	}
}

// advance runs ticks and deliveries due at or before true time t, or all
// of them when drain is set. At one instant ticks come first, in node
// order, then deliveries in send order. It terminates: Finish stops the
// ticks before it drains, and deliveries are finite (a reply is never
// answered by another).
func (s *Cluster) advance(t int64, drain bool) error {
	for {
		tick, ticking := s.earliestTick()
		tickDue := ticking && (drain || tick <= t)
		delDue := len(s.queue) > 0 && (drain || s.queue[0].at <= t)
		sightDue := len(s.sights) > 0 && (drain || s.sights[0].at <= t)
		switch {
		case sightDue && (!tickDue || s.sights[0].at <= tick) && (!delDue || s.sights[0].at <= s.queue[0].at):
			sg := s.sights[0]
			s.sights = s.sights[1:]
			if err := s.see(sg.at, sg.peer, sg.node); err != nil {
				return err
			}
		case tickDue && (!delDue || tick <= s.queue[0].at):
			if err := s.tickAt(tick); err != nil {
				return err
			}
		case delDue:
			if err := s.deliverAt(s.queue[0].at); err != nil {
				return err
			}
		default:
			return nil
		}
	}
}

// earliestTick returns the earliest tick of a ticking node, and whether
// any node ticks.
func (s *Cluster) earliestTick() (int64, bool) {
	if !s.firstTickOK {
		s.firstTick = math.MaxInt64
		for _, n := range s.nodes {
			if n.ticking {
				s.firstTick = min(s.firstTick, n.nextTick)
			}
		}
		s.firstTickOK = true
	}
	return s.firstTick, s.firstTick != math.MaxInt64
}

// Finish delivers everything still pending, so the traffic figures cover
// every change, and returns them. The cluster ticks no more afterwards.
func (s *Cluster) Finish() (Stats, error) {
	// Run the ticks up to one interval after the last request (every
	// change is sent), then stop ticking: drain would otherwise never end.
	if err := s.advance(s.stats.LastAt+s.syncMs, false); err != nil {
		return s.stats, err
	}
	for _, n := range s.nodes {
		if n.changed {
			return s.stats, fmt.Errorf("%s has changes after its last tick", n.name)
		}
		n.ticking = false
	}
	s.firstTickOK = false
	err := s.advance(0, true)
	return s.stats, errors.Join(err, s.finishRecord())
}

// MaxPeerOffset is the largest clock offset, in absolute value, that any
// node's Engine estimated for a peer from its last message (SentMs minus
// the receiver's clock: the offset an operator sees, latency included).
func (s *Cluster) MaxPeerOffset() time.Duration {
	var m time.Duration
	for _, n := range s.nodes {
		for _, p := range n.eng.Peers() {
			if !p.LastMessage.IsZero() {
				m = max(m, p.Offset, -p.Offset)
			}
		}
	}
	return m
}

// DropHeap returns the live heap that node i (its counter, limiter,
// decision layer and Engine) holds, measured as what a garbage collection
// frees once the node is dropped. The cluster is unusable afterwards, and
// nothing else may run meanwhile.
func (s *Cluster) DropHeap(i int) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s.nodes[i] = nil
	runtime.GC()
	runtime.ReadMemStats(&after)
	// The other nodes must stay reachable until now, or the collection
	// frees them too.
	runtime.KeepAlive(s)
	if after.HeapAlloc > before.HeapAlloc {
		return 0
	}
	return before.HeapAlloc - after.HeapAlloc
}
