package cluster

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
)

// ErrNotJoined is returned by Ready while a node given seeds has not yet
// joined any of them.
var ErrNotJoined = errors.New("cluster: not joined yet")

// ErrStopped is returned by Run on a node that was closed or already ran.
var ErrStopped = errors.New("cluster: node already stopped")

// deadMemberTTL is how long a dead or departed member stays in the member
// table (and in /cluster) before it is forgotten, which bounds the table
// when nodes come and go under new names.
const deadMemberTTL = time.Hour

// Node is one limiterd node's membership and sync: it keeps the memberlist
// cluster, sends its counter's changes to every live peer each
// SyncInterval, merges what peers send, and hands restarted or newly
// joined peers the state they need. Build it with New, run it with Run.
type Node struct {
	cfg     Config
	c       *counter.Counter
	log     *slog.Logger
	syncer  *Syncer
	ml      *memberlist.Memberlist
	dgram   int // largest message sent as a datagram
	started atomic.Bool
	closed  atomic.Bool

	nudge   chan struct{} // membership changed: reconcile senders (cap 1)
	joined  atomic.Bool
	joins   atomic.Int64 // join attempts, initial and rejoin
	killed  atomic.Bool  // tests: memberlist was shut down as by a crash
	leaving atomic.Bool  // published in the metadata just before leaving

	mu          sync.Mutex
	members     map[string]*member   // every member seen, with its last known state
	senders     map[string]*sender   // one per peer that is alive (or suspect)
	catchUp     map[string]bool      // peers that joined since the last reconcile
	greeted     map[string]bool      // peers this process sent a hello to
	lastCatchUp map[string]time.Time // when each peer was last sent a catch-up
	nodes       int                  // alive members, as last given to the counter
	wg          sync.WaitGroup       // the senders' goroutines

	dropped   atomic.Uint64 // messages not sent: full queue or send error
	decodeLog rateLog
	sendLog   rateLog
	events    *prometheus.CounterVec
}

// member is the last known state of one member.
type member struct {
	node  memberlist.Node // a copy, owned by the table
	addr  string
	http  string
	state memberlist.NodeStateType
	since time.Time
}

// hooks let tests tune memberlist and wrap its transport.
type hooks struct {
	tune func(*memberlist.Config)
	wrap func(*transport) memberlist.NodeAwareTransport
}

// New checks cfg, binds the memberlist listeners (so a taken port is an
// error here, like net.Listen) and registers the node's metrics on reg. c
// must already be in cluster mode with Self equal to cfg.NodeName
// (counter.SetCluster). log may be nil. The node does not contact anyone
// until Run; call Run once, or Close if Run is never called.
func New(cfg Config, c *counter.Counter, reg prometheus.Registerer, log *slog.Logger) (*Node, error) {
	return newNode(cfg, c, reg, log, hooks{})
}

func newNode(cfg Config, c *counter.Counter, reg prometheus.Registerer, lg *slog.Logger, h hooks) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil || reg == nil {
		return nil, fmt.Errorf("%w: nil counter or registerer", ErrInvalidConfig)
	}
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	lg = lg.With("node", cfg.NodeName)
	sc := DefaultSyncConfig(cfg.NodeName)
	sc.MaxMessageBytes = cfg.syncMessageBytes()
	sc.StateMessageBytes = streamMessageBytes
	s, err := NewSyncer(c, sc)
	if err != nil {
		return nil, err
	}
	n := &Node{
		cfg: cfg, c: c, log: lg, syncer: s, dgram: cfg.datagramMessageBytes(),
		nudge:       make(chan struct{}, 1),
		members:     make(map[string]*member),
		senders:     make(map[string]*sender),
		catchUp:     make(map[string]bool),
		greeted:     make(map[string]bool),
		lastCatchUp: make(map[string]time.Time),
		nodes:       1,
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_cluster_events_total",
			Help: "Membership events seen by this node: join, leave (dead or departed), update (metadata changed).",
		}, []string{"event"}),
	}
	for _, e := range []string{"join", "leave", "update"} {
		n.events.WithLabelValues(e)
	}
	mc, err := n.memberlistConfig(h)
	if err != nil {
		return nil, err
	}
	if n.ml, err = memberlist.Create(mc); err != nil {
		if mc.Transport != nil {
			_ = mc.Transport.Shutdown()
		}
		return nil, fmt.Errorf("cluster: start memberlist on %s: %w", cfg.BindAddr, err)
	}
	for _, col := range []prometheus.Collector{n.events, newCollector(n)} {
		if err := reg.Register(col); err != nil {
			_ = n.ml.Shutdown()
			return nil, fmt.Errorf("cluster: register metrics: %w", err)
		}
	}
	return n, nil
}

