package engine

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/counter"
)

// routedNodes returns engines named names, all up, whose counters
// coordinate with routing r, with the "default" limit of limit per minute.
func routedNodes(t *testing.T, r counter.Routing, limit int64, names ...string) []testNode {
	t.Helper()
	ns := make([]testNode, len(names))
	for i, name := range names {
		ns[i] = newTestNodeWith(t, name, len(names), limit, nil)
		cc, _ := ns[i].c.Cluster()
		cc.Coordinated, cc.Routing = true, r
		if err := ns[i].c.SetCluster(cc); err != nil {
			t.Fatal(err)
		}
	}
	up(t, 0, ns...)
	return ns
}

// admit counts k requests of key at ms on n alone (the budget is off), as
// a node does after its coordinator's grant or on a lease.
func admit(t *testing.T, n testNode, ms int64, key string, k int) {
	t.Helper()
	var res [1]counter.Result
	for range k {
		if d, err := n.c.AllowFallback(at(ms), key, 1, []counter.Limit{n.lim}, res[:]); err != nil || !d.Allowed {
			t.Fatalf("%s: %q at %d ms: %+v %v", n.name, key, ms, d, err)
		}
	}
}

// deltaTargets returns the peers the tick's deltas (and anti-entropy) go
// to, and how many entries each gets.
func deltaTargets(t *testing.T, n testNode, out []Outbound) map[string]int {
	t.Helper()
	got := map[string]int{}
	for _, o := range out {
		if o.Purpose != PurposeDelta && o.Purpose != PurposeAntiEntropy {
			continue
		}
		for _, m := range o.Msgs {
			_, msg, err := newWire(n.e.h).decode(m, DefaultDecodeLimits())
			if err != nil {
				t.Fatal(err)
			}
			got[o.To] += len(msg.entries(nil))
		}
	}
	return got
}

// TestRoutingFollowsTheBlindShare: which limits are routed, per Routing,
// on a cluster size where 600 a minute leaves each node a blind share (8),
// one where its split leaves 1, which routing takes (32), and one where it
// leaves none (34); 6000 a minute keeps 7 on 32 nodes and is broadcast; a
// limit of 10 leaves none on 8 nodes either, but up to MeshNodes (24)
// nodes every limit is broadcast; and the blind share RouteAlways takes
// away.
func TestRoutingFollowsTheBlindShare(t *testing.T) {
	for _, tc := range []struct {
		routing counter.Routing
		nodes   int
		limit   int64
		routed  bool
	}{
		{counter.RouteAuto, 8, 600, false},
		{counter.RouteAuto, 32, 600, true},
		{counter.RouteAuto, 34, 600, true},
		{counter.RouteAuto, 32, 6000, false},
		{counter.RouteAuto, 8, 10, false},
		{counter.RouteAuto, 25, 10, true},
		{counter.RouteNever, 32, 600, false},
		{counter.RouteAlways, 8, 600, true},
	} {
		t.Run(fmt.Sprintf("%v, %d on %d", tc.routing, tc.limit, tc.nodes), func(t *testing.T) {
			n := newTestNodeWith(t, "a", tc.nodes, tc.limit, nil)
			cc, _ := n.c.Cluster()
			cc.Coordinated, cc.Routing = true, tc.routing
			if err := n.c.SetCluster(cc); err != nil {
				t.Fatal(err)
			}
			if got := n.c.Routed()[n.lim.ID()]; got != tc.routed {
				t.Errorf("routed %t, want %t", got, tc.routed)
			}
			if blind := n.c.Shares(tc.limit).Blind; tc.routed && blind != 0 {
				t.Errorf("blind share %d of a routed limit, want none", blind)
			}
			cc.Coordinated = false
			if err := n.c.SetCluster(cc); err != nil {
				t.Fatal(err)
			}
			if len(n.c.Routed()) != 0 {
				t.Errorf("without a coordinator %v are routed, want none", n.c.Routed())
			}
		})
	}
}

