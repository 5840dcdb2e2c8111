package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
)

// The in-process cluster tests run real memberlist nodes on 127.0.0.1 with
// ports the kernel picks, and every wait is bounded by waitFor.

// waitTimeout bounds every wait for the cluster to reach a state. It is
// generous for -race on two cores; a healthy run takes a fraction of it.
const waitTimeout = 20 * time.Second

// fastMemberlist tunes memberlist for tests: failures are detected in a
// second or so instead of several.
func fastMemberlist(mc *memberlist.Config) {
	mc.ProbeInterval = 200 * time.Millisecond
	mc.ProbeTimeout = 100 * time.Millisecond
	mc.GossipInterval = 20 * time.Millisecond
	mc.PushPullInterval = 2 * time.Second
	mc.SuspicionMult = 2
	mc.SuspicionMaxTimeoutMult = 2
	mc.IndirectChecks = 1
	mc.RetransmitMult = 3
	mc.TCPTimeout = time.Second
	mc.GossipToTheDeadTime = 2 * time.Second
}

// testLogger discards, unless LIMITERD_TEST_LOG is set (then stderr).
func testLogger() *slog.Logger {
	if os.Getenv("LIMITERD_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// network lets tests cut traffic between chosen nodes: each node's
// transport asks it before sending a packet or opening a stream.
type network struct {
	mu  sync.Mutex
	cut map[[2]string]bool // [from, to] addresses
	// mtu, if set, drops longer datagrams, as a path whose MTU is that
	// small and that does not fragment would.
	mtu int
	// lose, if set, is asked about every datagram from one address to
	// another and drops those it returns true for.
	lose func(from, to string, b []byte) bool

	// What went on the wire through the transports, memberlist's own
	// traffic and framing (label, CRC, encryption, compression) included.
	packets, packetBytes, streamBytes atomic.Uint64
}

func newNetwork() *network { return &network{cut: make(map[[2]string]bool)} }

// partition cuts every link between a node of one group and a node of the other.
func (nw *network) partition(a, b []*tnode) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for _, x := range a {
		for _, y := range b {
			nw.cut[[2]string{x.addr, y.addr}] = true
			nw.cut[[2]string{y.addr, x.addr}] = true
		}
	}
}

func (nw *network) heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
}

func (nw *network) blocked(from, to string) bool {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	return nw.cut[[2]string{from, to}]
}

func (nw *network) drops(from, to string, b []byte) bool {
	nw.mu.Lock()
	lose := nw.lose
	nw.mu.Unlock()
	return nw.blocked(from, to) || nw.mtu > 0 && len(b) > nw.mtu || lose != nil && lose(from, to, b)
}

// filterTransport drops what its network blocks: packets vanish, streams
// fail to open, as across a partition.
type filterTransport struct {
	memberlist.NodeAwareTransport
	self string
	nw   *network
}

var errCut = errors.New("test network: link cut")

func (f *filterTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	if f.nw.drops(f.self, addr, b) {
		return time.Now(), nil
	}
	f.nw.packets.Add(1)
	f.nw.packetBytes.Add(uint64(len(b)))
	return f.NodeAwareTransport.WriteTo(b, addr)
}

func (f *filterTransport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	if f.nw.drops(f.self, a.Addr, b) {
		return time.Now(), nil
	}
	f.nw.packets.Add(1)
	f.nw.packetBytes.Add(uint64(len(b)))
	return f.NodeAwareTransport.WriteToAddress(b, a)
}

func (f *filterTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	if f.nw.blocked(f.self, addr) {
		return nil, errCut
	}
	c, err := f.NodeAwareTransport.DialTimeout(addr, timeout)
	return f.count(c), err
}

func (f *filterTransport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if f.nw.blocked(f.self, a.Addr) {
		return nil, errCut
	}
	c, err := f.NodeAwareTransport.DialAddressTimeout(a, timeout)
	return f.count(c), err
}

