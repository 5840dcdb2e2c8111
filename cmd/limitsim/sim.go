package main

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// simRule is the name of the one rule a simulated node enforces.
const simRule = "replay"

// simConfig describes a simulated cluster: N nodes, each running limiterd's
// real counter (in cluster mode), limiter, decision.Decider (the policy at
// the margin: the key's coordinator decides, or the budget after the
// deadline) and engine.Engine (the sync policy: deltas, anti-entropy,
// heartbeats, hellos, catch-ups; the asks, answers and releases of the
// coordination), joined by a simulated network on a simulated clock. The
// simulator owns only the network (latency, duplication, loss, reordering)
// and the clocks.
type simConfig struct {
	nodes  int
	limit  int64
	window time.Duration
	slices int
	// sync is the sync interval (the counters'): nodes call Engine.Tick at
	// its multiples (true time, or each node's clock with clockTicks).
	sync time.Duration
	// latency is how long a message takes to reach a peer.
	latency time.Duration
	// skew spreads the nodes' clocks: node i reads true time plus
	// skewOffset(i), evenly spread over [-skew, +skew].
	skew time.Duration
	// uncoordinated turns off counter.ClusterConfig.Coordinated (on in
	// production): every check is decided on the node it reaches, past its
	// share by the budget alone. The design limiterd had before the
	// coordinator, kept for comparison.
	uncoordinated bool
	// deadline is decision.Config.Deadline, how long a node waits for its
	// coordinator's answer (0: decision.DefaultDeadline). An ask whose round
	// trip, twice the latency, exceeds it gets no answer in time.
	deadline time.Duration
	budget   bool    // counter.ClusterConfig.Budget
	floor    float64 // counter.ClusterConfig.BudgetFloor
	grace    float64 // counter.ClusterConfig.DeliveryGrace
	// stagger spreads the nodes' ticks: node i ticks i x stagger / N
	// (whole ms) after each multiple of sync. 0 ticks all nodes at once, as
	// the seed's model does; stagger = sync spreads them evenly over the
	// interval, as independent timers on real nodes end up.
	stagger time.Duration
	// dup delivers every message a second time, two sync intervals and one
	// millisecond after the first copy: after newer messages from the same
	// sender, so merges see duplicates out of order.
	dup bool
	// loss drops each copy of a message with this probability (0 to
	// 1), drawn from netSeed: lost copies are counted as sent. Asks,
	// answers and releases are lost with the same probability.
	loss float64
	// reorder delays each copy by a further 0 to reorder (whole ms,
	// uniform, drawn from netSeed), so that copies overtake each other.
	reorder time.Duration
	// netSeed seeds loss and reorder.
	netSeed uint64
	// clockTicks ticks each node at the multiples of the sync interval on
	// its own clock, as limiterd's nodes do (cluster/node.go), rather than
	// at the same true instant: with skew, the ticks are then as far apart
	// as the clocks (modulo the interval). stagger adds to it.
	clockTicks bool
	// stated makes every check state its limit (limiter.Request.Limit, as
	// Envoy's overrides and /check's limit and window do) instead of
	// naming the rule: the same limit, window and slices, counted apart
	// from the rule, each node registering the pair at its own first such
	// check and learning it from its peers before that.
	stated bool
	// everyTick ticks every node at every sync instant, as limiterd does,
	// instead of only at the ticks where its engine has work: after a
	// change, and where anti-entropy is due (Engine.NextAntiEntropy).
	// Slower on sparse traces, and the same decisions and messages
	// (TestIdleTicksChangeNothing): a tick without changes and without
	// anti-entropy sends nothing, the budget forgets the previous interval
	// DeliveryGrace after a tick, and a node that skipped a tick admitted
	// nothing in the interval before it.
	everyTick bool
}

// budgetSimConfig is defaultSimConfig without the coordinator: the
// per-node budget's design, which the seed tables, the charts and limitsim
// scale study.
func budgetSimConfig() simConfig {
	sc := defaultSimConfig()
	sc.uncoordinated = true
	return sc
}

// defaultSimConfig is the seed's cluster (HS3-HS5, HS7) with limiterd's
// defaults: coordinated at the margin, the default budget as the fallback.
func defaultSimConfig() simConfig {
	cc := counter.DefaultClusterConfig("x")
	return simConfig{
		nodes: 8, limit: seedLimit, window: seedWindowMs * time.Millisecond, slices: seedSlices,
		sync: cc.SyncInterval, budget: cc.Budget, floor: cc.BudgetFloor, grace: cc.DeliveryGrace,
	}
}

