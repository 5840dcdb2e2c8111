package engine

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

// testNode is one engine over its own counter, with the "default" limit
// (600 per minute in 12 slices) and a 200 ms sync interval.
type testNode struct {
	name string
	c    *counter.Counter
	e    *Engine
	lim  counter.Limit
}

func newTestNode(t testing.TB, name string, nodes int) testNode {
	t.Helper()
	return newTestNodeWith(t, name, nodes, 600, func(cfg *Config) { cfg.DatagramBytes = 1200 }) // force several messages
}

func newTestNodeWith(t testing.TB, name string, nodes int, limit int64, edit func(*Config)) testNode {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Coordinated = false // every check decided locally: the tests count exactly what they hit
	cc.Nodes, cc.Budget = nodes, false
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	lim, err := c.Limit("default", limit, time.Minute, 12)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(name)
	if edit != nil {
		edit(&cfg)
	}
	e, err := New(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testNode{name, c, e, lim}
}

// hit counts k requests of key at ms; all must be allowed.
func (n testNode) hit(t testing.TB, ms int64, key string, k int) {
	t.Helper()
	var res [1]counter.Result
	for range k {
		d, err := n.c.Allow(at(ms), key, 1, []counter.Limit{n.lim}, res[:])
		if err != nil || !d.Allowed {
			t.Fatalf("%s: request of %q at %d ms not allowed: %+v %v", n.name, key, ms, d, err)
		}
	}
}

// count reads key's count at ms through the public API, counting nothing:
// a request of more hits than the limit has room for is denied, and a
// denied request reports the count.
func (n testNode) count(t testing.TB, ms int64, key string) int64 {
	t.Helper()
	var res [1]counter.Result
	if _, err := n.c.Allow(at(ms), key, n.lim.Max(), []counter.Limit{n.lim}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

// msgsTo returns the messages of out for peer to.
func msgsTo(out []Outbound, to string) [][]byte {
	var msgs [][]byte
	for _, o := range out {
		if o.To == to {
			msgs = append(msgs, o.Msgs...)
		}
	}
	return msgs
}

// purposes lists the purposes of out for peer to, in order.
func purposes(out []Outbound, to string) []Purpose {
	var ps []Purpose
	for _, o := range out {
		if o.To == to {
			ps = append(ps, o.Purpose)
		}
	}
	return ps
}

// deliver hands msgs to the engine of to at now and returns what it
// answers, for every peer.
func deliver(t testing.TB, to testNode, now time.Time, msgs [][]byte) []Outbound {
	t.Helper()
	var out []Outbound
	for _, m := range msgs {
		rcv, err := to.e.Receive(now, m)
		o := rcv.Out
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o...)
	}
	return out
}

// up makes every node see every other up at ms, delivering the hellos and
// their replies.
func up(t testing.TB, ms int64, nodes ...testNode) {
	t.Helper()
	for _, a := range nodes {
		for _, b := range nodes {
			if a.name == b.name {
				continue
			}
			out, err := a.e.PeerUp(at(ms), b.name)
			if err != nil {
				t.Fatal(err)
			}
			replies := deliver(t, b, at(ms), msgsTo(out, b.name))
			deliver(t, a, at(ms), msgsTo(replies, a.name))
		}
	}
}

func TestSyncRoundTrip(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	// Keys that share little, so that even coded (version 2) a tick of
	// them needs more than one message.
	key := func(i int) string { return fmt.Sprintf("%02d-client-of-the-round-trip", i) }
	for i := range 300 {
		a.hit(t, int64(i), key(i%100), 1)
	}
	out, err := a.e.Tick(at(300))
	if err != nil {
		t.Fatal(err)
	}
	msgs := msgsTo(out, "b")
	if len(msgs) < 2 || !slices.Equal(purposes(out, "b"), []Purpose{PurposeDelta}) {
		t.Fatalf("%d messages (%v); want the 1200-byte cap to split one delta batch", len(msgs), purposes(out, "b"))
	}
	for _, m := range msgs {
		if len(m) > 1200 {
			t.Fatalf("message of %d bytes over the 1200 cap", len(m))
		}
	}
	deliver(t, b, at(300), msgs)
	deliver(t, b, at(300), msgs) // duplicates change nothing
	for i := range 100 {
		if got := b.count(t, 301, key(i)); got != 3 {
			t.Fatalf("b counts %d for %s, want 3", got, key(i))
		}
	}
	if p := b.e.Peers()["a"]; p.LastMessage != at(300) || p.Offset != 0 || !p.Up {
		t.Fatalf("peer state %+v", p)
	}
	if again, _ := a.e.Tick(at(400)); len(again) != 0 {
		t.Fatalf("second tick without changes sent %v", again)
	}
}

func TestHelloRestoresARestartedNode(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	a.hit(t, 10, "k", 100)
	out, _ := a.e.Tick(at(100))
	deliver(t, b, at(100), msgsTo(out, "b"))

	a2 := newTestNode(t, "a", 2) // restarted, empty
	out, err := a2.e.PeerUp(at(200), "b")
	if err != nil || !slices.Equal(purposes(out, "b"), []Purpose{PurposeHello}) {
		t.Fatalf("PeerUp of a restarted node: %v, %v; want a hello only (nothing to catch up)", purposes(out, "b"), err)
	}
	reply := deliver(t, b, at(200), msgsTo(out, "b"))
	if !slices.Equal(purposes(reply, "a"), []Purpose{PurposeReply}) {
		t.Fatalf("b answers the hello with %v", purposes(reply, "a"))
	}
	deliver(t, a2, at(200), msgsTo(reply, "a"))
	if got := a2.count(t, 201, "k"); got != 100 {
		t.Fatalf("restarted node counts %d, want its 100 back", got)
	}
	// A hello goes once per process and peer.
	if out, _ := a2.e.PeerUp(at(300), "b"); len(purposes(out, "b")) != 0 {
		t.Fatalf("second PeerUp within RejoinInterval sent %v", purposes(out, "b"))
	}
}

func TestReceiveRejectsMalformed(t *testing.T) {
	a := newTestNode(t, "a", 2)
	good, err := a.e.encode(kindHello, at(0), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	bad := [][]byte{
		nil, {kindDelta}, []byte("Xgarbage"), append([]byte{kindDelta}, good[0][1:len(good[0])-1]...),
		append([]byte{kindDelta}, make([]byte, 2<<20)...),
	}
	for i, m := range bad {
		if _, err := a.e.Receive(at(0), m); !errors.Is(err, ErrMalformed) {
			t.Errorf("message %d: err %v, want ErrMalformed", i, err)
		}
	}
	if n := a.e.Stats.DecodeErrors.Load(); n != uint64(len(bad)) {
		t.Fatalf("%d decode errors counted, want %d", n, len(bad))
	}
	if n := a.e.Stats.VersionMismatches.Load(); n != 0 {
		t.Fatalf("%d version mismatches counted for malformed messages, want 0", n)
	}
}

// TestReceiveCountsVersionsApart: a well-framed message of a version this
// node does not decode is a peer of another release, not corruption: it
// is dropped as ErrVersion and counted in VersionMismatches alone.
func TestReceiveCountsVersionsApart(t *testing.T) {
	a := newTestNode(t, "a", 2)
	hello, err := a.e.encode(kindHello, at(0), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	sync := append([]byte(nil), hello[0]...)
	sync[2] = wireVersion + 1 // [kind, array header, version...]
	answer, err := encodeAnswer(a.e.h, coordVersion+1, "b", at(0), 1, answerDecided, true, nil)
	if err != nil {
		t.Fatal(err)
	}
	for name, m := range map[string][]byte{"sync": sync, "answer": answer} {
		if _, err := a.e.Receive(at(0), m); !errors.Is(err, ErrVersion) || errors.Is(err, ErrMalformed) {
			t.Errorf("%s of the next version: err %v, want ErrVersion alone", name, err)
		}
	}
	if n := a.e.Stats.VersionMismatches.Load(); n != 2 {
		t.Errorf("%d version mismatches counted, want 2", n)
	}
	if n := a.e.Stats.DecodeErrors.Load(); n != 0 {
		t.Errorf("%d decode errors counted for messages of another version, want 0", n)
	}
}

func FuzzDecode(f *testing.F) {
	a := newTestNode(f, "a", 2)
	up(f, 0, a, newTestNode(f, "b", 2))
	a.hit(f, 0, "k", 1)
	out, _ := a.e.Tick(at(1))
	hello, _ := a.e.encode(kindHello, at(1), nil, 0)
	f.Add(msgsTo(out, "b")[0])
	f.Add(hello[0])
	shared := newWire(a.e.h) // reused across inputs, as the Engine's pool does
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, m, err := decode(a.e.h, b, DefaultDecodeLimits())
		_, ms, errShared := shared.decode(b, DefaultDecodeLimits())
		if (err == nil) != (errShared == nil) {
			t.Fatalf("fresh wire: %v, reused wire: %v", err, errShared)
		}
		if err != nil {
			return // the shared wire decodes on: the Engine reuses a wire after an error
		}
		if !slices.Equal(m.entries(nil), ms.entries(nil)) {
			t.Fatal("a reused wire decodes other entries than a fresh one")
		}
		// Whatever decodes must re-encode and decode to the same entries.
		es := m.entries(nil)
		out, err := encodeEntries(a.e.h, kind, m.From, m.SentMs, es, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var back []counter.Entry
		for _, o := range out {
			_, m2, err := decode(a.e.h, o, DefaultDecodeLimits())
			if err != nil {
				t.Fatalf("re-encoded message does not decode: %v", err)
			}
			back = m2.entries(back)
		}
		if len(back) != len(es) {
			t.Fatalf("%d entries after a round trip, want %d", len(back), len(es))
		}
	})
}

// TestTwoRestartedNodesLearnEachOther: a and b restart together. c gives
// each its own slices back (StateFor carries only the sender's and the
// receiver's), so a learns b's count only from b: b sends its restored
// slices on at its next tick.
func TestTwoRestartedNodesLearnEachOther(t *testing.T) {
	a, b, c := newTestNode(t, "a", 3), newTestNode(t, "b", 3), newTestNode(t, "c", 3)
	up(t, 0, a, b, c)
	a.hit(t, 10, "k", 30)
	b.hit(t, 10, "k", 30)
	for _, from := range []testNode{a, b} {
		out, _ := from.e.Tick(at(100))
		deliver(t, c, at(100), msgsTo(out, "c"))
	}
	if got := c.count(t, 101, "k"); got != 60 {
		t.Fatalf("c counts %d, want 60", got)
	}

	a2, b2 := newTestNode(t, "a", 3), newTestNode(t, "b", 3) // restarted, empty
	for _, n := range []testNode{a2, b2} {
		out, err := n.e.PeerUp(at(200), "c")
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, n, at(200), msgsTo(deliver(t, c, at(200), msgsTo(out, "c")), n.name))
	}
	// Each has its own 30 back and knows nothing of the other's.
	if got := a2.count(t, 201, "k"); got != 30 {
		t.Fatalf("a after its hello counts %d, want its own 30", got)
	}
	// They see each other up (empty catch-ups, hellos answered with
	// nothing), and their next ticks carry the restored slices on.
	up(t, 300, a2, b2)
	for _, pair := range [][2]testNode{{b2, a2}, {a2, b2}} {
		out, err := pair[0].e.Tick(at(400))
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, pair[1], at(400), msgsTo(out, pair[1].name))
	}
	for name, n := range map[string]testNode{"a": a2, "b": b2} {
		if got := n.count(t, 401, "k"); got != 60 {
			t.Errorf("restarted %s counts %d after a tick, want 60", name, got)
		}
	}
}

func TestNextTickIsAligned(t *testing.T) {
	n := newTestNode(t, "a", 1)
	every := n.e.SyncInterval()
	for _, now := range []time.Time{
		time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 29, 12, 0, 0, 199_999_999, time.UTC),
		time.Date(2026, 11, 29, 12, 0, 0, 200_000_001, time.UTC),
	} {
		next := n.e.NextTick(now)
		if !next.After(now) || next.Sub(now) > every || next.UnixNano()%int64(every) != 0 {
			t.Errorf("NextTick(%v) = %v: want the first multiple of %v after it", now, next, every)
		}
	}
}

