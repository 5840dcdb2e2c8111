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

	"github.com/limiterd/limiterd/cluster/engine"
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

// Node is one limiterd node's membership and sync: the memberlist adapter
// of an Engine. It keeps the memberlist cluster, ticks the engine at every
// multiple of the counter's sync interval, hands it the membership events
// and the messages peers send, and sends what it returns, one goroutine
// per peer. Build it with New, run it with Run.
type Node struct {
	cfg     Config
	c       *counter.Counter
	now     func() time.Time // cfg.Now: every instant of the protocol
	log     *slog.Logger
	engine  *engine.Engine
	ml      *memberlist.Memberlist
	dgram   int // largest message sent as a datagram
	started atomic.Bool
	closed  atomic.Bool

	nudge   chan struct{} // membership changed: reconcile senders (cap 1)
	joined  atomic.Bool
	since   atomic.Int64 // unix ns it joined (its creation, without seeds): Ready's catch-up wait counts from it
	joins   atomic.Int64 // join attempts, initial and rejoin
	killed  atomic.Bool  // tests: memberlist was shut down as by a crash
	leaving atomic.Bool  // published in the metadata just before leaving

	mu      sync.Mutex
	members map[string]*member // every member seen, with its last known state
	senders map[string]*sender // one per peer that is alive (or suspect)
	joinEv  map[string]bool    // peers with a join event since the last reconcile
	wg      sync.WaitGroup     // the senders' goroutines

	merges    *merger                    // merges sync messages apart from the rest (merger.go)
	waiting   waiters[engine.Answer]     // checks at the margin waiting for their coordinator's answer (coordinate.go)
	resets    waiters[engine.ResetReply] // resets waiting for their answer and acknowledgements (reset.go)
	keyring   *memberlist.Keyring        // with Config.GossipKeys: rotated by SetGossipKeys
	transport *transport                 // memberlist's, for its counts

	dropped   atomic.Uint64 // messages not sent: full queue or send error
	decodeLog rateLog
	strangers strangers // senders dropped as non-members, warned about if they stay so
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
	tune   func(*memberlist.Config)
	wrap   func(*transport) memberlist.NodeAwareTransport
	engine func(*engine.Config)
}