// errSimConfig wraps every invalid simulation setting.
var errSimConfig = errors.New("invalid cluster simulation")

// validate checks what the simulator itself needs; the counter and the
// limiter check the rest when the nodes are built.
func (sc simConfig) validate() error {
	switch {
	case sc.nodes < 1 || sc.nodes > 256:
		return fmt.Errorf("%w: nodes must be between 1 and 256, got %d", errSimConfig, sc.nodes)
	case sc.sync < time.Millisecond || sc.sync%time.Millisecond != 0:
		return fmt.Errorf("%w: sync interval must be a whole number of milliseconds, at least 1ms, got %v", errSimConfig, sc.sync)
	case sc.latency < 0 || sc.latency%time.Millisecond != 0:
		return fmt.Errorf("%w: latency must be a whole, non-negative number of milliseconds, got %v", errSimConfig, sc.latency)
	case sc.stagger < 0 || sc.stagger%time.Millisecond != 0 || sc.stagger > sc.sync:
		return fmt.Errorf("%w: stagger must be a whole number of milliseconds between 0 and the sync interval, got %v", errSimConfig, sc.stagger)
	case sc.skew < 0 || sc.skew%time.Millisecond != 0 || sc.skew > time.Hour:
		return fmt.Errorf("%w: skew must be a whole number of milliseconds between 0 and 1h, got %v", errSimConfig, sc.skew)
	case !(sc.loss >= 0 && sc.loss < 1):
		return fmt.Errorf("%w: loss must be a probability in [0, 1), got %v", errSimConfig, sc.loss)
	case sc.reorder < 0 || sc.reorder%time.Millisecond != 0:
		return fmt.Errorf("%w: reorder must be a whole, non-negative number of milliseconds, got %v", errSimConfig, sc.reorder)
	case sc.deadline < 0 || sc.deadline%time.Millisecond != 0:
		return fmt.Errorf("%w: deadline must be a whole, non-negative number of milliseconds, got %v", errSimConfig, sc.deadline)
	}
	return nil
}

// skewOffset is node i's clock offset in ms: -skew for node 0, +skew for
// the last node, evenly spread in between (rounded towards zero).
func (sc simConfig) skewOffset(i int) int64 {
	if sc.nodes == 1 {
		return 0
	}
	d := sc.skew.Milliseconds()
	return (-d*int64(sc.nodes-1) + 2*d*int64(i)) / int64(sc.nodes-1)
}

// simNode is one node: its clock offset and limiterd's real components.
type simNode struct {
	name     string
	offset   int64 // ms added to true time to read this node's clock
	phase    int64 // true time of its ticks modulo the sync interval, in [0, interval)
	c        *counter.Counter
	lim      *limiter.Limiter
	dec      *decision.Decider
	res      decision.Result // Decide's destination, reused
	eng      *engine.Engine
	changed  bool  // counted a request since its last Tick
	ticking  bool  // has a tick scheduled (from the first request until finish)
	nextTick int64 // true time of its next tick; meaningful while ticking
}

// simStats is the traffic a simulation produced.
type simStats struct {
	produced int   // delta messages Tick encoded ("counter touches": one sync write to the peers)
	messages int   // copies sent, every purpose (deltas, anti-entropy, heartbeats, hellos, catch-ups), twice with dup
	bytes    int64 // bytes of those copies
	requests int   // requests checked
	firstAt  int64 // true time of the first request
	lastAt   int64 // true time of the last request

	// How the checks were decided (limiter.Decision.Decided): on the node
	// alone, by the key's coordinator (this node or another), or by the
	// budget because no answer came in time.
	here, coordinator, fallback int
	// leased counts, of here, the checks decided on a lease from the
	// key's coordinator (past the node's blind share).
	leased int
	// selfCoordinated counts the checks at the margin on the key's
	// coordinator itself, decided without a message.
	selfCoordinated int
	// orphans counts the grants whose answer was lost and whose asker's
	// fallback denied: over-counted at the coordinator for a while.
	orphans int
	// Coordination traffic, apart from the sync figures above: copies
	// sent (lost ones included) and their bytes.
	asks, answers, releases             int
	askBytes, answerBytes, releaseBytes int64
}