// The engine's interval is the counter's: changing it there changes the
// ticks, with nothing to keep in step.
func TestSyncIntervalIsTheCounters(t *testing.T) {
	n := newTestNode(t, "a", 1)
	cc, _ := n.c.Cluster()
	cc.SyncInterval = 50 * time.Millisecond
	if err := n.c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	if got := n.e.NextTick(at(10)); got != at(50) || n.e.SyncInterval() != cc.SyncInterval {
		t.Fatalf("NextTick %v, interval %v; want the counter's 50ms", got, n.e.SyncInterval())
	}
}

// Anti-entropy runs on the tick of every fifth 200 ms slot (1 s), the
// same slots on every node, or on the first tick after a skipped one; a
// heartbeat when no key is hot. Steps through fixed instants.
func TestAntiEntropySchedule(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	// t0 is a multiple of 1 s: slots 0, 5, 10... from it run anti-entropy.
	steps := []struct {
		ms     int64
		hit    int // requests of "hot" just before the tick
		want   []Purpose
		nextAE int64 // NextAntiEntropy after the tick, ms
	}{
		{200, 0, nil, 1000},
		{400, 1, []Purpose{PurposeDelta}, 1000},
		{1000, 0, []Purpose{PurposeHeartbeat}, 2000},
		{1200, 400, []Purpose{PurposeDelta}, 2000}, // 400 of 600: hot
		{1400, 0, nil, 2000},
		// 1600 to 2000 skipped: the next tick makes up the round.
		{2200, 0, []Purpose{PurposeAntiEntropy}, 3000},
		{2400, 0, nil, 3000},
		{3000, 1, []Purpose{PurposeDelta, PurposeAntiEntropy}, 4000},
	}
	for _, st := range steps {
		if st.hit > 0 {
			a.hit(t, st.ms-1, "hot", st.hit)
		}
		out, err := a.e.Tick(at(st.ms))
		if err != nil {
			t.Fatal(err)
		}
		if got := purposes(out, "b"); !slices.Equal(got, st.want) {
			t.Errorf("tick at %d ms: %v, want %v", st.ms, got, st.want)
		}
		for _, o := range out {
			if o.Reliable || !o.Spread {
				t.Errorf("tick at %d ms: %v not a spreadable datagram batch", st.ms, o.Purpose)
			}
		}
		deliver(t, b, at(st.ms), msgsTo(out, "b"))
		if got := a.e.NextAntiEntropy(at(st.ms)); got != at(st.nextAE) {
			t.Errorf("after the tick at %d ms: NextAntiEntropy %v, want %d ms", st.ms, got.Sub(t0), st.nextAE)
		}
	}
	if got := b.count(t, 3001, "hot"); got != 402 {
		t.Fatalf("b counts %d, want 402", got)
	}
}

