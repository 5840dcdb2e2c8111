package cluster

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/promtest"
)

func TestClusterConverges(t *testing.T) {
	for _, transport := range []string{TransportUDP, TransportTCP} {
		t.Run(transport, func(t *testing.T) {
			nodes := startCluster(t, 3, nodeOpts{config: func(c *Config) { c.SyncTransport = transport }})
			// Checks on different nodes for the same key, and keys seen by one node only.
			nodes[0].hit(t, "shared", 5)
			nodes[1].hit(t, "shared", 7)
			nodes[2].hit(t, "shared", 1)
			nodes[2].hit(t, "only-n3", 3)
			waitCounts(t, "shared", 13, nodes...)
			waitCounts(t, "only-n3", 3, nodes...)

			for _, tn := range nodes {
				st := tn.n.Status()
				if st.Self != tn.name || st.Nodes != 3 || len(st.Members) != 3 {
					t.Fatalf("%s: status %+v", tn.name, st)
				}
				for _, m := range st.Members {
					heard := m.LastDeltaAgeMs != nil && m.ClockOffsetMs != nil
					if m.State != "alive" || m.Addr == "" || heard != (m.Name != tn.name) {
						t.Errorf("%s sees member %+v", tn.name, m)
					}
				}
				if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_cluster_members", "state", "alive"); v != 3 {
					t.Errorf("%s: limiterd_cluster_members{state=alive} = %v, want 3", tn.name, v)
				}
				for _, dir := range []string{"sent", "received"} {
					if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_sync_messages_total", "direction", dir); v == 0 {
						t.Errorf("%s: no sync messages %s", tn.name, dir)
					}
				}
				// Every node had its peers' deltas, and judged each one's delay.
				if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_sync_delta_delay_seconds"); v == 0 {
					t.Errorf("%s: no delta's delay observed", tn.name)
				}
				if _, ok := promtest.MustGather(t, tn.reg).Value("limiterd_sync_late_deltas_total"); !ok {
					t.Errorf("%s: no limiterd_sync_late_deltas_total", tn.name)
				}
				for _, peer := range nodes {
					_, ok := promtest.MustGather(t, tn.reg).Value("limiterd_sync_merge_lag_seconds", "peer", peer.name)
					if ok != (peer != tn) {
						t.Errorf("%s: merge lag series for %s present: %v", tn.name, peer.name, ok)
					}
				}
				if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_cluster_events_total", "event", "join"); v < 3 {
					t.Errorf("%s: %v join events, want at least 3 (itself and two peers)", tn.name, v)
				}
				if err := tn.n.Ready(); err != nil {
					t.Errorf("%s: not ready: %v", tn.name, err)
				}
				// Every peer's metadata stated the sync version it decodes.
				if v := tn.n.engine.SyncVersion(); v != engine.SyncVersion {
					t.Errorf("%s writes sync version %d, want %d", tn.name, v, engine.SyncVersion)
				}
			}
		})
	}
}

func TestStatusJSON(t *testing.T) {
	nodes := startCluster(t, 2, nodeOpts{config: func(c *Config) { c.HTTPAddr = "127.0.0.1:8081" }})
	nodes[0].hit(t, "k", 1)
	waitCounts(t, "k", 1, nodes...)
	b, err := json.Marshal(nodes[1].n.Status())
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Self    string
		Nodes   int
		Members []map[string]any
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if got.Self != "n2" || got.Nodes != 2 || len(got.Members) != 2 {
		t.Fatalf("status %s", b)
	}
	for _, m := range got.Members {
		for _, field := range []string{"name", "addr", "http", "state", "last_delta_age_ms", "clock_offset_ms"} {
			if _, ok := m[field]; !ok {
				t.Errorf("member %v lacks %q in %s", m["name"], field, b)
			}
		}
		if m["http"] != "127.0.0.1:8081" {
			t.Errorf("member %v publishes http %v", m["name"], m["http"])
		}
	}
}