// delivery is a message in flight.
type delivery struct {
	at  int64  // true time of arrival, ms
	seq uint64 // ties broken by send order: deterministic
	to  int
	msg []byte
}

// simNet is the simulated network's randomness: loss and reordering.
type simNet struct{ rng *rand.Rand }

type deliveryQueue []delivery

func (q deliveryQueue) Len() int { return len(q) }
func (q deliveryQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q deliveryQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *deliveryQueue) Push(x any)   { *q = append(*q, x.(delivery)) }
func (q *deliveryQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

// simCluster runs the nodes on one simulated clock (true time, ms). Events
// at one instant run in a fixed order: ticks, then deliveries (in send
// order), then the request. It is single-use and not safe for concurrent use.
type simCluster struct {
	cfg    simConfig
	nodes  []*simNode
	queue  deliveryQueue
	seq    uint64
	syncMs int64
	latMs  int64
	// epochMs is added to true time on every node's clock: simEpochMs
	// when the trace starts before realTimeMs (relative times, as the
	// patterns limitsim generates), so that slice starts and send times
	// encode in as many bytes as a real cluster's; 0 for a trace of real
	// timestamps.
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
	stats     simStats
	net       simNet
	byName    map[string]int
}

// orphan is a grant that its coordinator counts and its asker did not: it
// counts hits of key until true time until.
type orphan struct {
	key   string
	hits  int64
	until int64
}

// orphanHits is the hits of key that grants without an answer count at
// true time at: what a coordinator may over-count then (see orphan).
func (s *simCluster) orphanHits(key string, at int64) int64 {
	var h int64
	for _, o := range s.orphans {
		if o.key == key && o.until > at {
			h += o.hits
		}
	}
	return h
}

// realTimeMs separates relative trace times from Unix timestamps: 1e12 ms
// is 2001-09-09, before any log a user replays.
const realTimeMs = 1_000_000_000_000

// clock is node n's clock at true time at.
func (s *simCluster) clock(n *simNode, at int64) time.Time {
	return time.UnixMilli(s.epochMs + at + n.offset)
}

// counter returns a node's counter, limiterd's defaults with the
// simulation's cluster settings.
func (sc simConfig) counter(name string) (*counter.Counter, error) {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		return nil, err
	}
	cc := counter.DefaultClusterConfig(name)
	if sc.uncoordinated {
		cc.Coordinated = false
	}
	cc.Nodes, cc.SyncInterval, cc.Budget, cc.BudgetFloor, cc.DeliveryGrace = sc.nodes, sc.sync, sc.budget, sc.floor, sc.grace
	if err := c.SetCluster(cc); err != nil {
		return nil, fmt.Errorf("%w: %w", errSimConfig, err)
	}
	return c, nil
}

// shares is how the tolerance of the simulated limit is spent, as the
// nodes' counters spend it.
func (sc simConfig) shares() counter.Shares {
	c, err := sc.counter("node-0")
	if err != nil {
		return counter.Shares{} // validate refuses such a configuration first
	}
	return c.Shares(sc.limit)
}

// newSimCluster builds the nodes. Node i is named "node-i".
func newSimCluster(sc simConfig) (*simCluster, error) {
	if err := sc.validate(); err != nil {
		return nil, err
	}
	rs := &limiter.RuleSet{Source: "limitsim", Rules: []limiter.Rule{{
		Name:   simRule,
		Limits: []limiter.LimitSpec{{Policy: simRule, Limit: sc.limit, Window: sc.window, Slices: sc.slices}},
	}}}
	s := &simCluster{cfg: sc, syncMs: sc.sync.Milliseconds(), latMs: sc.latency.Milliseconds(),
		net: simNet{rand.New(rand.NewPCG(sc.netSeed, 0x6e6574))}, byName: make(map[string]int)}
	for i := range sc.nodes {
		name := fmt.Sprintf("node-%d", i)
		c, err := sc.counter(name)
		if err != nil {
			return nil, err
		}
		lim, err := limiter.New(c, rs)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errSimConfig, err)
		}
		n := &simNode{name: name, offset: sc.skewOffset(i), c: c, lim: lim}
		// limiterd's engine configuration for UDP (cluster.DefaultConfig):
		// the message sizes, anti-entropy and catch-up are limiterd's.
		ec := engine.DefaultConfig(name)
		if n.eng, err = engine.New(c, ec); err != nil {
			return nil, err
		}
		// The frontends' decision layer, on this node's clock at the
		// instant being simulated; its metrics go to a registry of its own.
		dc := decision.Config{Now: func() time.Time { return s.clock(n, s.now) }, Coordinator: simCoordinator{s, i}, Deadline: sc.deadline}
		if n.dec, err = decision.New(dc, lim, prometheus.NewRegistry(), nil); err != nil {
			return nil, fmt.Errorf("%w: %w", errSimConfig, err)
		}
		s.byName[name] = i
		n.phase = int64(i) * sc.stagger.Milliseconds() / int64(sc.nodes)
		if sc.clockTicks {
			// Node i's clock reads true time + offset: it reads a multiple
			// of the interval at true times -offset modulo the interval.
			n.phase = n.phase - n.offset - floorDiv(n.phase-n.offset, s.syncMs)*s.syncMs
		}
		s.nodes = append(s.nodes, n)
	}
	return s, nil
}