// PeerUp and PeerDown set the counter's node count and report each change
// once; a peer that flaps gets one catch-up per RejoinInterval.
func TestMembership(t *testing.T) {
	var calls []int
	n := newTestNodeWith(t, "a", 1, 600, func(c *Config) { c.OnNodesChanged = func(k int) { calls = append(calls, k) } })
	n.hit(t, 0, "k", 5) // something to catch up
	steps := []struct {
		ms     int64
		up     bool
		peer   string
		want   []Purpose
		nodes  int
		worst  int64 // the counter's worst case for 10 per second: it follows SetNodes
		called []int
	}{
		{100, true, "b", []Purpose{PurposeCatchUp, PurposeHello}, 2, n.worstFor(t, 2), []int{2}},
		{200, true, "c", []Purpose{PurposeCatchUp, PurposeHello}, 3, n.worstFor(t, 3), []int{2, 3}},
		{300, true, "b", nil, 3, n.worstFor(t, 3), []int{2, 3}}, // a join event for a peer already up
		{400, false, "b", nil, 2, n.worstFor(t, 2), []int{2, 3, 2}},
		{500, true, "b", nil, 3, n.worstFor(t, 3), []int{2, 3, 2, 3}},                                // back within RejoinInterval: no catch-up
		{10_100, false, "b", nil, 2, n.worstFor(t, 2), []int{2, 3, 2, 3, 2}},                         //
		{10_200, true, "b", []Purpose{PurposeCatchUp}, 3, n.worstFor(t, 3), []int{2, 3, 2, 3, 2, 3}}, // 10 s later: a catch-up, no second hello
	}
	for _, st := range steps {
		var out []Outbound
		if st.up {
			var err error
			if out, err = n.e.PeerUp(at(st.ms), st.peer); err != nil {
				t.Fatal(err)
			}
		} else {
			n.e.PeerDown(at(st.ms), st.peer)
		}
		if got := purposes(out, st.peer); !slices.Equal(got, st.want) {
			t.Errorf("%d ms: sent %v, want %v", st.ms, got, st.want)
		}
		for _, o := range out {
			if !o.Reliable {
				t.Errorf("%d ms: %v not over a stream", st.ms, o.Purpose)
			}
		}
		if n.e.Nodes() != st.nodes || n.c.WorstCase(10, time.Second) != st.worst || !slices.Equal(calls, st.called) {
			t.Errorf("%d ms: %d nodes, worst case %d, calls %v; want %d, %d, %v", st.ms, n.e.Nodes(), n.c.WorstCase(10, time.Second), calls, st.nodes, st.worst, st.called)
		}
	}
	n.e.Forget("c")
	if _, ok := n.e.Peers()["c"]; ok || n.e.Nodes() != 2 {
		t.Fatalf("after Forget: peers %v, %d nodes", n.e.Peers(), n.e.Nodes())
	}
}