// Every message may arrive many times (anti-entropy re-sends hot keys, a
// restart re-sends state): counts are absolute and merged by max, so
// nothing is counted twice over the real transport either.
func TestMergeIsIdempotentOverTheNetwork(t *testing.T) {
	nodes := startCluster(t, 2, nodeOpts{limit: 20})
	a, b := nodes[0], nodes[1]
	a.hit(t, "hot", 15) // 75 % of the limit: anti-entropy re-sends it every interval
	waitCounts(t, "hot", 15, a, b)

	// Replay a's full state to b through memberlist, several times, by
	// datagram and by stream, on top of the anti-entropy re-sends.
	ignored := b.n.engine.Stats.EntriesIgnored.Load()
	nb := memberlistNode(t, a, b.name)
	for range 5 {
		msgs, err := a.n.engine.StateFor(time.Now(), b.name)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("state: %d messages, %v", len(msgs), err)
		}
		for _, m := range msgs {
			if err := a.n.ml.SendBestEffort(nb, m); err != nil {
				t.Fatal(err)
			}
			if err := a.n.ml.SendReliable(nb, m); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitFor(t, "b to receive the replays", func() bool {
		return b.n.engine.Stats.EntriesIgnored.Load() >= ignored+10
	})
	for _, tn := range nodes {
		if got := tn.peek("hot"); got != 15 {
			t.Fatalf("%s counts %d after duplicates, want 15", tn.name, got)
		}
	}
	// The count still moves when something new happens.
	b.hit(t, "hot", 2)
	waitCounts(t, "hot", 17, a, b)
}

// A node that restarts under the same name learns back, from its peers,
// the counts it had sent before it died, whether or not the cluster had
// noticed its death, and nothing is counted twice.
func TestRestartRecoversCounts(t *testing.T) {
	for _, tc := range []struct {
		name      string
		waitDeath bool // restart only once the peers saw it dead
		newPort   bool // restart at another address, as a rescheduled pod
	}{
		{"after the peers saw it dead", true, false},
		{"before anyone noticed", false, false},
		{"at another address", true, true},
		{"at another address before anyone noticed", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, 3, nodeOpts{})
			n1, n2, n3 := nodes[0], nodes[1], nodes[2]
			n2.hit(t, "k", 20)
			n1.hit(t, "k", 4)
			waitCounts(t, "k", 24, nodes...)

			port := n2.port(t)
			n2.crash()
			if tc.waitDeath {
				waitFor(t, "n1 and n3 to see n2 dead", func() bool {
					return n1.stateOf("n2") == "dead" && n3.stateOf("n2") == "dead"
				})
			}
			if tc.newPort {
				port = 0
			}
			again := startNode(t, "n2", nodeOpts{port: port, join: []string{n1.addr}})
			nodes[1] = again
			waitCounts(t, "k", 24, nodes...) // its own 20 came back, and n1's 4
			waitAlive(t, 3, nodes...)

			again.hit(t, "k", 3) // new counts on top of the restored ones
			waitCounts(t, "k", 27, nodes...)
		})
	}
}

// A partition leaves each side counting on its own (NFR3: nobody waits
// for the other side); after the heal the seeds are joined again, the two
// halves merge, and every node counts what both sides admitted.
func TestPartitionAndHeal(t *testing.T) {
	nw := newNetwork()
	nodes := startCluster(t, 4, nodeOpts{nw: nw})
	left, right := nodes[:2], nodes[2:]
	nodes[0].hit(t, "k", 2)
	nodes[3].hit(t, "k", 3)
	waitCounts(t, "k", 5, nodes...)

	nw.partition(left, right)
	waitFor(t, "each side to see the other dead", func() bool {
		for _, a := range left {
			for _, b := range right {
				if a.stateOf(b.name) != "dead" || b.stateOf(a.name) != "dead" {
					return false
				}
			}
		}
		return true
	})
	for _, tn := range nodes {
		if st := tn.n.Status(); st.Nodes != 2 {
			t.Errorf("%s counts %d nodes during the partition, want 2", tn.name, st.Nodes)
		}
		for _, other := range nodes {
			_, ok := promtest.MustGather(t, tn.reg).Value("limiterd_sync_merge_lag_seconds", "peer", other.name)
			if want := other != tn && (other.name > "n2") == (tn.name > "n2"); ok != want {
				t.Errorf("%s: lag series for %s present: %v, want %v", tn.name, other.name, ok, want)
			}
		}
		if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_cluster_members", "state", "dead"); v != 2 {
			t.Errorf("%s: limiterd_cluster_members{state=dead} = %v, want 2", tn.name, v)
		}
	}
	// Each side keeps deciding on what it knows: counts merged before the
	// partition plus its own.
	nodes[1].hit(t, "k", 4)
	nodes[2].hit(t, "k", 1)
	waitCounts(t, "k", 9, left...)
	waitCounts(t, "k", 6, right...)

	nw.heal()
	waitAlive(t, 4, nodes...)
	waitCounts(t, "k", 10, nodes...)
}

