package engine

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// relayNodes is a routed cluster of a, f and x and a key whose order on
// the ring is want (a permutation of the three names).
func relayNodes(t *testing.T, routing counter.Routing, want ...string) (ns map[string]*coordNode, key string) {
	t.Helper()
	ns = map[string]*coordNode{}
	var tns []testNode
	for _, name := range []string{"a", "f", "x"} {
		cn := newCoordNode(t, name, 3)
		cc, _ := cn.c.Cluster()
		cc.Routing = routing
		if err := cn.c.SetCluster(cc); err != nil {
			t.Fatal(err)
		}
		ns[name] = cn
		tns = append(tns, cn.testNode)
	}
	up(t, 0, tns...)
	for i := range 100_000 {
		key = "key-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676%26)) + string(rune('a'+i/17576))
		order := []string{CoordinatorOf(key, want)}
		rest := slices.DeleteFunc(slices.Clone(want), func(s string) bool { return s == order[0] })
		order = append(order, CoordinatorOf(key, rest))
		if slices.Equal(order, want[:2]) {
			return ns, key
		}
	}
	t.Fatalf("no key in the order %v", want)
	return
}

// heardFrom delivers a heartbeat of from to to at ms.
func heardFrom(t *testing.T, from, to *coordNode, ms int64) {
	t.Helper()
	hb, err := from.e.heartbeat(at(ms))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, to.testNode, at(ms), hb)
}

// failOver makes a miss FailoverMisses asks of key to f.
func failOver(t *testing.T, a *coordNode, key string, ms int64) {
	t.Helper()
	for range a.e.cfg.FailoverMisses {
		if got := miss(t, a, ms, key); got.Out.To != "f" {
			t.Fatalf("an ask before the failover went to %s, want f", got.Out.To)
		}
	}
}

// one returns the only Outbound of out to name, failing otherwise.
func one(t *testing.T, out []Outbound, to string) []byte {
	t.Helper()
	var got [][]byte
	for _, o := range out {
		if o.To == to {
			got = append(got, o.Msgs...)
		}
	}
	if len(got) != 1 {
		t.Fatalf("%d messages to %s in %+v, want 1", len(got), to, out)
	}
	return got[0]
}

// TestAskAroundOneWayCut: a node that is a key's runner-up and hears
// nothing from the key's coordinator f (f still hears it, and x hears f)
// asks f through x instead of deciding alone, of a routed limit or a
// broadcast one. x passes the ask on, f answers a directly (lost on the
// cut) and through x, which forwards it; a takes the forwarded answer,
// and still has f failed over, since it heard nothing from f itself.
func TestAskAroundOneWayCut(t *testing.T) {
	for _, routing := range []counter.Routing{counter.RouteAlways, counter.RouteNever} {
		t.Run(routing.String(), func(t *testing.T) { checkAskAround(t, routing) })
	}
}