// TestRoutedDeltasGoToTheCoordinator: a routed key's changes go to its
// coordinator alone, and those of a key this node coordinates to the next
// node in its order (the backup), while a broadcast limit's go to every
// peer. The coordinator then counts every node's admissions; the others
// only their own.
func TestRoutedDeltasGoToTheCoordinator(t *testing.T) {
	ns := routedNodes(t, counter.RouteAlways, 600, "a", "b", "c", "d")
	a := ns[0]
	members := []string{"a", "b", "c", "d"}
	var ofB, ofA string
	for i := 0; ofB == "" || ofA == ""; i++ {
		k := fmt.Sprint("key-", i)
		switch CoordinatorOf(k, members) {
		case "b":
			ofB = k
		case "a":
			ofA = k
		}
	}
	admit(t, a, 10, ofB, 3)
	admit(t, a, 10, ofA, 2)
	out, err := a.e.Tick(at(200))
	if err != nil {
		t.Fatal(err)
	}
	backup := newRing(members).destOf(ofA, "a")
	want := map[string]int{"b": 1}
	want[backup]++
	if got := deltaTargets(t, a, out); !maps.Equal(got, want) {
		t.Errorf("deltas to %v, want %v (the backup of a's key is %s)", got, want, backup)
	}
	for _, n := range ns[1:] {
		deliver(t, n, at(201), msgsTo(out, n.name))
	}
	admit(t, ns[2], 300, ofB, 4)
	out, err = ns[2].e.Tick(at(400))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, ns[1], at(401), msgsTo(out, "b"))
	if got := ns[1].count(t, 500, ofB); got != 7 {
		t.Errorf("the coordinator b counts %d of %s, want 7 (3 of a's, 4 of c's)", got, ofB)
	}
	if got := ns[3].count(t, 500, ofB); got != 0 {
		t.Errorf("d counts %d of %s, which it never admitted nor coordinates, want 0", got, ofB)
	}

	// The same admissions of a broadcast limit go to every peer.
	bc := routedNodes(t, counter.RouteNever, 600, "a", "b", "c", "d")
	admit(t, bc[0], 10, ofB, 3)
	out, err = bc[0].e.Tick(at(200))
	if err != nil {
		t.Fatal(err)
	}
	if got := deltaTargets(t, bc[0], out); !maps.Equal(got, map[string]int{"b": 1, "c": 1, "d": 1}) {
		t.Errorf("broadcast deltas to %v, want one entry to each peer", got)
	}
}

// TestRoutedKeyMovesWithItsCoordinator: when a key's coordinator leaves,
// this node sends its live slices of the key (all of them, not only the
// changes) to the key's new coordinator, and of the keys whose coordinator
// did not change, none: about 1/N of the keys move. Moved sends them at
// once, not spread, and the next tick sends them no more; without a call
// of Moved the next tick sends them.
func TestRoutedKeyMovesWithItsCoordinator(t *testing.T) {
	for _, moved := range []bool{false, true} {
		t.Run(map[bool]string{false: "at the next tick", true: "at once"}[moved], func(t *testing.T) { checkKeyMoves(t, moved) })
	}
}

func checkKeyMoves(t *testing.T, moved bool) {
	ns := routedNodes(t, counter.RouteAlways, 600, "a", "b", "c", "d")
	a := ns[0]
	members := []string{"a", "b", "c", "d"}
	var keys []string
	for i := range 40 {
		keys = append(keys, fmt.Sprint("key-", i))
	}
	for i, k := range keys {
		admit(t, a, int64(i), k, 2)
	}
	if _, err := a.e.Tick(at(200)); err != nil {
		t.Fatal(err)
	}
	a.e.PeerDown(at(300), "b")
	var out []Outbound
	var err error
	if moved {
		if out, err = a.e.Moved(at(300)); err != nil {
			t.Fatal(err)
		}
		for _, o := range out {
			if o.Spread {
				t.Errorf("the moved slices to %s are spread over the interval, want them sent at once", o.To)
			}
		}
		again, err := a.e.Moved(at(350))
		if err != nil || len(again) != 0 {
			t.Fatalf("Moved again, with nothing changed since: %+v %v, want nothing", again, err)
		}
		tick, err := a.e.Tick(at(400))
		if err != nil {
			t.Fatal(err)
		}
		if got := deltaTargets(t, a, tick); len(got) != 0 {
			t.Errorf("the tick after Moved sent %v entries, want none: nothing was admitted since", got)
		}
	} else if out, err = a.e.Tick(at(400)); err != nil {
		t.Fatal(err)
	}
	after := []string{"a", "c", "d"}
	want := map[string]int{}
	for _, k := range keys {
		before, now := newRing(members).destOf(k, "a"), newRing(after).destOf(k, "a")
		if before != now {
			want[now]++
		}
	}
	if len(want) == 0 {
		t.Fatal("no key moved: the test proves nothing")
	}
	if got := deltaTargets(t, a, out); !maps.Equal(got, want) {
		t.Errorf("after b left, a sent %v entries, want %v (one live slice of each key whose destination changed)", got, want)
	}
	if _, ok := deltaTargets(t, a, out)["b"]; ok {
		t.Error("a sent to b, which is down")
	}
}