// memberlistConfig translates cfg into memberlist's configuration.
func (n *Node) memberlistConfig(h hooks) (*memberlist.Config, error) {
	cfg := n.cfg
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeName
	host, port, _ := splitHostPort(cfg.BindAddr) // checked by Validate
	if host == "" {
		host = "0.0.0.0"
	}
	mc.BindAddr, mc.BindPort = host, port
	if cfg.AdvertiseAddr != "" {
		mc.AdvertiseAddr, mc.AdvertisePort, _ = splitHostPort(cfg.AdvertiseAddr)
	}
	mc.Label = cfg.Label
	if len(cfg.GossipKey) > 0 {
		mc.SecretKey = slices.Clone(cfg.GossipKey)
	}
	mc.Delegate = delegate{n}
	mc.Events = eventDelegate{n}
	mc.Logger = log.New(newLogBridge(n.log), "", 0)
	// Sync datagrams share memberlist's handoff queue with its gossip; a
	// burst of deltas from several peers must not overflow it.
	mc.HandoffQueueDepth = 8192
	// A restarted node (same name) may come back at another address, as a
	// pod does; let it take its name back once the old one is dead.
	mc.DeadNodeReclaimTime = time.Second
	// Full state exchange with a random member every 5 s rather than
	// memberlist's LAN default of 30 s. A node that missed the gossip of a
	// join (datagrams are lost when a host is saturated) learns of the new
	// member at the next exchange; until then it sends that member none of
	// its deltas, so the member under-counts. Measured: 8 nodes saturating
	// two cores left a pair unaware of each other for over 20 s, in about
	// one start in five. An exchange costs one TCP round trip carrying a
	// few dozen bytes per member.
	mc.PushPullInterval = 5 * time.Second
	// Compression (LZW) costs more CPU than the bytes it saves on
	// msgpack deltas: see doc.go.
	mc.EnableCompression = false
	if h.tune != nil {
		h.tune(mc)
	}
	t, err := newTransport(mc.BindAddr, mc.BindPort, mc.Logger)
	if err != nil {
		return nil, err
	}
	mc.BindPort = t.Port() // the port bound when BindAddr asked for 0
	mc.Transport = t
	if h.wrap != nil {
		mc.Transport = h.wrap(t)
	}
	return mc, nil
}

// Name returns the node's name.
func (n *Node) Name() string { return n.cfg.NodeName }

// Addr returns the HOST:PORT peers reach this node's memberlist at (the
// port actually bound when BindAddr asked for port 0).
func (n *Node) Addr() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if m := n.members[n.cfg.NodeName]; m != nil {
		return m.addr
	}
	return ""
}

// Ready reports nil once the node has joined one of its seeds, or at once
// when it has none; until then an error wrapping ErrNotJoined.
func (n *Node) Ready() error {
	if len(n.cfg.Join) == 0 || n.joined.Load() {
		return nil
	}
	return fmt.Errorf("%w: none of the seeds %v answered yet", ErrNotJoined, n.cfg.Join)
}

// Close shuts memberlist down without leaving, for a node whose Run was
// never called. It is a no-op once Run has started (Run's ctx stops it).
func (n *Node) Close() error {
	if n.started.Load() || n.closed.Swap(true) {
		return nil
	}
	return n.ml.Shutdown()
}

// Run joins the seeds and syncs until ctx ends, then sends the last
// changes, leaves the cluster (waiting at most LeaveTimeout for the
// broadcast) and shuts memberlist down. Every goroutine it starts has
// ended when it returns. It returns ErrStopped if called twice or after
// Close.
func (n *Node) Run(ctx context.Context) error {
	if n.closed.Load() || n.started.Swap(true) {
		return ErrStopped
	}
	var wg sync.WaitGroup
	loopCtx, cancel := context.WithCancel(ctx)
	wg.Go(func() { n.joinLoop(loopCtx) })
	n.syncLoop(loopCtx)
	cancel()
	wg.Wait()
	if n.killed.Load() {
		n.stopSenders(time.Time{})
		n.wg.Wait()
		return nil
	}

	// Hand the peers what changed since the last tick, so that they hold
	// everything this node counted if it comes back.
	n.tick(time.Now())
	n.stopSenders(time.Now().Add(n.cfg.LeaveTimeout))
	n.wg.Wait()

	// Mark the metadata first, so that the peers record a departure rather
	// than a failure when the leave reaches them.
	n.leaving.Store(true)
	if uerr := n.ml.UpdateNode(n.cfg.LeaveTimeout); uerr != nil {
		n.log.Debug("announcing the departure", "err", uerr)
	}
	var err error
	if lerr := n.ml.Leave(n.cfg.LeaveTimeout); lerr != nil {
		n.log.Warn("leaving the cluster", "err", lerr)
	}
	if serr := n.ml.Shutdown(); serr != nil {
		err = fmt.Errorf("cluster: shutdown: %w", serr)
	}
	n.closed.Store(true)
	return err
}