// New checks cfg, binds the memberlist listeners (so a taken port is an
// error here, like net.Listen) and registers the node's metrics on reg. c
// must already be in cluster mode with Self equal to cfg.NodeName
// (counter.SetCluster); its SyncInterval is the node's. log may be nil. The node does not contact anyone
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
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.resolveBudget() && cfg.DatagramBudget != DefaultDatagramBudget {
		lg.Info("sync datagrams of up to the loopback's budget: every peer is on this host", "bytes", cfg.DatagramBudget)
	}
	n := &Node{
		cfg: cfg, c: c, now: cfg.Now, log: lg, dgram: cfg.datagramMessageBytes(),
		nudge:   make(chan struct{}, 1),
		merges:  newMerger(),
		members: make(map[string]*member),
		senders: make(map[string]*sender),
		joinEv:  make(map[string]bool),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "limiterd_cluster_events_total",
			Help: "Membership events seen by this node: join, leave (dead or departed), update (metadata changed).",
		}, []string{"event"}),
	}
	for _, e := range []string{"join", "leave", "update"} {
		n.events.WithLabelValues(e)
	}
	ec := cfg.engineConfig()
	ec.OnNodesChanged = n.nodesChanged
	ec.Members = n.isMember
	// A restarted process must not reuse the ask ids its previous one
	// used within the coordinators' memory of them (engine.Config).
	ec.FirstAskID = uint64(n.now().UnixNano())
	ec.Log = lg
	if h.engine != nil {
		h.engine(&ec)
	}
	var err error
	if n.engine, err = engine.New(c, ec); err != nil {
		return nil, err
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
	if !n.encrypted() && cfg.Label == "" {
		// Now that n is whole: its delegate may send.
		n.transport.deliverUsers(delegate{n}.NotifyMsg)
	}
	for _, col := range []prometheus.Collector{n.events, newCollector(n)} {
		if err := reg.Register(col); err != nil {
			_ = n.ml.Shutdown()
			return nil, fmt.Errorf("cluster: register metrics: %w", err)
		}
	}
	n.since.Store(n.now().UnixNano()) // without seeds; joining sets it again
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
	if len(cfg.GossipKeys) > 0 {
		kr, err := memberlist.NewKeyring(cloneKeys(cfg.GossipKeys), slices.Clone(cfg.GossipKeys[0]))
		if err != nil {
			return nil, fmt.Errorf("cluster: gossip keys: %w", err)
		}
		mc.Keyring = kr
		n.keyring = kr
	}
	mc.Delegate = delegate{n}
	mc.Events = eventDelegate{n}
	mc.Logger = log.New(newLogBridge(n.log), "", 0)
	// Sync datagrams share memberlist's handoff queue with its gossip
	// when memberlist delivers them (with a label or gossip keys: see
	// transport.deliverUsers); a burst of deltas from several peers must
	// not overflow it.
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
	n.transport = t
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

// Ready reports nil once the node may take checks: it has joined one of
// its seeds (at once when it has none), and has heard from every live
// member since, or CatchUpWait has passed (engine.Engine.Ready). Until it
// has joined, an error wrapping ErrNotJoined; then, while a live member
// has not been heard from, one wrapping engine.ErrUnheard: a restarted
// node whose peers have not yet seen it back would decide on counts that
// lack theirs, and its asks to them would go unanswered.
func (n *Node) Ready() error {
	if len(n.cfg.Join) > 0 && !n.joined.Load() {
		return fmt.Errorf("%w: none of the seeds %v answered yet", ErrNotJoined, n.cfg.Join)
	}
	if err := n.engine.Ready(n.now(), time.Unix(0, n.since.Load())); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	return nil
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
	wg.Go(func() { n.merges.run(loopCtx, n.receive) })
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
	n.tick(n.now())
	n.stopSenders(time.Now().Add(n.cfg.LeaveTimeout)) // a deadline of the real clock (sender.drain)
	n.wg.Wait()

	// Mark the metadata first, so that the peers record a departure rather
	// than a failure when the leave reaches them.
	n.leaving.Store(true)
	if uerr := n.ml.UpdateNode(n.cfg.LeaveTimeout); uerr != nil {
		n.log.Debug("announcing the departure", "err", uerr)
	}
	var err error
	if lerr := n.ml.Leave(n.cfg.LeaveTimeout); lerr != nil {
		if len(n.ml.Members()) == 0 {
			// Every peer left while the leave waited to be gossiped (the
			// whole cluster stopping at once): no one was left to tell.
			n.log.Info("left the cluster with no live peer left to tell", "err", lerr)
		} else {
			n.log.Warn("leaving the cluster", "err", lerr)
		}
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

// syncLoop is the only goroutine that ticks the engine and tells it of
// membership changes. Ticks fall on the instants Engine.NextTick names
// (wall-clock multiples of the sync interval, the same on every node);
// the engine decides what each tick sends, anti-entropy included. The
// instants are the node's clock (Config.Now); the timers wait the
// durations between them, which the real clock measures as well.
func (n *Node) syncLoop(ctx context.Context) {
	now := n.now()
	tick := time.NewTimer(n.engine.NextTick(now).Sub(now))
	defer tick.Stop()
	reap := time.NewTicker(n.cfg.AntiEntropyInterval)
	defer reap.Stop()
	n.reconcile(now)
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.nudge:
			n.reconcile(n.now())
		case <-tick.C:
			n.tick(n.now())
			now := n.now()
			tick.Reset(n.engine.NextTick(now).Sub(now))
		case <-reap.C:
			n.reap(n.now())
			n.warnStrangers(n.now())
		}
	}
}

// tick runs the engine's tick and sends what it returns.
func (n *Node) tick(now time.Time) {
	out, err := n.engine.Tick(now)
	if err != nil {
		n.log.Error("encoding sync messages", "err", err)
	}
	n.dispatch(out)
}

// dispatch queues each engine.Outbound for its peer, if it has a sender.
func (n *Node) dispatch(out []engine.Outbound) {
	if len(out) == 0 {
		return
	}
	spread := time.Duration(n.cfg.SendSpread * float64(n.engine.SyncInterval()))
	for _, o := range out {
		if o.Purpose != engine.PurposeAnswer {
			continue
		}
		// An asker waits for it: at once, from this goroutine, not behind
		// the sync traffic queued for that peer.
		if nd := n.memberNode(o.To); nd != nil {
			for _, m := range o.Msgs {
				if err := n.sendNow(nd, m); err != nil {
					n.sendLog.log(n.log, slog.LevelWarn, "sending a coordinator's answer failed", "peer", o.To, "err", err)
				}
			}
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, o := range out {
		s := n.senders[o.To]
		if s == nil || len(o.Msgs) == 0 || o.Purpose == engine.PurposeAnswer {
			continue
		}
		b := batch{msgs: o.Msgs, reliable: o.Reliable}
		if o.Spread {
			b.spread = spread
		}
		n.enqueue(s, b)
	}
}

// nodesChanged is the engine's OnNodesChanged: the counter was told.
func (n *Node) nodesChanged(alive int) {
	n.log.Info("cluster membership changed", "alive", alive)
	if n.cfg.OnNodesChanged != nil {
		n.cfg.OnNodesChanged(alive)
	}
}

// enqueue queues b for s without waiting; a full queue drops b.
func (n *Node) enqueue(s *sender, b batch) {
	if !s.offer(b) {
		n.dropped.Add(uint64(len(b.msgs)))
		n.sendLog.log(n.log, slog.LevelWarn, "sync queue full, messages dropped", "peer", s.name, "messages", len(b.msgs))
	}
}

// reconcile brings the senders in line with the member table and tells
// the engine which peers are up; the engine decides what they are sent
// (hello, catch-up) and tells the counter how many nodes share the
// limits. It runs on the sync goroutine, without n.mu held while the
// engine runs: the engine's OnNodesChanged may call back into the node.
func (n *Node) reconcile(now time.Time) {
	up := n.engine.Peers()
	var ups, downs []string
	n.mu.Lock()
	for name, m := range n.members {
		if name == n.cfg.NodeName {
			continue
		}
		alive := m.state == memberlist.StateAlive || m.state == memberlist.StateSuspect
		s := n.senders[name]
		if alive {
			if s == nil {
				s = newSender(name, n.cfg.QueueLength)
				n.senders[name] = s
				n.wg.Go(func() { s.run(n) })
			}
			nd := m.node
			s.node.Store(&nd)
			if n.joinEv[name] || !up[name].Up {
				ups = append(ups, name)
			}
		} else {
			if up[name].Up {
				downs = append(downs, name)
			}
			if s != nil {
				s.stopAndDrain(time.Time{})
				delete(n.senders, name)
			}
		}
	}
	clear(n.joinEv)
	n.mu.Unlock()

	for _, name := range downs {
		n.engine.PeerDown(now, name)
	}
	slices.Sort(ups) // a deterministic order of the sends
	for _, name := range ups {
		out, err := n.engine.PeerUp(now, name)
		if err != nil {
			n.log.Error("encoding catch-up state or hello", "peer", name, "err", err)
		}
		n.dispatch(out)
	}
	n.sendMoved(now)
}

// sendMoved sends what Engine.Moved returns: after a membership change, a
// message (which may end a failover) or a given-up ask (which may start
// one), this node's slices of the routed keys whose coordinator changed go
// to the new one at once, not at the next tick. Nothing when nothing
// moved.
func (n *Node) sendMoved(now time.Time) {
	out, err := n.engine.Moved(now)
	if err != nil {
		n.log.Error("encoding the slices of moved keys", "err", err)
	}
	n.dispatch(out)
}

// reap forgets members dead or gone for longer than deadMemberTTL.
func (n *Node) reap(now time.Time) {
	n.mu.Lock()
	var gone []string
	for name, m := range n.members {
		if (m.state == memberlist.StateDead || m.state == memberlist.StateLeft) && now.Sub(m.since) > deadMemberTTL {
			delete(n.members, name)
			gone = append(gone, name)
		}
	}
	n.mu.Unlock()
	for _, name := range gone {
		n.engine.Forget(name)
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
		seeds := n.seedAddrs(ctx)
		if !n.joined.Load() {
			n.joins.Add(1)
			k, err := n.ml.Join(seeds)
			if err != nil {
				n.log.Warn("joining the cluster; retrying", "seeds", n.cfg.Join, "addresses", seeds, "err", err)
				t.Reset(retry)
				continue
			}
			n.since.Store(n.now().UnixNano())
			n.joined.Store(true)
			n.log.Info("joined the cluster", "seeds", n.cfg.Join, "addresses", len(seeds), "seeds_answered", k, "members", n.ml.NumMembers())
		} else if missing := n.missingSeeds(seeds); len(missing) > 0 {
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

// seedAddrs returns the seeds as IP:PORT addresses: an address stays as
// it is, and a name becomes every address it resolves to, looked up now
// (the pods behind a Service name come and go). A name that does not
// resolve is kept as it is: memberlist tries it again, and says why it
// fails.
func (n *Node) seedAddrs(ctx context.Context) []string {
	r := n.cfg.Resolver
	if r == nil {
		r = net.DefaultResolver
	}
	var out []string
	seen := make(map[string]bool)
	add := func(a string) {
		if !seen[a] {
			seen[a] = true
			out = append(out, a)
		}
	}
	for _, seed := range n.cfg.Join {
		host, port, err := net.SplitHostPort(seed)
		if err != nil || net.ParseIP(host) != nil {
			add(seed)
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		ips, err := r.LookupIPAddr(lctx, host)
		cancel()
		if err != nil || len(ips) == 0 {
			n.log.Debug("looking up a seed", "seed", seed, "err", err)
			add(seed)
			continue
		}
		for _, ip := range ips {
			add(net.JoinHostPort(ip.IP.String(), port))
		}
	}
	return out
}

// missingSeeds returns the seed addresses (seedAddrs) that are neither
// this node nor an alive member: the other side of a partition that
// memberlist gave up on, or a pod that came later. It reads the member
// table, not memberlist.Members, whose nodes memberlist keeps updating
// after it returns them.
func (n *Node) missingSeeds(seeds []string) []string {
	up := make(map[string]bool)
	n.mu.Lock()
	for _, m := range n.members {
		if m.state == memberlist.StateAlive {
			up[m.addr] = true
		}
	}
	n.mu.Unlock()
	var missing []string
	for _, seed := range seeds {
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

// encrypted reports whether cluster traffic needs a gossip key.
func (n *Node) encrypted() bool { return len(n.cfg.GossipKey) > 0 || len(n.cfg.GossipKeys) > 0 }