// TestStateForSendsARoutedKeyOnlyWhereItGoes: a catch-up carries a routed
// key's slices only to the node they are routed to.
func TestStateForSendsARoutedKeyOnlyWhereItGoes(t *testing.T) {
	ns := routedNodes(t, counter.RouteAlways, 600, "a", "b", "c")
	a := ns[0]
	var keys []string
	for i := range 30 {
		k := fmt.Sprint("key-", i)
		keys = append(keys, k)
		admit(t, a, 10, k, 1)
	}
	r := newRing([]string{"a", "b", "c"})
	for _, peer := range []string{"b", "c"} {
		msgs, err := a.e.StateFor(at(100), peer)
		if err != nil {
			t.Fatal(err)
		}
		var got, want []string
		for _, m := range msgs {
			_, msg, err := newWire(a.e.h).decode(m, DefaultDecodeLimits())
			if err != nil {
				t.Fatal(err)
			}
			for _, en := range msg.entries(nil) {
				got = append(got, en.Key)
			}
		}
		for _, k := range keys {
			if r.destOf(k, "a") == peer {
				want = append(want, k)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) || len(want) == 0 {
			t.Errorf("state for %s carries %v, want %v", peer, got, want)
		}
	}
}

// TestRingMovesOnlyTheDepartedMembersKeys: a departure moves only the
// departed member's keys, and a join takes about 1/N of them; the
// busiest of 8 members coordinates at most 1.5 times its fair share.
func TestRingMovesOnlyTheDepartedMembersKeys(t *testing.T) {
	members := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	full, without, with := newRing(members), newRing(members[:7]), newRing(append(slices.Clone(members), "n8"))
	const keys = 20_000
	load := map[string]int{}
	joined := 0
	for i := range keys {
		k := fmt.Sprint("client-", i)
		c := full.first(k)
		load[c]++
		if c != "n7" && without.first(k) != c {
			t.Fatalf("%s moved from %s when n7 left", k, c)
		}
		if n := with.first(k); n != c {
			if n != "n8" {
				t.Fatalf("%s moved from %s to %s when n8 joined", k, c, n)
			}
			joined++
		}
	}
	if share := float64(joined) / keys; share < 0.5/9 || share > 2.0/9 {
		t.Errorf("a ninth member took %.3f of the keys, want about 1/9", share)
	}
	for m, n := range load {
		if float64(n) > 1.5*keys/8 {
			t.Errorf("%s coordinates %d of %d keys, over 1.5 x its share", m, n, keys)
		}
	}
}

// destOf is where self sends its slices of key on r, nobody failed over.
func (r *ring) destOf(key, self string) string { return view{ring: r}.dest(self, key) }

// TestRoutedKeyRebuiltAfterItsCoordinatorLeaves: what the nodes admitted
// of a key, its coordinator's own admissions included (kept by its
// backup), is the new coordinator's count once every node's next tick has
// reached it: nothing lost, and nothing counted twice when the messages
// arrive again.
func TestRoutedKeyRebuiltAfterItsCoordinatorLeaves(t *testing.T) {
	ns := routedNodes(t, counter.RouteAlways, 600, "a", "b", "c", "d")
	byName := map[string]testNode{}
	for _, n := range ns {
		byName[n.name] = n
	}
	members := []string{"a", "b", "c", "d"}
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprint("key-", i); CoordinatorOf(k, members) == "b" {
			key = k
		}
	}
	next := newRing(members).destOf(key, "b") // b's backup, and its runner-up
	admitted := map[string]int{"a": 3, "b": 4, "c": 2, "d": 1}
	tickAll := func(ms int64, nodes []testNode) [][]Outbound {
		outs := make([][]Outbound, len(nodes))
		for i, n := range nodes {
			out, err := n.e.Tick(at(ms))
			if err != nil {
				t.Fatal(err)
			}
			outs[i] = out
		}
		for _, out := range outs {
			for _, n := range nodes {
				deliver(t, n, at(ms+1), msgsTo(out, n.name))
			}
		}
		return outs
	}
	for _, n := range ns {
		admit(t, n, 10, key, admitted[n.name])
	}
	tickAll(200, ns)
	if got := byName["b"].count(t, 250, key); got != 10 {
		t.Fatalf("the coordinator b counts %d, want 10", got)
	}
	if got := byName[next].count(t, 250, key); got == 10 {
		t.Fatalf("%s already counts all 10 before b left: the test proves nothing", next)
	}
	var live []testNode
	for _, n := range ns {
		if n.name != "b" {
			n.e.PeerDown(at(300), "b")
			live = append(live, n)
		}
	}
	outs := tickAll(400, live)
	if got := byName[next].count(t, 450, key); got != 10 {
		t.Errorf("the new coordinator %s counts %d after the move, want all 10 (b's 4 from its backup)", next, got)
	}
	for _, out := range outs { // the same messages again
		deliver(t, byName[next], at(460), msgsTo(out, next))
	}
	if got := byName[next].count(t, 470, key); got != 10 {
		t.Errorf("after the messages arrived twice %s counts %d, want 10", next, got)
	}
}