// stopSenders stops every sender; each still sends what is queued until
// deadline.
func (n *Node) stopSenders(deadline time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for name, s := range n.senders {
		s.stopAndDrain(deadline)
		delete(n.senders, name)
	}
}

// kill shuts memberlist down at once, as a crash would: no last deltas, no
// leave. Run then returns when its ctx ends. For tests.
func (n *Node) kill() {
	n.killed.Store(true)
	_ = n.ml.Shutdown()
}

// syncLoop is the only goroutine that starts sends: each tick's deltas,
// anti-entropy and catch-up after membership changes.
//
// Sync ticks fall on wall-clock multiples of the sync interval, so every
// node ends its blind interval at the same instant (up to clock offset):
// the per-node budget's bound assumes that, and with unaligned ticks the
// nodes' shares overlap (limitsim --stagger; docs/blind-interval.md).
func (n *Node) syncLoop(ctx context.Context) {
	tick := time.NewTimer(time.Until(nextTick(time.Now(), n.cfg.SyncInterval)))
	defer tick.Stop()
	ae := time.NewTicker(n.cfg.AntiEntropyInterval)
	defer ae.Stop()
	n.reconcile(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.nudge:
			n.reconcile(time.Now())
		case now := <-tick.C:
			n.tick(now)
			tick.Reset(time.Until(nextTick(time.Now(), n.cfg.SyncInterval)))
		case now := <-ae.C:
			n.antiEntropy(now)
			n.reap(now)
		}
	}
}

// nextTick returns the first multiple of every (counted from the zero
// time, which wall clocks share) after now.
func nextTick(now time.Time, every time.Duration) time.Time {
	return now.Truncate(every).Add(every)
}

// tick sends the changes since the previous tick to every peer.
func (n *Node) tick(now time.Time) {
	msgs, err := n.syncer.Tick(now)
	if err != nil {
		n.log.Error("encoding deltas", "err", err)
		return
	}
	n.broadcast(msgs)
}

// antiEntropy re-sends this node's slices of the hot keys to every peer.
// With no hot key it sends an empty state message instead: a heartbeat
// that keeps each peer's view of this node (last message age, clock
// offset, suspicion) current in an idle cluster.
func (n *Node) antiEntropy(now time.Time) {
	n.mu.Lock()
	alone := len(n.senders) == 0
	n.mu.Unlock()
	if alone {
		return
	}
	msgs, err := n.syncer.Hot(now)
	if err == nil && len(msgs) == 0 {
		msgs, err = n.syncer.Heartbeat(now)
	}
	if err != nil {
		n.log.Error("encoding anti-entropy state", "err", err)
		return
	}
	n.broadcast(msgs)
}

// suspectAfter is how long a member memberlist holds alive may stay
// silent before this node reports it suspect: three heartbeats missed.
func (n *Node) suspectAfter() time.Duration {
	return 3*n.cfg.AntiEntropyInterval + n.cfg.SyncInterval
}

