package engine

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// coordNode is an engine whose counter coordinates, with the answers it
// receives recorded.
type coordNode struct {
	testNode
	answers []Answer
}

func newCoordNode(t testing.TB, name string, nodes int) *coordNode {
	t.Helper()
	return newCoordNodeWith(t, name, nodes, nil)
}

func newCoordNodeWith(t testing.TB, name string, nodes int, edit func(*Config)) *coordNode {
	t.Helper()
	return newCoordNodeLimit(t, name, nodes, 10, edit)
}

// newCoordNodeLimit is newCoordNodeWith with a limit of limit a minute.
func newCoordNodeLimit(t testing.TB, name string, nodes int, limit int64, edit func(*Config)) *coordNode {
	t.Helper()
	cn := &coordNode{testNode: newTestNodeWith(t, name, nodes, limit, edit)}
	cc, _ := cn.c.Cluster()
	cc.Coordinated = true
	if err := cn.c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	return cn
}

// receive hands msg to the engine at ms and records an answer it returns.
func (cn *coordNode) receive(t testing.TB, now time.Time, msg []byte) (Received, error) {
	t.Helper()
	r, err := cn.e.Receive(now, msg)
	if r.Answered {
		cn.answers = append(cn.answers, r.Answer)
	}
	return r, err
}

// keyFor returns a key whose coordinator, as cn sees the cluster at now,
// is want.
func (cn *coordNode) keyFor(now time.Time, want string) string {
	key := "x"
	for i := 0; cn.e.Coordinator(now, key) != want; i++ {
		if i == 10_000 {
			panic("no key coordinated by " + want)
		}
		key = string(rune('a'+i%26)) + key
	}
	return key
}

// ask prepares and starts cn's check of one hit of key at now, which
// must go to another node.
func (cn *coordNode) ask(t testing.TB, now time.Time, key string) (Asked, *counter.Ask) {
	t.Helper()
	ask := new(counter.Ask)
	cn.c.PrepareAsk(now, key, 1, []counter.Limit{cn.lim}, ask)
	var res [1]counter.Result
	a, err := cn.e.Ask(now, ask, res[:])
	if err != nil || a.Local || len(a.Out.Msgs) != 1 || a.Out.Purpose != PurposeAsk {
		t.Fatalf("Ask of %s: %+v %v, want an ask message", key, a, err)
	}
	return a, ask
}