// TestFailedOverCoordinatorStillGetsTheCounts: a node that failed a
// routed key's coordinator over sends its changes of the key to the
// runner-up and to the coordinator as well: silent to this node, it may
// still grant the others' checks (a cut one way), and its count must hold
// what this node admits meanwhile. Keys of other coordinators go to their
// coordinator alone.
func TestFailedOverCoordinatorStillGetsTheCounts(t *testing.T) {
	ns := routedNodes(t, counter.RouteAlways, 600, "a", "k", "r", "s")
	a, k := &coordNode{testNode: ns[0]}, ns[1]
	members := []string{"a", "k", "r", "s"}
	var ofK, ofR string
	for i := 0; ofK == "" || ofR == ""; i++ {
		c := fmt.Sprint("key-", i)
		switch {
		case CoordinatorOf(c, members) == "k" && CoordinatorOf(c, []string{"a", "r", "s"}) == "r":
			ofK = c
		case CoordinatorOf(c, members) == "r":
			ofR = c
		}
	}
	for range a.e.cfg.FailoverMisses {
		miss(t, a, 10, ofK)
	}
	ms := int64(100)
	if got := a.e.FailedOver(at(ms)); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("a fails over %v, want k", got)
	}
	if _, err := a.e.Tick(at(ms)); err != nil { // the view changes: nothing of a's to move yet
		t.Fatal(err)
	}
	admit(t, a.testNode, ms+10, ofK, 3)
	admit(t, a.testNode, ms+10, ofR, 2)
	out, err := a.e.Tick(at(ms + 200))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := deltaTargets(t, a.testNode, out), map[string]int{"k": 1, "r": 2}; !maps.Equal(got, want) {
		t.Fatalf("deltas to %v, want %v (%s's to k and r, %s's to r)", got, want, ofK, ofR)
	}
	deliver(t, k, at(ms+201), msgsTo(out, "k"))
	if got := k.count(t, ms+300, ofK); got != 3 {
		t.Fatalf("k counts %d of %s, want a's 3", got, ofK)
	}
}

// TestMovedFollowsAFailover: when a node fails a key's coordinator over
// (its asks missed) it sends its slices of the key to the runner-up at
// once (Moved), and when it hears the coordinator again, back to it.
func TestMovedFollowsAFailover(t *testing.T) {
	ns, key := relayNodes(t, counter.RouteAlways, "f", "x", "a")
	a, f := ns["a"], ns["f"]
	admit(t, a.testNode, 10, key, 3)
	if _, err := a.e.Tick(at(200)); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func(ms int64)
		to   string
	}{
		{"failed over", func(ms int64) { failOver(t, a, key, ms) }, "x"},
		{"heard again", func(ms int64) { heardFrom(t, f, a, ms) }, "f"},
	} {
		ms := map[string]int64{"failed over": 300, "heard again": 500}[step.name]
		step.do(ms)
		out, err := a.e.Moved(at(ms + 10))
		if err != nil {
			t.Fatal(err)
		}
		if got := deltaTargets(t, a.testNode, out); !maps.Equal(got, map[string]int{step.to: 1}) {
			t.Errorf("%s: Moved sent %v entries, want a's slice of the key to %s", step.name, got, step.to)
		}
	}
}