func checkAskAround(t *testing.T, routing counter.Routing) {
	ns, key := relayNodes(t, routing, "f", "a", "x")
	a, f, x := ns["a"], ns["f"], ns["x"]
	failOver(t, a, key, 100)
	heardFrom(t, f, x, 200)
	asked, _ := a.ask(t, at(200), key)
	if asked.Out.To != "x" || !asked.Around || asked.Out.Msgs[0][0] != kindPassed || a.e.Stats.AsksAround.Load() != 1 {
		t.Fatalf("the runner-up's ask: %+v, want it around through x", asked)
	}
	rcv, err := x.receive(t, at(201), asked.Out.Msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	passed := one(t, rcv.Out, "f")
	rcv, err = f.receive(t, at(202), passed)
	if err != nil || f.e.Stats.AsksAnswered.Load() != 1 {
		t.Fatalf("f's Receive of the passed ask: %+v %v", rcv, err)
	}
	direct, fwd := one(t, rcv.Out, "a"), one(t, rcv.Out, "x")
	if direct[0] != kindAnswer || fwd[0] != kindForward {
		t.Fatalf("f answered %q to a and %q to x, want an answer and a forward", direct[0], fwd[0])
	}
	rcv, err = x.receive(t, at(203), fwd)
	if err != nil {
		t.Fatal(err)
	}
	got, err := a.receive(t, at(204), one(t, rcv.Out, "a"))
	if err != nil || !got.Answered || got.Answer.ID != asked.ID || got.Answer.From != "f" || !got.Answer.Decided || !got.Answer.Allowed {
		t.Fatalf("the forwarded answer: %+v %v", got, err)
	}
	if !slices.Contains(a.e.FailedOver(at(204)), "f") {
		t.Fatal("a forwarded answer ended f's failover at a")
	}
	// An ask sent around and given up is released where it went, not
	// through x, which would keep a broadcast limit's release itself.
	lost, _ := a.ask(t, at(300), key)
	if rel, ok, err := a.e.AskExpired(at(305), lost.ID); err != nil || !ok || lost.Out.To != "x" || rel.To != "f" {
		t.Fatalf("an ask around given up: sent to %s, released to %s (%v %v); want x and f", lost.Out.To, rel.To, ok, err)
	}
	// f counts the grant: a's count reaches it as a's slices do.
	var r [1]counter.Result
	f.c.Allow(at(205), key, 10, []counter.Limit{f.lim}, r[:])
	if r[0].Pending != 1 {
		t.Fatalf("f counts %d granted hits pending, want 1", r[0].Pending)
	}
}

// TestAskAroundUnable: the node asked to pass an ask around does not
// decide it: it answers "unable" when it does not hear the coordinator
// either (stopped, not cut one way), and the asker decides alone at once.
// Around goes only through a node that decodes the envelope, and when no
// node below this one does, the check is decided alone without asking.
func TestAskAroundUnable(t *testing.T) {
	ns, key := relayNodes(t, counter.RouteAlways, "f", "a", "x")
	a, x := ns["a"], ns["x"]
	failOver(t, a, key, 100)
	asked, _ := a.ask(t, at(5000), key) // x last heard f at 0: not lately
	rcv, err := x.receive(t, at(5000), asked.Out.Msgs[0])
	if err != nil || x.e.Stats.AsksAnswered.Load() != 0 {
		t.Fatalf("x's Receive: %+v %v (decided %d)", rcv, err, x.e.Stats.AsksAnswered.Load())
	}
	got, err := a.receive(t, at(5001), one(t, rcv.Out, "a"))
	if err != nil || !got.Answered || got.Answer.Decided {
		t.Fatalf("x's answer: %+v %v, want unable", got, err)
	}
	a.e.SetPeerRelays("x", false)
	var res [1]counter.Result
	ask := new(counter.Ask)
	a.c.PrepareAsk(at(5002), key, 1, []counter.Limit{a.lim}, ask)
	if alone, err := a.e.Ask(at(5002), ask, res[:]); err != nil || !alone.Alone {
		t.Fatalf("with x of an older release: %+v %v, want alone", alone, err)
	}
}

// TestPassedAskAnsweredThroughTheRelay: a runner-up passing an ask on
// (relayTo) puts it in an envelope when the coordinator decodes it, so the
// answer comes back through it too; raw to a coordinator of an older
// release, which answers the asker alone, as before.
func TestPassedAskAnsweredThroughTheRelay(t *testing.T) {
	ns, key := relayNodes(t, counter.RouteAlways, "f", "x", "a")
	a, f, x := ns["a"], ns["f"], ns["x"]
	for _, relays := range []bool{true, false} {
		failOver(t, a, key, 100) // again: f's answer in the first round is a message from f
		x.e.SetPeerRelays("f", relays)
		heardFrom(t, f, x, 200)
		asked, _ := a.ask(t, at(200), key)
		if asked.Out.To != "x" || !asked.RunnerUp || asked.Around || asked.Out.Msgs[0][0] != kindAsk {
			t.Fatalf("a's ask: %+v, want a plain ask to the runner-up x", asked)
		}
		rcv, err := x.receive(t, at(201), asked.Out.Msgs[0])
		if err != nil {
			t.Fatal(err)
		}
		passed := one(t, rcv.Out, "f")
		if want := map[bool]byte{true: kindPassed, false: kindAsk}[relays]; passed[0] != want {
			t.Fatalf("relays %v: passed on as %q, want %q", relays, passed[0], want)
		}
		rcv, err = f.receive(t, at(202), passed)
		if err != nil {
			t.Fatal(err)
		}
		if n := len(rcv.Out); relays && n != 2 || !relays && n != 1 {
			t.Fatalf("relays %v: f sent %+v", relays, rcv.Out)
		}
		got, err := a.receive(t, at(203), one(t, rcv.Out, "a"))
		if err != nil || !got.Answered || got.Answer.ID != asked.ID {
			t.Fatalf("relays %v: the direct answer %+v %v", relays, got, err)
		}
		if !relays {
			continue
		}
		// The forwarded copy comes after the direct one: nobody waits.
		fw, err := x.receive(t, at(203), one(t, rcv.Out, "x"))
		if err != nil {
			t.Fatal(err)
		}
		if got, err := a.receive(t, at(204), one(t, fw.Out, "a")); err != nil || got.Answered {
			t.Fatalf("the forwarded copy after the answer: %+v %v", got, err)
		}
	}
}

// TestRelayGolden pins the envelopes' bytes and refuses malformed ones.
func TestRelayGolden(t *testing.T) {
	h := newHandle(64)
	ask := []byte{kindAsk, 0x90}
	answer := []byte{kindAnswer, 0x90}
	passed, err := encodeRelay(h, kindPassed, "x", ask)
	if err != nil {
		t.Fatal(err)
	}
	fwd, err := encodeRelay(h, kindForward, "a", answer)
	if err != nil {
		t.Fatal(err)
	}
	checkWireGolden(t, "relay_passed", passed)
	checkWireGolden(t, "relay_forward", fwd)
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"version 2", mustRelay(t, h, kindPassed, 2, "x", ask), ErrVersion},
		{"no node", mustRelay(t, h, kindPassed, relayVersion, "", ask), ErrMalformed},
		{"an answer passed", mustRelay(t, h, kindPassed, relayVersion, "x", answer), ErrMalformed},
		{"an ask forwarded", mustRelay(t, h, kindForward, relayVersion, "a", ask), ErrMalformed},
		{"empty", mustRelay(t, h, kindForward, relayVersion, "a", nil), ErrMalformed},
		{"truncated", passed[:len(passed)-2], ErrMalformed},
	} {
		if _, err := decodeRelay(h, tc.b, DefaultDecodeLimits()); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	for _, b := range [][]byte{passed, fwd} {
		m, err := decodeRelay(h, b, DefaultDecodeLimits())
		if err != nil || m.Version != relayVersion || len(m.Inner) != 2 {
			t.Errorf("%q: %+v %v", b[0], m, err)
		}
	}
}

