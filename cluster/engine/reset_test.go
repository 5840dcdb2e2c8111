package engine

import (
	"errors"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// resetNet is three test engines up to each other, with the messages in
// flight between them kept until a test delivers them.
type resetNet struct {
	t     *testing.T
	nodes map[string]testNode
	// flight holds what was sent and not yet delivered, per receiver.
	flight map[string][][]byte
	// replies are the resets' replies each node's Receive returned.
	replies map[string][]ResetReply
}

func newResetNet(t *testing.T, names ...string) *resetNet {
	t.Helper()
	rn := &resetNet{t: t, nodes: map[string]testNode{}, flight: map[string][][]byte{}, replies: map[string][]ResetReply{}}
	var ns []testNode
	for _, name := range names {
		n := newTestNode(t, name, len(names))
		rn.nodes[name] = n
		ns = append(ns, n)
	}
	up(t, 0, ns...)
	return rn
}

// send puts out in flight.
func (rn *resetNet) send(out []Outbound) {
	for _, o := range out {
		rn.flight[o.To] = append(rn.flight[o.To], o.Msgs...)
	}
}

// deliverTo hands to every message in flight for it at ms, and puts what
// it sends back in flight.
func (rn *resetNet) deliverTo(to string, ms int64) {
	rn.t.Helper()
	msgs := rn.flight[to]
	rn.flight[to] = nil
	for _, m := range msgs {
		rcv, err := rn.nodes[to].e.Receive(at(ms), m)
		if err != nil {
			rn.t.Fatalf("%s: %v", to, err)
		}
		if rcv.Reset != nil {
			rn.replies[to] = append(rn.replies[to], *rcv.Reset)
		}
		rn.send(rcv.Out)
	}
}

// keyFor returns a key the engines agree node want coordinates.
func (rn *resetNet) keyFor(want string) string {
	key := "x"
	for i := 0; rn.nodes[want].e.Coordinator(at(0), key) != want; i++ {
		key = string(rune('a'+i%26)) + key
	}
	return key
}

// TestResetThroughTheCoordinator steps a reset asked on node a of a key
// that k coordinates: k applies it at its instant and sends it on to b
// and a, each applies it and acknowledges it to a, and k answers a. Every
// node then counts nothing of what came before, and a delta sent before
// the reset and delivered after it brings nothing back.
func TestResetThroughTheCoordinator(t *testing.T) {
	rn := newResetNet(t, "a", "b", "k")
	a, b, k := rn.nodes["a"], rn.nodes["b"], rn.nodes["k"]
	key := rn.keyFor("k")
	a.hit(t, 100, key, 3)
	b.hit(t, 100, key, 4)
	k.hit(t, 100, key, 5)
	for _, n := range []testNode{a, b, k} {
		out, err := n.e.Tick(at(200))
		if err != nil {
			t.Fatal(err)
		}
		rn.send(out)
	}
	late := rn.flight["a"] // b's and k's deltas, not yet delivered to a
	rn.flight["a"] = nil
	rn.deliverTo("b", 210)
	rn.deliverTo("k", 210)
	if got := peekCount(t, k, 220, key); got != 12 {
		t.Fatalf("k counts %d before the reset, want 12", got)
	}

	st, err := a.e.Reset(at(300), key, []string{a.lim.ID()})
	if err != nil || st.Local || st.Coordinator != "k" || len(st.Out) != 1 || st.Out[0].To != "k" || st.Out[0].Purpose != PurposeReset {
		t.Fatalf("Reset = %+v, %v; want a reset for k", st, err)
	}
	rn.send(st.Out)
	rn.deliverTo("k", 305) // k applies it at 305 (R is 306) and tells a and b
	if got := peekCount(t, k, 306, key); got != 0 {
		t.Fatalf("k counts %d after applying the reset, want 0", got)
	}
	rn.deliverTo("b", 306) // b applies it and acknowledges to a
	rn.deliverTo("a", 307) // a gets the answer and applies k's reset
	rn.deliverTo("a", 308) // b's acknowledgement
	got := rn.replies["a"]
	slices.SortFunc(got, func(x, y ResetReply) int {
		if x.Answer != y.Answer {
			if x.Answer {
				return -1
			}
			return 1
		}
		return compareStrings(x.From, y.From)
	})
	want := []ResetReply{
		{ID: st.ID, From: "k", Answer: true, Applied: true, At: at(305).UnixMilli() + 1, Told: []string{"a", "b"}},
		{ID: st.ID, From: "a", Applied: true},
		{ID: st.ID, From: "b", Applied: true},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("a's replies\n got %+v\nwant %+v", got, want)
	}
	for _, n := range []testNode{a, b, k} {
		if c := peekCount(t, n, 400, key); c != 0 {
			t.Errorf("%s counts %d after the reset, want 0", n.name, c)
		}
	}
	// The deltas of before the reset, delivered now, are refused.
	for _, m := range late {
		if _, err := a.e.Receive(at(410), m); err != nil {
			t.Fatal(err)
		}
	}
	if c := peekCount(t, a, 420, key); c != 0 {
		t.Errorf("a counts %d after late deltas, want 0", c)
	}
	// What comes after counts everywhere.
	b.hit(t, 500, key, 2)
	out, err := b.e.Tick(at(600))
	if err != nil {
		t.Fatal(err)
	}
	rn.send(out)
	rn.deliverTo("a", 610)
	rn.deliverTo("k", 610)
	for _, n := range []testNode{a, b, k} {
		if c := peekCount(t, n, 700, key); c != 2 {
			t.Errorf("%s counts %d, want the 2 counted after the reset", n.name, c)
		}
	}
	// The reset asked again (a replay) is refused: it would erase those 2.
	if _, err := k.e.Receive(at(800), st.Out[0].Msgs[0]); !errors.Is(err, ErrReplay) {
		t.Errorf("a replayed reset: %v, want ErrReplay", err)
	}
}

// peekCount is key's count on n at ms, counting nothing.
func peekCount(t *testing.T, n testNode, ms int64, key string) int64 {
	t.Helper()
	var res [1]counter.Result
	if _, err := n.c.Peek(at(ms), key, 0, []counter.Limit{n.lim}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// TestResetOnTheCoordinator: a reset asked of the key's coordinator is
// applied at once and sent to every up peer over a stream.
func TestResetOnTheCoordinator(t *testing.T) {
	rn := newResetNet(t, "a", "b", "k")
	k := rn.nodes["k"]
	key := rn.keyFor("k")
	k.hit(t, 100, key, 5)
	st, err := k.e.Reset(at(300), key, []string{k.lim.ID()})
	if err != nil || !st.Local || st.At != at(300).UnixMilli()+1 || !slices.Equal(st.Told, []string{"a", "b"}) {
		t.Fatalf("Reset = %+v, %v; want applied here, R at 301, told a and b", st, err)
	}
	for _, o := range st.Out {
		if !o.Reliable || o.Purpose != PurposeReset {
			t.Errorf("reset to %s: %+v, want a stream", o.To, o)
		}
	}
	if c := peekCount(t, k, 301, key); c != 0 {
		t.Errorf("k counts %d, want 0", c)
	}
	rn.send(st.Out)
	rn.deliverTo("a", 302)
	rn.deliverTo("b", 302)
	rn.deliverTo("k", 303)
	var from []string
	for _, r := range rn.replies["k"] {
		if r.ID != st.ID || r.Answer || !r.Applied {
			t.Errorf("reply %+v", r)
		}
		from = append(from, r.From)
	}
	if slices.Sort(from); !slices.Equal(from, []string{"a", "b"}) {
		t.Errorf("acknowledged by %v, want a and b", from)
	}
}

// TestResetNotApplied: a coordinator that knows none of the limits
// answers that it did not apply the reset and tells nobody; a node whose
// clock sees the coordinator's beyond MaxClockOffset acknowledges without
// applying it.
func TestResetNotApplied(t *testing.T) {
	rn := newResetNet(t, "a", "k")
	a := rn.nodes["a"]
	key := rn.keyFor("k")
	st, err := a.e.Reset(at(100), key, []string{"other|1000|1"})
	if err != nil {
		t.Fatal(err)
	}
	rn.send(st.Out)
	rn.deliverTo("k", 101)
	if len(rn.flight["a"]) != 1 {
		t.Fatalf("k sent a %d messages, want only its answer", len(rn.flight["a"]))
	}
	rn.deliverTo("a", 102)
	if r := rn.replies["a"]; len(r) != 1 || !r[0].Answer || r[0].Applied || r[0].Reason != "its rules have none of the key's limits" {
		t.Fatalf("a's replies %+v", r)
	}

	ahead, behind := newSkewNode(t, "ahead", 3*time.Second), newSkewNode(t, "behind", 0)
	skewUp(t, 0, ahead, behind)
	exchange(t, 1000, ahead, behind) // behind sees ahead's clock
	key = "x"
	for i := 0; ahead.e.Coordinator(ahead.now(1100), key) != "ahead"; i++ {
		key = string(rune('a'+i%26)) + key
	}
	behind.hit(t, 1100, key, 4)
	st, err = ahead.e.Reset(ahead.now(1200), key, []string{ahead.lim.ID()})
	if err != nil || !st.Local {
		t.Fatalf("Reset = %+v, %v", st, err)
	}
	rcv, err := behind.e.Receive(behind.now(1201), msgsTo(st.Out, "behind")[0])
	if err != nil {
		t.Fatal(err)
	}
	acks := msgsTo(rcv.Out, "ahead")
	if len(acks) != 1 {
		t.Fatalf("behind answered %+v", rcv.Out)
	}
	rcv, err = ahead.e.Receive(ahead.now(1202), acks[0])
	if err != nil || rcv.Reset == nil || rcv.Reset.Applied || rcv.Reset.Reason != "the coordinator's clock is beyond its maximum clock offset" {
		t.Fatalf("ack %+v, %v", rcv.Reset, err)
	}
	if c := peekCount(t, behind.testNode, 1300, key); c != 4 {
		t.Errorf("behind counts %d, want its 4: it did not apply the skewed reset", c)
	}
}

// resetMessages are one message of each reset kind, for the goldens and
// the fuzz target's seeds.
func resetMessages(t testing.TB) map[string][]byte {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	r := &counter.Reset{Key: "api:k", Limits: []string{"api|1000|10", "api|60000|12"}, At: 1_800_000_000_100}
	out := map[string][]byte{}
	for name, f := range map[string]func() ([]byte, error){
		"reset_ask":   func() ([]byte, error) { return encodeReset(h, kindResetAsk, "n1", sent, 42, "n1", r) },
		"reset_apply": func() ([]byte, error) { return encodeReset(h, kindResetApply, "k", sent, 42, "n1", r) },
		"reset_done": func() ([]byte, error) {
			return encodeResetReply(h, kindResetDone, "k", sent, 42, resetApplied, r.At, []string{"n1", "n2"})
		},
		"reset_ack": func() ([]byte, error) { return encodeResetReply(h, kindResetAck, "n2", sent, 42, resetSkewed, 0, nil) },
	} {
		b, err := f()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b
	}
	return out
}

// TestResetGoldens pins the bytes of the reset kinds at resetVersion, as
// TestWireGoldens does for the sync kinds, and checks that each decodes
// to what was encoded.
func TestResetGoldens(t *testing.T) {
	h := newHandle(1024)
	for name, b := range resetMessages(t) {
		t.Run(name, func(t *testing.T) {
			checkWireGolden(t, name, b)
			switch b[0] {
			case kindResetAsk, kindResetApply:
				var r counter.Reset
				m, err := decodeReset(h, b, DefaultDecodeLimits(), &r)
				if err != nil || m.ID != 42 || m.Asker != "n1" || r.Key != "api:k" || len(r.Limits) != 2 || (b[0] == kindResetApply) != (r.At == 1_800_000_000_100) {
					t.Fatalf("decodes to %+v %+v, %v", m, r, err)
				}
			default:
				m, err := decodeResetReply(h, b, DefaultDecodeLimits())
				if err != nil || m.ID != 42 || (b[0] == kindResetDone) != (len(m.Told) == 2) {
					t.Fatalf("decodes to %+v, %v", m, err)
				}
			}
		})
	}
}

// TestResetDecodeRefuses: a reset message out of bounds or of another
// version is dropped whole, as malformed or as a version mismatch; and a
// kind this node does not know, which is what every reset kind is to a
// node of an earlier release, is dropped whole by the sync decoder,
// counted as a decode error, merging nothing.
func TestResetDecodeRefuses(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	long := string(make([]byte, 2000))
	good := counter.Reset{Key: "k", Limits: []string{"r|1000|1"}, At: 5}
	for _, tc := range []struct {
		name    string
		msg     func() ([]byte, error)
		version bool
	}{
		{"version", func() ([]byte, error) {
			return encodeBody(h, kindResetApply, &resetMsg{Version: resetVersion + 1, From: "k", Asker: "a", Key: "k", Limits: []string{"r|1000|1"}, At: 5})
		}, true},
		{"reply version", func() ([]byte, error) {
			return encodeBody(h, kindResetAck, &resetReplyMsg{Version: resetVersion + 1, From: "k"})
		}, true},
		{"no key", func() ([]byte, error) {
			r := good
			r.Key = ""
			return encodeReset(h, kindResetApply, "k", sent, 1, "a", &r)
		}, false},
		{"key too long", func() ([]byte, error) {
			r := good
			r.Key = long
			return encodeReset(h, kindResetApply, "k", sent, 1, "a", &r)
		}, false},
		{"no limits", func() ([]byte, error) {
			r := good
			r.Limits = nil
			return encodeReset(h, kindResetApply, "k", sent, 1, "a", &r)
		}, false},
		{"too many limits", func() ([]byte, error) {
			r := good
			r.Limits = make([]string, counter.MaxLimitsPerCall+1)
			for i := range r.Limits {
				r.Limits[i] = "r|1000|1"
			}
			return encodeReset(h, kindResetApply, "k", sent, 1, "a", &r)
		}, false},
		{"apply without an instant", func() ([]byte, error) {
			r := good
			r.At = 0
			return encodeReset(h, kindResetApply, "k", sent, 1, "a", &r)
		}, false},
		{"ask for another", func() ([]byte, error) { return encodeReset(h, kindResetAsk, "k", sent, 1, "a", &good) }, false},
		{"no asker", func() ([]byte, error) { return encodeReset(h, kindResetApply, "k", sent, 1, "", &good) }, false},
		{"unknown status", func() ([]byte, error) { return encodeResetReply(h, kindResetAck, "k", sent, 1, resetNoStatus, 0, nil) }, false},
		{"applied answer without an instant", func() ([]byte, error) {
			return encodeResetReply(h, kindResetDone, "k", sent, 1, resetApplied, 0, nil)
		}, false},
		{"ack with names", func() ([]byte, error) {
			return encodeBody(h, kindResetAck, &resetReplyMsg{Version: resetVersion, From: "k", Told: []string{"a"}})
		}, false},
		{"garbage", func() ([]byte, error) { return []byte("Z\xc1\xff"), nil }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := tc.msg()
			if err != nil {
				t.Fatal(err)
			}
			n := newTestNode(t, "n", 1)
			_, err = n.e.Receive(at(0), b)
			if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
				t.Fatalf("Receive: %v, want a decode error", err)
			}
			if got := errors.Is(err, ErrVersion); got != tc.version || n.e.Stats.VersionMismatches.Load()+n.e.Stats.DecodeErrors.Load() != 1 {
				t.Fatalf("Receive: %v (version mismatch %v, want %v); stats %d, %d", err, got, tc.version, n.e.Stats.VersionMismatches.Load(), n.e.Stats.DecodeErrors.Load())
			}
		})
	}
	t.Run("unknown kind", func(t *testing.T) {
		n := newTestNode(t, "n", 1)
		_, err := n.e.Receive(at(0), []byte("V\x94\x01\xa1k\x00\x90"))
		if !errors.Is(err, ErrMalformed) || n.e.Stats.DecodeErrors.Load() != 1 || n.e.Stats.EntriesMerged.Load() != 0 {
			t.Fatalf("Receive of an unknown kind: %v, %d decode errors", err, n.e.Stats.DecodeErrors.Load())
		}
	})
}

// FuzzDecodeReset feeds any bytes to the reset decoders: none panics, and
// what decodes re-encodes to a message that decodes the same.
func FuzzDecodeReset(f *testing.F) {
	for _, b := range resetMessages(f) {
		f.Add(b)
	}
	h := newHandle(1024)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || !isResetKind(b) {
			return
		}
		lim := DefaultDecodeLimits()
		switch b[0] {
		case kindResetAsk, kindResetApply:
			var r counter.Reset
			m, err := decodeReset(h, b, lim, &r)
			if err != nil {
				return
			}
			re, err := encodeReset(h, b[0], m.From, time.UnixMilli(m.SentMs), m.ID, m.Asker, &r)
			if err != nil {
				t.Fatal(err)
			}
			var back counter.Reset
			if m2, err := decodeReset(h, re, lim, &back); err != nil || m2.From != m.From || m2.Asker != m.Asker || !reflect.DeepEqual(back, r) {
				t.Fatalf("reset round trip: %+v %+v vs %+v %+v, %v", m2, back, m, r, err)
			}
		default:
			m, err := decodeResetReply(h, b, lim)
			if err != nil {
				return
			}
			re, err := encodeResetReply(h, b[0], m.From, time.UnixMilli(m.SentMs), m.ID, m.Status, m.At, m.Told)
			if err != nil {
				t.Fatal(err)
			}
			if m2, err := decodeResetReply(h, re, lim); err != nil || m2.From != m.From || m2.Status != m.Status || m2.At != m.At || !slices.Equal(m2.Told, m.Told) {
				t.Fatalf("reply round trip: %+v vs %+v, %v", m2, m, err)
			}
		}
	})
}