// worstFor is what the counter's worst case for 10 per second is with k
// nodes, measured on a counter of its own.
func (n testNode) worstFor(t *testing.T, k int) int64 {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cc, _ := n.c.Cluster()
	cc.Nodes = k
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	return c.WorstCase(10, time.Second)
}

// Receive runs concurrently with itself, Tick, PeerUp and Peers (run with
// -race): nothing is serialized behind one lock, and every merge lands.
func TestConcurrentReceive(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	var batches [][][]byte
	for i := range 8 {
		for k := range 50 {
			a.hit(t, int64(i*200), fmt.Sprintf("k%d-%d", i, k), 1)
		}
		out, err := a.e.Tick(at(int64(i*200 + 100)))
		if err != nil {
			t.Fatal(err)
		}
		batches = append(batches, msgsTo(out, "b"))
	}
	var wg sync.WaitGroup
	for _, msgs := range batches {
		wg.Go(func() { deliver(t, b, at(2000), msgs) })
	}
	wg.Go(func() {
		for ms := int64(2000); ms < 4000; ms += 200 {
			if _, err := b.e.Tick(at(ms)); err != nil {
				t.Error(err)
			}
			_ = b.e.Peers()
		}
	})
	wg.Wait()
	for i := range 8 {
		if got := b.count(t, 2001, fmt.Sprintf("k%d-49", i)); got != 1 {
			t.Fatalf("b counts %d for k%d-49, want 1", got, i)
		}
	}
}