// check runs every event due by true time at, then decides one request of
// key arriving at node at that instant (read on the node's clock).
func (s *simCluster) check(at int64, key string, node int, d *limiter.Decision) error {
	return s.checkN(at, key, node, 1, d)
}

// checkN is check of a request of hits hits. It decides as a frontend
// does, through the node's decision.Decider, so a check at the margin goes
// to the key's coordinator (simCoordinator) or, without an answer in
// time, to the budget.
func (s *simCluster) checkN(at int64, key string, node int, hits int64, d *limiter.Decision) error {
	if s.stats.requests == 0 {
		s.stats.firstAt = at
		if at < realTimeMs {
			s.epochMs = simEpochMs
		}
		// The nodes find each other just before: their hellos arrive, and
		// are answered with empty state, before the first request is
		// counted (a reply sent after it would carry the counts, ahead of
		// the tick). They tick from the first tick instant at or after the
		// first request: ticks before it have nothing to do.
		hello := at - s.latMs - 1
		for i, n := range s.nodes {
			for _, p := range s.nodes {
				out, err := n.eng.PeerUp(s.clock(n, hello), p.name)
				if err != nil {
					return fmt.Errorf("node-%d: %w", i, err)
				}
				s.sendAll(hello, out)
			}
		}
		for _, n := range s.nodes {
			n.ticking = true
			s.schedule(n, at)
		}
	}
	if err := s.advance(at, false); err != nil {
		return err
	}
	s.stats.requests++
	s.stats.lastAt = at
	n := s.nodes[node]
	s.now = at
	s.lostGrant = orphan{}
	req := limiter.Request{Key: key, Hits: hits}
	if s.cfg.stated {
		req.Limit = &limiter.LimitSpec{Limit: s.cfg.limit, Window: s.cfg.window, Slices: s.cfg.slices}
	}
	if err := n.dec.Decide(context.Background(), req, &n.res); err != nil {
		return err // bad input (the key, the hits): the trace's fault, not the node's
	}
	if n.res.Internal {
		// Decide failed open: a fault of the code under test, never a
		// decision to measure.
		return fmt.Errorf("node-%d: the decision failed open (an internal error in the limiter or the coordination)", node)
	}
	*d = n.res.Decision
	if s.lostGrant.hits > 0 && !d.Allowed {
		s.orphans = slices.DeleteFunc(s.orphans, func(o orphan) bool { return o.until <= at })
		s.orphans = append(s.orphans, s.lostGrant)
		s.stats.orphans++
	}
	switch d.Decided {
	case limiter.DecidedByCoordinator:
		s.stats.coordinator++
	case limiter.DecidedInFallback:
		s.stats.fallback++
	case limiter.DecidedOnLease:
		s.stats.leased++
		s.stats.here++
	default:
		s.stats.here++
	}
	if d.Allowed && !d.Untracked && !n.changed {
		// A tick with nothing to send changes no decision (see everyTick),
		// so a node ticks after a change or when anti-entropy is due: a
		// sparse trace does not iterate over every idle interval. Its next
		// tick is the first after at (one at at itself ran before the
		// request).
		n.changed = true
		n.nextTick = min(n.nextTick, s.gridAtOrAfter(n, at+1))
	}
	return nil
}

// gridAtOrAfter is node n's first tick instant at or after true time t.
func (s *simCluster) gridAtOrAfter(n *simNode, t int64) int64 {
	return -floorDiv(n.phase-t, s.syncMs)*s.syncMs + n.phase
}