func (f *filterTransport) count(c net.Conn) net.Conn {
	if c == nil {
		return nil
	}
	return countingConn{c, &f.nw.streamBytes}
}

// countingConn counts the bytes written to a stream.
type countingConn struct {
	net.Conn
	n *atomic.Uint64
}

func (c countingConn) Write(b []byte) (int, error) {
	k, err := c.Conn.Write(b)
	c.n.Add(uint64(k))
	return k, err
}

// tnode is one running test node.
type tnode struct {
	name  string
	addr  string // memberlist HOST:PORT
	n     *Node
	c     *counter.Counter
	lim   counter.Limit // "default": 1000 per minute
	block counter.Limit // max 1, used by peek to deny without counting
	reg   *prometheus.Registry
	stop  func() // ends Run and waits for it
}

// nodeOpts are the knobs the tests turn.
type nodeOpts struct {
	port   int      // 0: any
	join   []string // seeds
	nw     *network // nil: no filtering
	config func(*Config)
	tune   func(*memberlist.Config) // after fastMemberlist
	limit  int64                    // the "default" limit, 1000 if 0
	sync   time.Duration            // the counter's sync interval, testSyncInterval if 0
	// coordinated turns the coordinator on (counter.ClusterConfig.Coordinated).
	coordinated bool
	// wrap, if set, wraps the node's transport (after nw's filter).
	wrap func(memberlist.NodeAwareTransport) memberlist.NodeAwareTransport
	// engine, if set, edits the engine's configuration.
	engine func(*engine.Config)
	// log, if set, is the node's logger (else testLogger's).
	log *slog.Logger
}

// testSyncInterval is the tests' sync interval, set on the counter.
const testSyncInterval = 50 * time.Millisecond

// testConfig is the node configuration of the tests: loopback, fast
// anti-entropy, rejoin and leave (the fast sync is the counter's).
func testConfig(name string, port int, join []string) Config {
	cfg := DefaultConfig()
	cfg.NodeName = name
	cfg.BindAddr = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Join = join
	cfg.AntiEntropyInterval = 200 * time.Millisecond
	cfg.RejoinInterval = 300 * time.Millisecond
	cfg.LeaveTimeout = 500 * time.Millisecond
	return cfg
}

func startNode(t testing.TB, name string, o nodeOpts) *tnode {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(name, o.port, o.join)
	if o.config != nil {
		o.config(&cfg)
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Coordinated = o.coordinated // off: every check decided locally, the tests count exactly what they hit
	cc.SyncInterval, cc.Budget = cmp.Or(o.sync, testSyncInterval), false
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	limit := o.limit
	if limit == 0 {
		limit = 1000
	}
	tn := &tnode{name: name, c: c, reg: prometheus.NewRegistry()}
	if tn.lim, err = c.Limit("default", limit, time.Minute, 12); err != nil {
		t.Fatal(err)
	}
	if tn.block, err = c.Limit("block", 1, time.Minute, 1); err != nil {
		t.Fatal(err)
	}
	h := hooks{tune: func(mc *memberlist.Config) {
		fastMemberlist(mc)
		if o.tune != nil {
			o.tune(mc)
		}
	}}
	h.engine = o.engine
	h.wrap = func(nt *transport) memberlist.NodeAwareTransport {
		var t memberlist.NodeAwareTransport = nt
		if o.nw != nil {
			t = &filterTransport{NodeAwareTransport: nt, self: fmt.Sprintf("127.0.0.1:%d", nt.Port()), nw: o.nw}
		}
		if o.wrap != nil {
			t = o.wrap(t)
		}
		return t
	}
	lg := o.log
	if lg == nil {
		lg = testLogger()
	}
	tn.n, err = newNode(cfg, c, tn.reg, lg.With("test", t.Name()), h)
	if err != nil {
		t.Fatal(err)
	}
	tn.addr = tn.n.Addr()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- tn.n.Run(ctx) }()
	var once sync.Once
	tn.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
		})
	}
	t.Cleanup(tn.stop)
	return tn
}