// Nodes of another cluster (another gossip key, another label, or none)
// can neither join nor inject counts: memberlist drops their packets and
// streams before they reach the sync code.
func TestForeignNodesCannotJoinOrInject(t *testing.T) {
	key := []byte("0123456789abcdef")
	other := []byte("fedcba9876543210")
	for _, tc := range []struct {
		name             string
		member, intruder func(*Config)
	}{
		{"different gossip key", func(c *Config) { c.GossipKey = key }, func(c *Config) { c.GossipKey = other }},
		{"no gossip key", func(c *Config) { c.GossipKey = key }, nil},
		{"different label", func(c *Config) { c.Label = "prod" }, func(c *Config) { c.Label = "staging" }},
		{"no label", func(c *Config) { c.Label = "prod" }, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := startCluster(t, 2, nodeOpts{config: tc.member})
			intruder := startNode(t, "intruder", nodeOpts{join: []string{nodes[0].addr}, config: tc.intruder})
			waitFor(t, "the intruder to try joining three times", func() bool { return intruder.n.joins.Load() >= 3 })
			if err := intruder.n.Ready(); err == nil {
				t.Fatal("intruder is ready: it joined")
			}

			// Inject a count straight to the members, by datagram and stream.
			intruder.hit(t, "victim", 50)
			msgs, err := intruder.n.engine.StateFor(time.Now(), "n1")
			if err != nil || len(msgs) == 0 {
				t.Fatalf("state: %d messages, %v", len(msgs), err)
			}
			for _, tn := range nodes {
				nd := &memberlist.Node{Name: tn.name, Addr: net.ParseIP("127.0.0.1"), Port: uint16(tn.port(t))}
				for _, m := range msgs {
					_ = intruder.n.ml.SendBestEffort(nd, m)
					_ = intruder.n.ml.SendReliable(nd, m) // fails or is dropped on arrival
				}
			}
			// Let legitimate traffic flow past the injection, then look.
			nodes[1].hit(t, "marker", 1)
			waitCounts(t, "marker", 1, nodes...)
			for _, tn := range nodes {
				if got := tn.peek("victim"); got != 0 {
					t.Errorf("%s counts %d injected requests", tn.name, got)
				}
				if st := tn.n.Status(); st.Nodes != 2 || len(st.Members) != 2 {
					t.Errorf("%s sees %+v", tn.name, st)
				}
			}
			if got := nodes[0].n.engine.Stats.DecodeErrors.Load() + nodes[1].n.engine.Stats.DecodeErrors.Load(); got != 0 {
				t.Errorf("%d foreign messages reached the decoder", got)
			}
		})
	}
}

// Malformed sync messages from a member are counted and dropped, and one
// of another version is counted apart; the node keeps syncing.
func TestMalformedMessagesAreCountedNotFatal(t *testing.T) {
	nodes := startCluster(t, 2, nodeOpts{})
	a, b := nodes[0], nodes[1]
	nb := memberlistNode(t, a, b.name)
	junk := [][]byte{{engine.KindDelta}, []byte("Dnot msgpack at all"), {engine.KindState, 0x93, 0xff}, []byte("X\x01\x02"), make([]byte, 900)}
	for _, m := range junk {
		if err := a.n.ml.SendReliable(nb, m); err != nil {
			t.Fatal(err)
		}
	}
	// A message of a version b does not decode (0x7f, after the kind and
	// the array header) is a peer of another release: counted apart.
	if err := a.n.ml.SendReliable(nb, []byte{engine.KindHello, 0x94, 0x7f}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b to count the malformed messages", func() bool {
		v, _ := promtest.MustGather(t, b.reg).Value("limiterd_sync_decode_errors_total")
		return v == float64(len(junk))
	})
	waitFor(t, "b to count the message of another version", func() bool {
		v, _ := promtest.MustGather(t, b.reg).Value("limiterd_sync_version_mismatches_total")
		return v == 1
	})
	a.hit(t, "k", 2)
	waitCounts(t, "k", 2, a, b)
}

// A graceful shutdown sends the last changes, and the peers record the
// node as left, not dead.
func TestGracefulLeave(t *testing.T) {
	nodes := startCluster(t, 3, nodeOpts{sync: time.Hour})
	nodes[2].hit(t, "k", 6) // never ticked: only the final flush can carry it
	nodes[2].stop()
	waitFor(t, "n1 and n2 to see n3 left", func() bool {
		return nodes[0].stateOf("n3") == "left" && nodes[1].stateOf("n3") == "left"
	})
	waitCounts(t, "k", 6, nodes[:2]...)
	for _, tn := range nodes[:2] {
		if v, _ := promtest.MustGather(t, tn.reg).Value("limiterd_cluster_members", "state", "left"); v != 1 {
			t.Errorf("%s: limiterd_cluster_members{state=left} = %v, want 1", tn.name, v)
		}
		if st := tn.n.Status(); st.Nodes != 2 {
			t.Errorf("%s: %d nodes after the leave, want 2", tn.name, st.Nodes)
		}
	}
}

