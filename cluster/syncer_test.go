package cluster

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

type testNode struct {
	c   *counter.Counter
	s   *Syncer
	lim counter.Limit
}

func newTestNode(t *testing.T, name string, nodes int) testNode {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Nodes, cc.Budget = nodes, false
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	lim, err := c.Limit("default", 600, time.Minute, 12)
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultSyncConfig(name)
	cfg.MaxMessageBytes = 1200 // force several messages
	s, err := NewSyncer(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return testNode{c, s, lim}
}

func (n testNode) count(t *testing.T, ms int64, key string) int64 {
	t.Helper()
	var res [1]counter.Result
	if _, err := n.c.Allow(at(ms), key, 600, []counter.Limit{n.lim}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

func deliver(t *testing.T, to testNode, now time.Time, msgs [][]byte) [][]byte {
	t.Helper()
	var replies [][]byte
	for _, m := range msgs {
		_, r, err := to.s.Receive(now, m)
		if err != nil {
			t.Fatal(err)
		}
		replies = append(replies, r...)
	}
	return replies
}

func TestSyncRoundTrip(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	var res [1]counter.Result
	for i := range 300 {
		key := "client-" + string(rune('A'+i%50))
		if _, err := a.c.Allow(at(int64(i)), key, 1, []counter.Limit{a.lim}, res[:]); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := a.s.Tick(at(300))
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) < 2 {
		t.Fatalf("%d messages; want the 1200-byte cap to split them", len(msgs))
	}
	for _, m := range msgs {
		if len(m) > 1200 {
			t.Fatalf("message of %d bytes over the 1200 cap", len(m))
		}
	}
	deliver(t, b, at(300), msgs)
	deliver(t, b, at(300), msgs) // duplicates change nothing
	for i := range 50 {
		key := "client-" + string(rune('A'+i))
		if got := b.count(t, 301, key); got != 6 {
			t.Fatalf("b counts %d for %s, want 6", got, key)
		}
	}
	if p := b.s.Peers()["a"]; p.LastMessage != at(300) || p.Offset != 0 {
		t.Fatalf("peer state %+v", p)
	}
	if again, _ := a.s.Tick(at(400)); len(again) != 0 {
		t.Fatalf("second tick without changes sent %d messages", len(again))
	}
}

func TestHelloRestoresARestartedNode(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	var res [1]counter.Result
	for i := range 100 {
		a.c.Allow(at(int64(i)), "k", 1, []counter.Limit{a.lim}, res[:])
	}
	msgs, _ := a.s.Tick(at(100))
	deliver(t, b, at(100), msgs)

	a2 := newTestNode(t, "a", 2) // restarted, empty
	hello, err := a2.s.Hello(at(200))
	if err != nil || len(hello) != 1 {
		t.Fatalf("hello: %d messages, %v", len(hello), err)
	}
	reply := deliver(t, b, at(200), hello)
	deliver(t, a2, at(200), reply)
	if got := a2.count(t, 201, "k"); got != 100 {
		t.Fatalf("restarted node counts %d, want its 100 back", got)
	}
}

func TestReceiveRejectsMalformed(t *testing.T) {
	a := newTestNode(t, "a", 2)
	good, _ := a.s.Hello(at(0))
	bad := [][]byte{
		nil, {kindDelta}, []byte("Xgarbage"), append([]byte{kindDelta}, good[0][1:len(good[0])-1]...),
		append([]byte{kindDelta}, make([]byte, 2<<20)...),
	}
	for i, m := range bad {
		if _, _, err := a.s.Receive(at(0), m); !errors.Is(err, ErrMalformed) {
			t.Errorf("message %d: err %v, want ErrMalformed", i, err)
		}
	}
	if n := a.s.Stats.DecodeErrors.Load(); n != uint64(len(bad)) {
		t.Fatalf("%d decode errors counted, want %d", n, len(bad))
	}
}

func FuzzDecode(f *testing.F) {
	a := newTestNodeF(f)
	var res [1]counter.Result
	a.c.Allow(at(0), "k", 1, []counter.Limit{a.lim}, res[:])
	msgs, _ := a.s.Tick(at(1))
	hello, _ := a.s.Hello(at(1))
	f.Add(msgs[0])
	f.Add(hello[0])
	shared := newWire(a.s.h) // reused across inputs, as the Syncer's pool does
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, m, err := decode(a.s.h, b, DefaultDecodeLimits())
		_, ms, errShared := shared.decode(b, DefaultDecodeLimits())
		if (err == nil) != (errShared == nil) {
			t.Fatalf("fresh wire: %v, reused wire: %v", err, errShared)
		}
		if err != nil {
			shared = newWire(a.s.h) // as the Syncer drops a wire after an error
			return
		}
		if !slices.Equal(m.entries(nil), ms.entries(nil)) {
			t.Fatal("a reused wire decodes other entries than a fresh one")
		}
		// Whatever decodes must re-encode and decode to the same entries.
		es := m.entries(nil)
		out, err := encodeEntries(a.s.h, kind, m.From, m.SentMs, es, 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		var back []counter.Entry
		for _, o := range out {
			_, m2, err := decode(a.s.h, o, DefaultDecodeLimits())
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

func newTestNodeF(f *testing.F) testNode {
	c, _ := counter.New(counter.DefaultConfig())
	cc := counter.DefaultClusterConfig("a")
	cc.Nodes = 2
	c.SetCluster(cc)
	lim, _ := c.Limit("default", 600, time.Minute, 12)
	s, err := NewSyncer(c, DefaultSyncConfig("a"))
	if err != nil {
		f.Fatal(err)
	}
	return testNode{c, s, lim}
}

// TestTwoRestartedNodesLearnEachOther: a and b restart together. c gives
// each its own slices back (StateFor carries only the sender's and the
// receiver's), so a learns b's count only from b: b sends its restored
// slices on at its next tick.
func TestTwoRestartedNodesLearnEachOther(t *testing.T) {
	a, b, c := newTestNode(t, "a", 3), newTestNode(t, "b", 3), newTestNode(t, "c", 3)
	var res [1]counter.Result
	for i := range 30 {
		a.c.Allow(at(int64(i)), "k", 1, []counter.Limit{a.lim}, res[:])
		b.c.Allow(at(int64(i)), "k", 1, []counter.Limit{b.lim}, res[:])
	}
	for _, from := range []testNode{a, b} {
		msgs, _ := from.s.Tick(at(100))
		deliver(t, c, at(100), msgs)
	}
	if got := c.count(t, 101, "k"); got != 60 {
		t.Fatalf("c counts %d, want 60", got)
	}

	a2, b2 := newTestNode(t, "a", 3), newTestNode(t, "b", 3) // restarted, empty
	for _, n := range []testNode{a2, b2} {
		hello, err := n.s.Hello(at(200))
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, n, at(200), deliver(t, c, at(200), hello))
	}
	// Each has its own 30 back and knows nothing of the other's.
	if got := a2.count(t, 201, "k"); got != 30 {
		t.Fatalf("a after its hello counts %d, want its own 30", got)
	}
	// Their next ticks carry the restored slices on.
	for _, pair := range [][2]testNode{{b2, a2}, {a2, b2}} {
		msgs, err := pair[0].s.Tick(at(400))
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, pair[1], at(400), msgs)
	}
	for name, n := range map[string]testNode{"a": a2, "b": b2} {
		if got := n.count(t, 401, "k"); got != 60 {
			t.Errorf("restarted %s counts %d after a tick, want 60", name, got)
		}
	}
}