// TestEngineCoordination steps one ask through two engines: the asker's
// Ask, the coordinator's Receive deciding it and returning the answer for
// the asker, the asker's Receive returning it as awaited; then, for an
// ask given up (AskExpired), the release, after which the coordinator no
// longer counts the grant.
func TestEngineCoordination(t *testing.T) {
	a, k := newCoordNode(t, "a", 2), newCoordNode(t, "k", 2)
	up(t, 0, a.testNode, k.testNode)
	key := a.keyFor(at(0), "k")
	if got := k.e.Coordinator(at(0), key); got != "k" {
		t.Fatalf("the nodes disagree on %s's coordinator: a says k, k says %s", key, got)
	}
	lims := []counter.Limit{a.lim}
	var res [1]counter.Result
	d, err := a.c.Allow(at(10), key, 1, lims, res[:])
	if err != nil || !d.Coordinate {
		t.Fatalf("Allow: %+v %v, want Coordinate (10 per minute on 2 nodes has no blind share)", d, err)
	}
	asked, _ := a.ask(t, at(10), key)
	if asked.Out.To != "k" || asked.RunnerUp || a.e.Pending() != 1 {
		t.Fatalf("ask %+v, %d pending", asked, a.e.Pending())
	}
	rcv, err := k.receive(t, at(11), asked.Out.Msgs[0])
	from, out := rcv.From, rcv.Out
	if err != nil || from != "a" || len(out) != 1 || out[0].To != "a" || out[0].Purpose != PurposeAnswer || out[0].Reliable {
		t.Fatalf("coordinator's Receive: %q %+v %v", from, out, err)
	}
	if _, err := a.receive(t, at(12), out[0].Msgs[0]); err != nil {
		t.Fatal(err)
	}
	if len(a.answers) != 1 || a.answers[0].ID != asked.ID || a.answers[0].From != "k" || !a.answers[0].Decided || !a.answers[0].Allowed || a.answers[0].Results[0].Remaining != 9 || a.e.Pending() != 0 {
		t.Fatalf("answers %+v, %d pending", a.answers, a.e.Pending())
	}
	// The same answer again (a duplicate) is awaited by nobody.
	if r, _ := a.receive(t, at(12), out[0].Msgs[0]); r.Answered {
		t.Fatal("a duplicate answer was returned as awaited")
	}
	count := func() int64 {
		var r [1]counter.Result
		k.c.Allow(at(13), key, 10, []counter.Limit{k.lim}, r[:]) // 10 never fits: counts nothing
		return r[0].Count
	}
	if n := count(); n != 1 {
		t.Fatalf("the coordinator counts %d, want its grant: 1", n)
	}
	// A second ask, granted, whose answer is lost: the asker gives it up
	// and the release stops the grant counting at the coordinator. The
	// first grant stops counting with the second ask: its id is settled
	// (answered) and the asker's slices, which the test never made count
	// it, do not show it.
	asked, ask := a.ask(t, at(13), key)
	if ask.Settled != asked.ID-1 {
		t.Fatalf("Settled %d, want %d", ask.Settled, asked.ID-1)
	}
	if _, err := k.receive(t, at(13), asked.Out.Msgs[0]); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 1 {
		t.Fatalf("the coordinator counts %d, want the second grant only", n)
	}
	rel, ok, err := a.e.AskExpired(at(14), asked.ID)
	if err != nil || !ok || rel.To != "k" || rel.Purpose != PurposeRelease {
		t.Fatalf("AskExpired: %+v %v %v", rel, ok, err)
	}
	if _, ok, _ := a.e.AskExpired(at(14), asked.ID); ok {
		t.Fatal("an ask was given up twice")
	}
	if _, err := k.receive(t, at(15), rel.Msgs[0]); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 0 || k.e.Stats.Releases.Load() != 1 || k.e.Stats.AsksAnswered.Load() != 2 {
		t.Fatalf("after the release the coordinator counts %d (want 0), releases %d, asks %d", n, k.e.Stats.Releases.Load(), k.e.Stats.AsksAnswered.Load())
	}
	// An ask naming a limit the coordinator does not have: answered as
	// undecided, so the asker decides at once instead of waiting.
	ask = new(counter.Ask)
	a.c.PrepareAsk(at(20), key, 1, lims, ask)
	ask.Limits[0] = "other|1000|1"
	asked, err = a.e.Ask(at(20), ask, res[:])
	if err != nil {
		t.Fatal(err)
	}
	rcv, _ = k.receive(t, at(20), asked.Out.Msgs[0])
	a.receive(t, at(20), rcv.Out[0].Msgs[0])
	if last := a.answers[len(a.answers)-1]; last.ID != asked.ID || last.Decided {
		t.Fatalf("answer to an unknown limit: %+v, want undecided", last)
	}
}

// TestCoordinatorFollowsMembership: a key's coordinator is the same on
// every engine, and moves when its node goes down.
func TestCoordinatorFollowsMembership(t *testing.T) {
	ns := []*coordNode{newCoordNode(t, "n0", 3), newCoordNode(t, "n1", 3), newCoordNode(t, "n2", 3)}
	up(t, 0, ns[0].testNode, ns[1].testNode, ns[2].testNode)
	names := []string{"n0", "n1", "n2"}
	for i := range 100 {
		key := "key-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		want := CoordinatorOf(key, names)
		for _, n := range ns {
			if got := n.e.Coordinator(at(1), key); got != want {
				t.Fatalf("%s: %s says %s, want %s", key, n.name, got, want)
			}
		}
		if want == "n2" {
			ns[0].e.PeerDown(at(1), "n2")
			if got := ns[0].e.Coordinator(at(1), key); got != CoordinatorOf(key, names[:2]) {
				t.Fatalf("%s after n2 went down: %s", key, got)
			}
			ns[0].e.PeerUp(at(2), "n2")
		}
	}
}

