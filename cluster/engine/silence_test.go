package engine

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"
)

// silenceCluster is failoverCluster with a fourth node b, which never
// asks k anything itself.
func silenceCluster(t *testing.T) (a, b, k *coordNode, key string) {
	t.Helper()
	names := []string{"a", "b", "k", "r"}
	nodes := make([]*coordNode, len(names))
	var tns []testNode
	for i, name := range names {
		nodes[i] = newCoordNode(t, name, len(names))
		tns = append(tns, nodes[i].testNode)
	}
	up(t, 0, tns...)
	for i := range 10_000 {
		key = "key-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		if CoordinatorOf(key, names) == "k" && CoordinatorOf(key, []string{"a", "b", "r"}) == "r" {
			return nodes[0], nodes[1], nodes[2], key
		}
	}
	t.Fatal("no key coordinated by k with r for runner-up")
	return
}

// silenceNotices returns the notices in out, by peer.
func silenceNotices(out []Outbound) map[string][][]byte {
	got := map[string][][]byte{}
	for _, o := range out {
		if o.Purpose == PurposeSilence {
			got[o.To] = append(got[o.To], o.Msgs...)
		}
	}
	return got
}

// TestSilenceNoticeFailsOverEverywhere: the node that fails a coordinator
// over by its own misses tells every other up peer at its next tick, once;
// a peer told passes the coordinator over without a miss of its own, and
// asks it again as soon as it hears from it.
func TestSilenceNoticeFailsOverEverywhere(t *testing.T) {
	a, b, k, key := silenceCluster(t)
	ms := int64(100)
	if out, err := a.e.Tick(at(ms)); err != nil || len(silenceNotices(out)) != 0 {
		t.Fatalf("tick before any miss: %v notices, %v", silenceNotices(out), err)
	}
	for range a.e.cfg.FailoverMisses {
		miss(t, a, ms, key)
	}
	ms += 200
	out, err := a.e.Tick(at(ms))
	if err != nil {
		t.Fatal(err)
	}
	notices := silenceNotices(out)
	if len(notices) != 2 || notices["b"] == nil || notices["r"] == nil {
		t.Fatalf("notices for %v, want b and r (not k, which is silent)", slices.Sorted(maps.Keys(notices)))
	}
	if got := b.e.Coordinator(at(ms), key); got != "k" {
		t.Fatalf("before the notice b asks %s, want k", got)
	}
	deliver(t, b.testNode, at(ms), notices["b"])
	if got := b.e.Coordinator(at(ms), key); got != "r" {
		t.Fatalf("told, b asks %s, want the runner-up r", got)
	}
	if b.e.Stats.FailoversTold.Load() != 1 || b.e.Stats.SilenceNoticesReceived.Load() != 1 {
		t.Fatalf("b's stats: %d told, %d received", b.e.Stats.FailoversTold.Load(), b.e.Stats.SilenceNoticesReceived.Load())
	}
	// Told once: neither a (which told) nor b (which was told) tells again.
	for _, n := range []*coordNode{a, b} {
		if out, err := n.e.Tick(at(ms + 200)); err != nil || len(silenceNotices(out)) != 0 {
			t.Fatalf("%s's next tick: notices for %v, %v", n.name, slices.Sorted(maps.Keys(silenceNotices(out))), err)
		}
	}
	// k speaks: b asks it again.
	hb, err := k.e.heartbeat(at(ms + 300))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, b.testNode, at(ms+300), hb)
	if got := b.e.Coordinator(at(ms+300), key); got != "k" {
		t.Fatalf("after k's heartbeat b asks %s, want k", got)
	}
	// And a, having heard k too, tells of its next failover only a
	// RejoinInterval after it told of the first: a coordinator that a
	// one-way loss keeps failing over here is not failed over everywhere
	// at every flap.
	deliver(t, a.testNode, at(ms+300), hb)
	ms += 400
	for range a.e.cfg.FailoverMisses {
		miss(t, a, ms, key)
	}
	if out, err := a.e.Tick(at(ms + 200)); err != nil || len(silenceNotices(out)) != 0 {
		t.Fatalf("a's tick after a second failover within RejoinInterval: notices for %v, %v", slices.Sorted(maps.Keys(silenceNotices(out))), err)
	}
	told := at(300) // a's first notice
	if out, err := a.e.Tick(told.Add(a.e.cfg.RejoinInterval)); err != nil || len(silenceNotices(out)) != 2 {
		t.Fatalf("a's tick a RejoinInterval after its first notice: notices for %v, %v", slices.Sorted(maps.Keys(silenceNotices(out))), err)
	}
}