func TestEngineConfigValidate(t *testing.T) {
	if err := DefaultConfig("a").Validate(); err != nil {
		t.Fatalf("DefaultConfig: %v", err)
	}
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string
	}{
		{"no self", func(c *Config) { c.Self = "" }, "Self"},
		{"zero anti-entropy", func(c *Config) { c.AntiEntropyInterval = 0 }, "AntiEntropyInterval"},
		{"zero rejoin", func(c *Config) { c.RejoinInterval = 0 }, "RejoinInterval"},
		{"negative silence", func(c *Config) { c.SilenceThreshold = -1 }, "SilenceThreshold"},
		{"tiny datagram", func(c *Config) { c.DatagramBytes = 100 }, "DatagramBytes"},
		{"stream under datagram", func(c *Config) { c.StreamBytes = 1000 }, "StreamBytes"},
		{"negative clock offset", func(c *Config) { c.MaxClockOffset = -1 }, "MaxClockOffset"},
		{"clock offset past the stale age", func(c *Config) { c.MaxClockOffset = c.MaxMessageAge }, "MaxClockOffset"},
		{"every problem: failover", func(c *Config) { c.FailoverMisses, c.FailoverSilence, c.RejoinInterval = 0, 0, 0 }, "FailoverMisses"},
		{"every problem: failover silence", func(c *Config) { c.FailoverMisses, c.FailoverSilence, c.RejoinInterval = 0, 0, 0 }, "FailoverSilence"},
		{"every problem: timing", func(c *Config) { c.FailoverMisses, c.FailoverSilence, c.RejoinInterval = 0, 0, 0 }, "RejoinInterval"},
	} {
		c := DefaultConfig("a")
		tc.change(&c)
		if err := c.Validate(); !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want ErrInvalidConfig mentioning %q", tc.name, err, tc.want)
		}
	}
	c, _ := counter.New(counter.DefaultConfig())
	if _, err := New(c, DefaultConfig("a")); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("a counter in single-node mode: %v", err)
	}
}