// crash stops the node as a crash would (no last deltas, no leave).
func (tn *tnode) crash() {
	tn.n.kill()
	tn.stop()
}

// hit counts k requests of key on this node now; all must be allowed.
func (tn *tnode) hit(t testing.TB, key string, k int) {
	t.Helper()
	var res [1]counter.Result
	for range k {
		d, err := tn.c.Allow(time.Now(), key, 1, []counter.Limit{tn.lim}, res[:])
		if err != nil || !d.Allowed {
			t.Fatalf("%s: request of %q not allowed: %+v %v", tn.name, key, d, err)
		}
	}
}

// peek returns the count of key on this node without counting anything:
// the "block" limit (max 1) is filled first, so the two-limit call is
// always denied, and a denied call reports every limit's count.
func (tn *tnode) peek(key string) int64 {
	var res [2]counter.Result
	now := time.Now()
	_, _ = tn.c.Allow(now, key, 1, []counter.Limit{tn.block}, res[:1])
	_, _ = tn.c.Allow(now, key, 1, []counter.Limit{tn.lim, tn.block}, res[:])
	return res[0].Count
}

// alive returns how many members this node sees alive.
func (tn *tnode) alive() int {
	k := 0
	for _, m := range tn.n.Status().Members {
		if m.State == "alive" {
			k++
		}
	}
	return k
}

// stateOf returns the state this node sees for a member ("" if unknown).
func (tn *tnode) stateOf(name string) string {
	for _, m := range tn.n.Status().Members {
		if m.Name == name {
			return m.State
		}
	}
	return ""
}

// waitFor polls cond until it holds or waitTimeout passes.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	nodetest.Eventually(t, what, waitTimeout, cond)
}

// waitCounts waits until every node counts want for key.
func waitCounts(t testing.TB, key string, want int64, nodes ...*tnode) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d requests of %q on every node", want, key), func() bool {
		for _, tn := range nodes {
			if tn.peek(key) != want {
				return false
			}
		}
		return true
	})
}

// waitAlive waits until every node sees exactly k alive members.
func waitAlive(t testing.TB, k int, nodes ...*tnode) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, tn := range nodes {
				t.Logf("%s sees %d alive: %+v", tn.name, tn.alive(), tn.n.Status().Members)
			}
		}
	}()
	waitFor(t, fmt.Sprintf("%d alive members on every node", k), func() bool {
		for _, tn := range nodes {
			if tn.alive() != k {
				return false
			}
		}
		return true
	})
}

// startCluster starts k nodes named n1..nk, all joining n1, and waits
// until they all see each other.
func startCluster(t testing.TB, k int, o nodeOpts) []*tnode {
	t.Helper()
	nodes := []*tnode{startNode(t, "n1", o)}
	o.join = []string{nodes[0].addr}
	for i := 2; i <= k; i++ {
		nodes = append(nodes, startNode(t, fmt.Sprintf("n%d", i), o))
	}
	waitAlive(t, k, nodes...)
	return nodes
}

// names lists the nodes' names, for messages.
func names(nodes []*tnode) string {
	var s []string
	for _, n := range nodes {
		s = append(s, n.name)
	}
	return strings.Join(s, ",")
}

// memberlistNode returns a copy of the memberlist node that from knows as name.
func memberlistNode(t testing.TB, from *tnode, name string) *memberlist.Node {
	t.Helper()
	from.n.mu.Lock()
	defer from.n.mu.Unlock()
	m := from.n.members[name]
	if m == nil {
		t.Fatalf("%s does not know %s", from.name, name)
	}
	nd := m.node
	return &nd
}

// port returns the node's memberlist port.
func (tn *tnode) port(t testing.TB) int {
	_, p, err := splitHostPort(tn.addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