// TestWholeClusterStopsQuietly: every node stopped at once, as a rollout
// or an uninstall does, logs nothing at WARN or above. memberlist shuts its
// transport down before its gossip and probe timers stop, and their sends
// in between were logged as errors; a node's leave could wait out its
// timeout for peers that had all left already, which was logged as a
// warning though no one was left to tell.
func TestWholeClusterStopsQuietly(t *testing.T) {
	var logged nodetest.LockedBuffer
	lg := slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	nodes := startCluster(t, 4, nodeOpts{log: lg})
	var wg sync.WaitGroup
	for _, tn := range nodes {
		wg.Go(tn.stop)
	}
	wg.Wait()
	if s := logged.String(); s != "" {
		t.Errorf("a clean stop of the whole cluster logged:\n%s", s)
	}
}

// With the longest label and encryption a datagram holds 1,108 bytes of
// message; a key of 1 KiB counted by a node with a long name cannot fit,
// and its delta goes over a stream rather than being cut or lost. Every
// other message fits a datagram.
func TestOversizeDeltaGoesByStream(t *testing.T) {
	nw := newNetwork()
	nw.mtu = DefaultDatagramBudget // a datagram over budget would be lost
	o := nodeOpts{nw: nw, config: func(c *Config) {
		c.DatagramBudget = DefaultDatagramBudget // not the loopback's
		c.Label = strings.Repeat("l", 255)
		c.GossipKey = []byte("0123456789abcdef0123456789abcdef")
	}}
	long1, long2 := strings.Repeat("a", 100)+"-1", strings.Repeat("a", 100)+"-2"
	first := startNode(t, long1, o)
	o.join = []string{first.addr}
	nodes := []*tnode{first, startNode(t, long2, o)}
	waitAlive(t, 2, nodes...)
	long := strings.Repeat("k", 1024)
	nodes[0].hit(t, long, 2)
	for i := range 300 {
		nodes[0].hit(t, fmt.Sprintf("client-%d-%s", i, strings.Repeat("x", i%120)), 1)
	}
	waitCounts(t, long, 2, nodes...)
	waitCounts(t, "client-299-"+strings.Repeat("x", 299%120), 1, nodes...)

	msgs, err := nodes[0].n.engine.StateFor(time.Now(), long2)
	if err != nil {
		t.Fatal(err)
	}
	// The same entries cut for datagrams: only messages with the long key
	// (one per limit and slice that counted it) are over.
	over := 0
	for _, m := range msgs {
		_, _, _, es, err := engine.DecodeEntries(m, engine.DefaultDecodeLimits())
		if err != nil {
			t.Fatal(err)
		}
		out, err := engine.EncodeEntries(engine.KindDelta, long1, 1_800_000_000_000, es, nodes[0].n.dgram)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if len(o) <= nodes[0].n.dgram {
				continue
			}
			over++
			if !strings.Contains(string(o), long) {
				t.Errorf("a message of %d bytes without the long key is over the budget of %d", len(o), nodes[0].n.dgram)
			}
		}
	}
	if over == 0 {
		t.Fatal("no message over the datagram budget: the stream fallback went untested")
	}
}

// recordLargest makes nw lose nothing and keep the size of the largest
// datagram it carried.
func recordLargest(nw *network) *atomic.Int64 {
	largest := new(atomic.Int64)
	nw.lose = func(_, _ string, b []byte) bool {
		for n := int64(len(b)); ; {
			m := largest.Load()
			if n <= m || largest.CompareAndSwap(m, n) {
				break
			}
		}
		return false
	}
	return largest
}

// waitEngineUp waits until tn's engine has peer up: until then its ticks
// send the peer no deltas (memberlist's member table, which startCluster
// waits on, leads the engine's PeerUp by a reconcile of the sync loop),
// and the peer learns those changes by a catch-up over a stream instead.
func waitEngineUp(t testing.TB, tn *tnode, peer string) {
	t.Helper()
	waitFor(t, tn.name+"'s engine to have "+peer+" up", func() bool { return tn.n.engine.Peers()[peer].Up })
}