func mustRelay(t *testing.T, h *codec.MsgpackHandle, kind byte, version uint8, node string, inner []byte) []byte {
	t.Helper()
	b, err := encodeBody(h, kind, &relayMsg{Version: version, Node: node, Inner: inner})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzDecodeRelay: any bytes decode to an envelope that holds the message
// of its kind, or to an error; never a panic.
func FuzzDecodeRelay(f *testing.F) {
	h := newHandle(64)
	for _, kind := range []byte{kindPassed, kindForward} {
		b, err := encodeRelay(h, kind, "x", []byte{kindAsk, 0x90})
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != kindPassed && b[0] != kindForward {
			return
		}
		m, err := decodeRelay(h, b, DefaultDecodeLimits())
		if err != nil {
			return
		}
		want := map[byte]byte{kindPassed: kindAsk, kindForward: kindAnswer}[b[0]]
		if m.Version != relayVersion || m.Node == "" || len(m.Inner) == 0 || m.Inner[0] != want {
			t.Fatalf("accepted %+v", m)
		}
	})
}

// TestForwardedAnswerIsHeardFromItsCoordinator: a node that forwards a
// coordinator's answer hears that coordinator (it sent the envelope
// here), so it keeps passing asks on to it while it answers them, even
// when nothing else has come from it for longer than the silence
// threshold.
func TestForwardedAnswerIsHeardFromItsCoordinator(t *testing.T) {
	ns, key := relayNodes(t, counter.RouteAlways, "f", "a", "x")
	a, f, x := ns["a"], ns["f"], ns["x"]
	failOver(t, a, key, 100)
	heardFrom(t, f, x, 200)
	asked, _ := a.ask(t, at(200), key)
	rcv, err := x.receive(t, at(201), asked.Out.Msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	rcv, err = f.receive(t, at(202), one(t, rcv.Out, "f"))
	if err != nil {
		t.Fatal(err)
	}
	fwd := one(t, rcv.Out, "x")
	// The forward comes late: f has been silent to x past the threshold.
	late := at(202).Add(x.e.SilenceThreshold() + 500*time.Millisecond)
	if to := x.e.relayTarget(late, "a", key); to != "" {
		t.Fatalf("x passes asks on to %q after f's silence, want it to decide", to)
	}
	if _, err := x.receive(t, late, fwd); err != nil || x.e.Stats.AnswersForwarded.Load() != 1 {
		t.Fatalf("x's forward: %v (%d forwarded)", err, x.e.Stats.AnswersForwarded.Load())
	}
	if to := x.e.relayTarget(late.Add(time.Millisecond), "a", key); to != "f" {
		t.Fatalf("x passes asks on to %q after forwarding f's answer, want f", to)
	}
}