// TestReplayedHelloIsAnsweredOnce: a hello costs a full state reply, so
// one captured and replayed (issue 9, finding 1: 197 replays in 10 s made
// a node send 365 MB) is answered once. A new process's hello is answered
// at most once per RejoinInterval per peer: b greeted a at 0 already, so
// the hello of b's next process (at 100) is owed and sent by a's first
// tick after 10 s; forged new hellos naming b (finding 2: anyone without
// the key can make one) cost no more.
func TestReplayedHelloIsAnsweredOnce(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	a.hit(t, 0, "k", 50)
	hello, err := b.e.encode(kindHello, at(100), nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	replies := 0
	count := func(out []Outbound) {
		for _, o := range out {
			if o.To == "b" && (o.Purpose == PurposeReply || o.Purpose == PurposeCatchUp) {
				replies++
			}
		}
	}
	for i := range 200 {
		rcv, err := a.e.Receive(at(200+int64(i)), hello[0])
		out := rcv.Out
		if err != nil && !errors.Is(err, ErrReplay) {
			t.Fatal(err)
		}
		count(out)
	}
	if a.e.Stats.Replays.Load() != 199 {
		t.Fatalf("%d replays counted; want 199", a.e.Stats.Replays.Load())
	}
	// Forged hellos of ever newer "processes", one every 50 ms for 20 s,
	// with the ticks of those 20 s.
	for ms := int64(500); ms < 20_500; ms += 50 {
		forged, _ := b.e.encode(kindHello, at(ms), nil, 0)
		rcv, err := a.e.Receive(at(ms), forged[0])
		out := rcv.Out
		if err != nil {
			t.Fatal(err)
		}
		count(out)
		if ms%200 == 0 {
			out, err := a.e.Tick(at(ms))
			if err != nil {
				t.Fatal(err)
			}
			count(out)
		}
	}
	// At 0 (up) and then one per RejoinInterval: 10 s and 20 s.
	if replies != 2 {
		t.Fatalf("%d full states sent to b in 20 s of hellos; want 2 (one per 10 s)", replies)
	}
	if a.e.Stats.StatesDeferred.Load() == 0 {
		t.Fatal("no reply counted as deferred")
	}
}

// TestStateSendsAreCappedInTotal: past MaxStateSends full states per
// RejoinInterval over all peers, further ones are owed, and sent by later
// ticks as the bucket refills; none is lost.
func TestStateSendsAreCappedInTotal(t *testing.T) {
	a := newTestNodeWith(t, "a", 6, 600, func(cfg *Config) { cfg.MaxStateSends = 2 })
	a.hit(t, 0, "k", 5)
	got := map[string]int{}
	count := func(out []Outbound) {
		for _, o := range out {
			if o.Purpose == PurposeReply || o.Purpose == PurposeCatchUp {
				got[o.To]++
			}
		}
	}
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		out, err := a.e.PeerUp(at(1), p)
		if err != nil {
			t.Fatal(err)
		}
		count(out)
	}
	if len(got) != 2 {
		t.Fatalf("states to %v at once; want 2 (MaxStateSends)", got)
	}
	for ms := int64(200); ms <= 20_000; ms += 200 {
		out, err := a.e.Tick(at(ms))
		if err != nil {
			t.Fatal(err)
		}
		count(out)
	}
	if len(got) != 5 {
		t.Fatalf("states to %v after 20 s (2 per 10 s); want one to each of the 5 peers", got)
	}
	for p, n := range got {
		if n != 1 {
			t.Fatalf("%d states to %s, want 1", n, p)
		}
	}
}