// With a larger DatagramBudget (a network of jumbo frames) a node's
// deltas travel in datagrams of up to that size and no more: a path of
// that MTU, which drops anything longer, delivers every count.
func TestLargerDatagramBudget(t *testing.T) {
	const budget = 8900
	nw := newNetwork()
	nw.mtu = budget
	largest := recordLargest(nw)
	// A sync interval the checks below fit in (TestLoopbackDatagramBudget).
	nodes := startCluster(t, 2, nodeOpts{nw: nw, sync: 500 * time.Millisecond, config: func(c *Config) { c.DatagramBudget = budget }})
	waitEngineUp(t, nodes[0], nodes[1].name)
	for i := range 1000 {
		nodes[0].hit(t, fmt.Sprintf("client-%04d", i), 1)
	}
	for _, k := range []string{"client-0000", "client-0500", "client-0999"} {
		waitCounts(t, k, 1, nodes...)
	}
	if got := largest.Load(); got <= DefaultDatagramBudget || got > budget {
		t.Fatalf("largest datagram %d bytes, want over the default budget %d and at most %d", got, DefaultDatagramBudget, budget)
	}
	if got := nodes[0].n.dgram; got != budget-6 {
		t.Fatalf("sync messages of at most %d bytes, want %d", got, budget-6)
	}
}

// With the default budget a node bound to a loopback address sends its
// deltas in datagrams as large as the loopback carries (every peer is on
// the host), and every count arrives.
func TestLoopbackDatagramBudget(t *testing.T) {
	budget := datagramBudget("127.0.0.1", loopbackMTU(), runtime.GOOS)
	if budget <= DefaultDatagramBudget {
		t.Fatalf("this host's loopback (MTU %d) carries a budget of only %d", loopbackMTU(), budget)
	}
	nw := newNetwork()
	largest := recordLargest(nw)
	// A sync interval the 3,000 checks below fit in even under the race
	// detector on a loaded machine: split over two ticks at most, one of
	// them carries 1,500 changes or more, some 30 KB. (At the tests' 50 ms
	// a run under the race detector saw no datagram over 8,717 bytes.)
	nodes := startCluster(t, 2, nodeOpts{nw: nw, sync: 500 * time.Millisecond})
	if got := nodes[0].n.cfg.DatagramBudget; got != budget {
		t.Fatalf("budget %d, want the loopback's %d", got, budget)
	}
	waitEngineUp(t, nodes[0], nodes[1].name)
	for i := range 3000 {
		nodes[0].hit(t, fmt.Sprintf("client-%04d", i), 1)
	}
	for _, k := range []string{"client-0000", "client-1500", "client-2999"} {
		waitCounts(t, k, 1, nodes...)
	}
	if got := largest.Load(); got <= 8900 || got > int64(budget) {
		t.Fatalf("largest datagram %d bytes, want over 8,900 and at most %d", got, budget)
	}
}

// A partition shorter than failure detection (memberlist declares nobody
// dead; here it does not probe at all) loses the deltas sent across it,
// and a key under half its limit is not re-sent by anti-entropy. When the
// heal brings the first message from a peer silent for longer than the
// engine's threshold, the receiver sends it a catch-up: every node
// converges to what both sides counted, and never counts more.
func TestUnnoticedPartitionHealsByCatchUp(t *testing.T) {
	nw := newNetwork()
	nodes := startCluster(t, 4, nodeOpts{nw: nw, limit: 100, tune: func(mc *memberlist.Config) {
		mc.ProbeInterval = time.Hour // no failure detection: the partition goes unnoticed
	}})
	left, right := nodes[:2], nodes[2:]
	nw.partition(left, right)
	nodes[0].hit(t, "k", 30)
	nodes[3].hit(t, "k", 30)
	waitCounts(t, "k", 30, left...)
	waitCounts(t, "k", 30, right...)
	waitFor(t, "each side to see the other suspect (silent), not dead", func() bool {
		for _, a := range left {
			for _, b := range right {
				if a.stateOf(b.name) != "suspect" || b.stateOf(a.name) != "suspect" {
					return false
				}
			}
		}
		return true
	})

	nw.heal()
	waitFor(t, "every node to count both sides' 60, never more", func() bool {
		done := true
		for _, tn := range nodes {
			got := tn.peek("k")
			if got > 60 {
				t.Fatalf("%s counts %d, more than the 60 admitted", tn.name, got)
			}
			done = done && got == 60
		}
		return done
	})
	var catchUps uint64
	for _, tn := range nodes {
		catchUps += tn.n.engine.Stats.SilenceCatchUps.Load()
		for _, other := range nodes {
			if other != tn && tn.stateOf(other.name) == "dead" {
				t.Errorf("%s saw %s dead: the partition was noticed", tn.name, other.name)
			}
		}
	}
	if catchUps == 0 {
		t.Fatal("converged without a catch-up after silence")
	}
}