// TestSilenceNoticeOlderThanNewsIsIgnored: a peer that heard from the
// coordinator after the notice was sent keeps asking it.
func TestSilenceNoticeOlderThanNewsIsIgnored(t *testing.T) {
	a, b, k, key := silenceCluster(t)
	for range a.e.cfg.FailoverMisses {
		miss(t, a, 100, key)
	}
	out, err := a.e.Tick(at(200))
	if err != nil {
		t.Fatal(err)
	}
	hb, err := k.e.heartbeat(at(250))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, b.testNode, at(250), hb) // b hears k after the notice left a
	deliver(t, b.testNode, at(260), silenceNotices(out)["b"])
	if got := b.e.Coordinator(at(260), key); got != "k" || b.e.Stats.FailoversTold.Load() != 0 {
		t.Fatalf("b asks %s (%d told), want k", got, b.e.Stats.FailoversTold.Load())
	}
}

// TestSilenceNoticeGolden pins the notice's bytes, and malformed notices
// are refused whole.
func TestSilenceNoticeGolden(t *testing.T) {
	h := newHandle(1024)
	msg, err := encodeSilent(h, "n1", time.UnixMilli(1_800_000_000_123), []string{"n2", "n3"})
	if err != nil {
		t.Fatal(err)
	}
	checkWireGolden(t, "silence", msg)
	m, err := decodeSilent(h, msg, DefaultDecodeLimits())
	if err != nil || m.From != "n1" || m.SentMs != 1_800_000_000_123 || !slices.Equal(m.Silent, []string{"n2", "n3"}) {
		t.Fatalf("decodes to %+v, %v", m, err)
	}
	long := string(make([]byte, DefaultDecodeLimits().MaxNameBytes+1))
	for _, tc := range []struct {
		name string
		msg  silentMsg
		want error
	}{
		{"version", silentMsg{Version: silentVersion + 1, From: "n1", SentMs: 1, Silent: []string{"n2"}}, ErrVersion},
		{"no sender", silentMsg{Version: silentVersion, SentMs: 1, Silent: []string{"n2"}}, ErrMalformed},
		{"no name", silentMsg{Version: silentVersion, From: "n1", SentMs: 1}, ErrMalformed},
		{"empty name", silentMsg{Version: silentVersion, From: "n1", SentMs: 1, Silent: []string{""}}, ErrMalformed},
		{"long name", silentMsg{Version: silentVersion, From: "n1", SentMs: 1, Silent: []string{long}}, ErrMalformed},
		{"too many", silentMsg{Version: silentVersion, From: "n1", SentMs: 1, Silent: make([]string, maxSilent+1)}, ErrMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeBody(h, kindSilent, &tc.msg)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := decodeSilent(h, b, DefaultDecodeLimits()); !errors.Is(err, tc.want) {
				t.Fatalf("decode: %v, want %v", err, tc.want)
			}
		})
	}
}

// FuzzDecodeSilent: any bytes decode to a checked notice or an error,
// never a panic, and a notice decoded encodes back to one that decodes
// the same.
func FuzzDecodeSilent(f *testing.F) {
	h := newHandle(1024)
	msg, err := encodeSilent(h, "n1", time.UnixMilli(1_800_000_000_123), []string{"n2", "n3"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(msg)
	f.Add([]byte{kindSilent})
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != kindSilent {
			return
		}
		m, err := decodeSilent(h, b, DefaultDecodeLimits())
		if err != nil {
			return
		}
		again, err := encodeSilent(h, m.From, time.UnixMilli(m.SentMs), m.Silent)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decodeSilent(h, again, DefaultDecodeLimits())
		if err != nil || m2.From != m.From || m2.SentMs != m.SentMs || !slices.Equal(m2.Silent, m.Silent) {
			t.Fatalf("%+v re-decodes to %+v, %v", m, m2, err)
		}
	})
}