// broadcast queues msgs for every peer.
func (n *Node) broadcast(msgs [][]byte) {
	if len(msgs) == 0 {
		return
	}
	b := batch{msgs: msgs, reliable: n.cfg.SyncTransport == TransportTCP}
	if !b.reliable {
		b.spread = time.Duration(n.cfg.SendSpread * float64(n.cfg.SyncInterval))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range n.senders {
		n.enqueue(s, b)
	}
}

// enqueue queues b for s without waiting; a full queue drops b.
func (n *Node) enqueue(s *sender, b batch) {
	if !s.offer(b) {
		n.dropped.Add(uint64(len(b.msgs)))
		n.sendLog.log(n.log, slog.LevelWarn, "sync queue full, messages dropped", "peer", s.name, "messages", len(b.msgs))
	}
}

// reconcile brings the senders in line with the member table, sends each
// newly joined peer what it needs, and tells the counter how many nodes
// share the limits.
func (n *Node) reconcile(now time.Time) {
	n.mu.Lock()
	alive := 0
	for name, m := range n.members {
		up := m.state == memberlist.StateAlive || m.state == memberlist.StateSuspect
		if up {
			alive++
		}
		if name == n.cfg.NodeName {
			continue
		}
		s := n.senders[name]
		if up {
			if s == nil {
				s = newSender(name, n.cfg.QueueLength)
				n.senders[name] = s
				n.wg.Go(func() { s.run(n) })
			}
			nd := m.node
			s.node.Store(&nd)
		} else if s != nil {
			s.stopAndDrain(time.Time{})
			delete(n.senders, name)
		}
	}
	var joined, hello []string
	for name := range n.catchUp {
		if !n.greeted[name] {
			n.greeted[name] = true
			hello = append(hello, name)
		}
		// A peer that flaps (falsely declared dead, back a moment later)
		// must not cost a full state transfer each time: within
		// RejoinInterval of its last catch-up it missed at most that long of
		// deltas, and anti-entropy re-sends the keys near their limit anyway.
		if last, ok := n.lastCatchUp[name]; !ok || now.Sub(last) >= n.cfg.RejoinInterval {
			n.lastCatchUp[name] = now
			joined = append(joined, name)
		}
	}
	clear(n.catchUp)
	changed := alive != n.nodes && alive > 0
	if changed {
		n.nodes = alive
	}
	n.mu.Unlock()

	if changed {
		err := n.c.SetNodes(alive)
		if err != nil {
			n.log.Error("updating the node count", "nodes", alive, "err", err)
		}
		n.log.Info("cluster membership changed", "alive", alive)
		// Outside n.mu: the callback may call back into the node (Status,
		// Members), and n.mu is not reentrant.
		if err == nil && n.cfg.OnNodesChanged != nil {
			n.cfg.OnNodesChanged(alive)
		}
	}
	for _, name := range joined {
		// A peer that (re)joined gets our slices and its own we hold: how a
		// restarted peer learns back what it had counted.
		msgs, err := n.syncer.StateFor(now, name)
		if err != nil {
			n.log.Error("encoding catch-up state", "peer", name, "err", err)
			continue
		}
		n.sendTo(name, batch{msgs: msgs, reliable: true})
	}
	if len(hello) > 0 {
		// Once per peer and process: a peer answers a hello with our own
		// slices, which a restarted node needs even when the cluster never
		// noticed it was gone.
		msgs, err := n.syncer.Hello(now)
		if err != nil {
			n.log.Error("encoding hello", "err", err)
			return
		}
		for _, name := range hello {
			n.sendTo(name, batch{msgs: msgs, reliable: true})
		}
	}
}

// sendTo queues b for one peer, if it is alive.
func (n *Node) sendTo(peer string, b batch) {
	if len(b.msgs) == 0 {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.senders[peer]; s != nil {
		n.enqueue(s, b)
	}
}

// reap forgets members dead or gone for longer than deadMemberTTL.
func (n *Node) reap(now time.Time) {
	n.mu.Lock()
	var gone []string
	for name, m := range n.members {
		if (m.state == memberlist.StateDead || m.state == memberlist.StateLeft) && now.Sub(m.since) > deadMemberTTL {
			delete(n.members, name)
			delete(n.greeted, name)
			delete(n.lastCatchUp, name)
			gone = append(gone, name)
		}
	}
	n.mu.Unlock()
	for _, name := range gone {
		n.syncer.Forget(name)
	}
}

// joinLoop joins the seeds (retrying every second until one answers), then
// every RejoinInterval joins again the seeds that are not alive members.
func (n *Node) joinLoop(ctx context.Context) {
	if len(n.cfg.Join) == 0 {
		return
	}
	retry := min(time.Second, n.cfg.RejoinInterval)
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !n.joined.Load() {
			n.joins.Add(1)
			k, err := n.ml.Join(n.cfg.Join)
			if err != nil {
				n.log.Warn("joining the cluster; retrying", "seeds", n.cfg.Join, "err", err)
				t.Reset(retry)
				continue
			}
			n.joined.Store(true)
			n.log.Info("joined the cluster", "seeds_answered", k, "members", n.ml.NumMembers())
		} else if missing := n.missingSeeds(); len(missing) > 0 {
			n.joins.Add(1)
			if k, err := n.ml.Join(missing); err != nil {
				n.log.Debug("rejoining seeds", "seeds", missing, "err", err)
			} else {
				n.log.Info("rejoined seeds that were not members", "seeds", missing, "answered", k)
			}
		}
		t.Reset(n.cfg.RejoinInterval)
	}
}

// missingSeeds returns the seeds that are neither this node nor an alive
// member: the other side of a partition that memberlist gave up on. It
// reads the member table, not memberlist.Members, whose nodes memberlist
// keeps updating after it returns them.
func (n *Node) missingSeeds() []string {
	up := make(map[string]bool)
	n.mu.Lock()
	for _, m := range n.members {
		if m.state == memberlist.StateAlive {
			up[m.addr] = true
		}
	}
	n.mu.Unlock()
	var missing []string
	for _, seed := range n.cfg.Join {
		addr := seed
		if a, err := net.ResolveTCPAddr("tcp", seed); err == nil {
			addr = a.String()
		}
		if !up[addr] {
			missing = append(missing, seed)
		}
	}
	return missing
}