// TestAntiEntropyResendsChangedHotSlices: anti-entropy re-sends every slice
// of a hot key at its first two rounds; at every hotFullEvery-th round the
// slices that may have changed since the full round before the last one;
// and in between those that may have changed since the round before the
// last. So each change is in the next two rounds and the next two full
// rounds after it.
func TestAntiEntropyResendsChangedHotSlices(t *testing.T) {
	ns := routedNodes(t, counter.RouteNever, 600, "a", "b")
	a := ns[0]
	for i := range int64(400) { // 400 admissions over 40 s: hot, in many slices
		admit(t, a, 1000+100*i, "hot", 1)
	}
	aeEntries := func(ms int64) int {
		t.Helper()
		out, err := a.e.Tick(at(ms))
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, o := range out {
			if o.Purpose != PurposeAntiEntropy || o.To != "b" {
				continue
			}
			for _, m := range o.Msgs {
				_, msg, err := newWire(a.e.h).decode(m, DefaultDecodeLimits())
				if err != nil {
					t.Fatal(err)
				}
				n += len(msg.entries(nil))
			}
		}
		return n
	}
	every := a.e.cfg.AntiEntropyInterval.Milliseconds()
	ms := 50 * every // every slice older than its slice length and two rounds
	all := aeEntries(ms)
	if all < 30 {
		t.Fatalf("the first round re-sent %d slices of the hot key, want its every live slice (over 30)", all)
	}
	// A slice may grow for its slice length after its start: it is
	// re-sent from then until two rounds after that.
	sliceMs := (60 * time.Second / 12).Milliseconds()
	changeAt := int64(-1)
	fullAt := []int64{ms} // the full rounds' instants: round 0 first
	for round := int64(1); round <= 3*hotFullEvery; round++ {
		ms += every
		if round == 4 {
			changeAt = ms - every/2 // a new slice between rounds 3 and 4
			admit(t, a, changeAt, "hot", 1)
		}
		got := aeEntries(ms)
		switch {
		case round == 1:
			if got < all-5 { // a few left the window meanwhile
				t.Errorf("round %d re-sent %d slices, want them all (about %d)", round, got, all)
			}
		case round%hotFullEvery == 0:
			// Since the full round before the last (started within that
			// span and a slice length: it may have grown since).
			since := fullAt[len(fullAt)-2]
			want := 0
			if changeAt > since-sliceMs {
				want = 1
			}
			if got != want {
				t.Errorf("full round %d re-sent %d slices, want %d: those that may have changed since the full round at %d ms", round, got, want, since)
			}
		case changeAt >= 0 && ms-changeAt < sliceMs+2*every:
			if got != 1 {
				t.Errorf("round %d re-sent %d slices, want the one that may have changed since round %d", round, got, round-2)
			}
		default:
			if got != 0 {
				t.Errorf("round %d re-sent %d slices, want none: none may have changed since round %d", round, got, round-2)
			}
		}
		if round == 1 || round%hotFullEvery == 0 {
			fullAt = append(fullAt, ms)
		}
	}
}