// TestEmptyNodeOwesNoStates: a node that holds no key when peers come up
// (a cluster started at once) sends them no state and owes none, so its
// later ticks, with a full table, send no full state past MaxStateSends
// either; a node that holds keys still sends and owes them
// (TestStateSendsAreCappedInTotal).
func TestEmptyNodeOwesNoStates(t *testing.T) {
	a := newTestNodeWith(t, "a", 6, 600, func(cfg *Config) { cfg.MaxStateSends = 2 })
	states := 0
	count := func(out []Outbound) {
		for _, o := range out {
			if o.Purpose == PurposeReply || o.Purpose == PurposeCatchUp {
				states++
			}
		}
	}
	for _, p := range []string{"p1", "p2", "p3", "p4", "p5"} {
		out, err := a.e.PeerUp(at(1), p)
		if err != nil {
			t.Fatal(err)
		}
		count(out)
	}
	if states != 0 || a.e.owed != 0 {
		t.Fatalf("an empty node sent %d states and owes %d; want none", states, a.e.owed)
	}
	a.hit(t, 100, "k", 5)
	for ms := int64(200); ms <= 20_000; ms += 200 {
		out, err := a.e.Tick(at(ms))
		if err != nil {
			t.Fatal(err)
		}
		count(out)
	}
	if states != 0 {
		t.Fatalf("%d full states sent by ticks; want none (nothing was owed)", states)
	}
}

// TestReplayedAskIsDecidedOnce: an ask decided twice would be granted
// twice, and the second grant, which nobody counts, would over-count at
// the coordinator; a replayed ask (a repeat, AskAgain, or a duplicate) is
// answered with the first answer, never decided again, and a stale ask
// is dropped.
func TestReplayedAskIsDecidedOnce(t *testing.T) {
	a, k := newCoordNode(t, "a", 2), newCoordNode(t, "k", 2)
	up(t, 0, a.testNode, k.testNode)
	key := a.keyFor(at(0), "k")
	asked, _ := a.ask(t, at(10), key)
	msg := asked.Out.Msgs[0]
	var first []byte
	for i := range 50 {
		rcv, err := k.e.Receive(at(11+int64(i)), msg)
		if err != nil || len(rcv.Out) != 1 || first != nil && !bytes.Equal(rcv.Out[0].Msgs[0], first) {
			t.Fatalf("copy %d: %+v %v, want the first answer", i, rcv, err)
		}
		first = rcv.Out[0].Msgs[0]
	}
	var r [1]counter.Result
	k.c.Allow(at(100), key, 10, []counter.Limit{k.lim}, r[:])
	if n := k.e.Stats.AsksAnswered.Load(); n != 1 || r[0].Pending != 1 {
		t.Fatalf("decided %d times, %d granted hits pending; want 1 and 1", n, r[0].Pending)
	}
	// Sent 11 s ago: stale.
	oldAsk, _ := a.ask(t, at(0), key)
	old := oldAsk.Out.Msgs[0]
	if _, err := k.e.Receive(at(11_000), old); !errors.Is(err, ErrStale) {
		t.Fatalf("a stale ask: %v, want ErrStale", err)
	}
}

// TestThirdNodesSlicesAreRefused: a member sends its own slices and, in a
// catch-up, the receiver's; slices it names as a third node's are forged
// (issue 9, finding 5: a datagram could name a real member as the origin)
// and refused, counted, while the rest of the message merges.
func TestThirdNodesSlicesAreRefused(t *testing.T) {
	a, b, c := newTestNode(t, "a", 3), newTestNode(t, "b", 3), newTestNode(t, "c", 3)
	up(t, 0, a, b, c)
	lim := a.lim.ID()
	es := []counter.Entry{
		{Limit: lim, Key: "k", Origin: "b", Start: at(10).UnixMilli(), Count: 2}, // b's own
		{Limit: lim, Key: "k", Origin: "a", Start: at(11).UnixMilli(), Count: 3}, // a's, sent back
		{Limit: lim, Key: "k", Origin: "c", Start: at(12).UnixMilli(), Count: 500},
	}
	msgs, err := encodeEntries(newHandle(1024), kindState, "b", at(20).UnixMilli(), es, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.e.Receive(at(20), msgs[0]); err != nil {
		t.Fatal(err)
	}
	if got := a.count(t, 30, "k"); got != 5 {
		t.Fatalf("a counts %d, want 5: b's 2 and its own 3, not the 500 b claims for c", got)
	}
	if n := a.e.Stats.EntriesRefused.Load(); n != 1 {
		t.Fatalf("%d entries refused, want 1", n)
	}
}