// schedule sets node n's next tick after one at true time t (or from t,
// at the first request): every interval with everyTick, else the first
// tick where its engine runs anti-entropy, or after a change.
func (s *simCluster) schedule(n *simNode, t int64) {
	if s.cfg.everyTick {
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
// order, then deliveries in send order. It terminates: finish stops the
// ticks before it drains, and deliveries are finite (a reply is never
// answered by another).
func (s *simCluster) advance(t int64, drain bool) error {
	for {
		tn := -1 // the ticking node with the earliest tick
		for i, n := range s.nodes {
			if n.ticking && (tn < 0 || n.nextTick < s.nodes[tn].nextTick) {
				tn = i
			}
		}
		tickDue := tn >= 0 && (drain || s.nodes[tn].nextTick <= t)
		delDue := len(s.queue) > 0 && (drain || s.queue[0].at <= t)
		switch {
		case tickDue && (!delDue || s.nodes[tn].nextTick <= s.queue[0].at):
			if err := s.tick(tn); err != nil {
				return err
			}
		case delDue:
			d := heap.Pop(&s.queue).(delivery)
			n := s.nodes[d.to]
			rcv, err := n.eng.Receive(s.clock(n, d.at), d.msg)
			out := rcv.Out
			if errors.Is(err, engine.ErrReplay) {
				// A duplicated hello (dup): the engine answers a hello once,
				// as it would a replayed one on a real network.
				continue
			}
			if err != nil {
				return fmt.Errorf("node-%d receiving at %d ms: %w", d.to, d.at, err)
			}
			s.sendAll(d.at, out)
		default:
			return nil
		}
	}
}

// tick runs node i's engine tick and sends what it returns.
func (s *simCluster) tick(i int) error {
	n := s.nodes[i]
	at := n.nextTick
	n.changed = false
	delta := n.eng.Stats.DeltaMessages.Load()
	out, err := n.eng.Tick(s.clock(n, at))
	if err != nil {
		return fmt.Errorf("node-%d tick at %d ms: %w", i, at, err)
	}
	s.stats.produced += int(n.eng.Stats.DeltaMessages.Load() - delta)
	s.sendAll(at, out)
	s.schedule(n, at+1)
	return nil
}

// sendAll puts the engine's messages, sent at true time at, on the
// network: each copy arrives after the latency (and a further reorder
// delay), unless lost; with dup a second copy follows.
func (s *simCluster) sendAll(at int64, out []engine.Outbound) {
	for _, o := range out {
		to := s.byName[o.To]
		for _, m := range o.Msgs {
			s.send(at+s.latMs, to, m)
			if s.cfg.dup {
				s.send(at+s.latMs+2*s.syncMs+1, to, m)
			}
		}
	}
}

func (s *simCluster) send(at int64, to int, msg []byte) {
	s.stats.messages++
	s.stats.bytes += int64(len(msg))
	s.post(at, to, msg)
}

// lost draws whether a copy of a message is lost.
func (s *simCluster) lost() bool {
	return s.cfg.loss > 0 && s.net.rng.Float64() < s.cfg.loss
}

// post puts one copy on the network, arriving at true time at (plus the
// reorder delay) unless lost, and returns its arrival time, or -1 when it
// is lost; it counts nothing.
func (s *simCluster) post(at int64, to int, msg []byte) int64 {
	if s.lost() {
		return -1
	}
	if r := s.cfg.reorder.Milliseconds(); r > 0 {
		at += s.net.rng.Int64N(r + 1)
	}
	s.seq++
	heap.Push(&s.queue, delivery{at: at, seq: s.seq, to: to, msg: msg})
	return at
}

// finish delivers everything still pending, so the traffic figures cover
// every change, and returns them.
func (s *simCluster) finish() (simStats, error) {
	// Run the ticks up to one interval after the last request (every
	// change is sent), then stop ticking: drain would otherwise never end.
	if err := s.advance(s.stats.lastAt+s.syncMs, false); err != nil {
		return s.stats, err
	}
	for _, n := range s.nodes {
		if n.changed {
			return s.stats, fmt.Errorf("%s has changes after its last tick", n.name)
		}
		n.ticking = false
	}
	err := s.advance(0, true)
	return s.stats, err
}

// maxPeerOffset is the largest clock offset, in absolute value, that any
// node's Engine estimated for a peer from its last message (SentMs minus
// the receiver's clock: the offset an operator sees, latency included).
func (s *simCluster) maxPeerOffset() time.Duration {
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
