package cluster

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestNodeReset resets a key over memberlist on loopback: asked of a node
// that does not coordinate the key, then of the coordinator; every node
// applies it and says so, counts nothing of what came before, and keeps
// what comes after. With the coordinator cut off the reset fails within
// its deadline and claims nothing; with a peer cut off it succeeds and
// names that peer as unconfirmed.
func TestNodeReset(t *testing.T) {
	nw := newNetwork()
	nodes := startCluster(t, 3, nodeOpts{nw: nw})
	coord := nodes[2]
	key := keyCoordinatedBy(coord.name, nodes)
	for _, tn := range nodes {
		waitFor(t, tn.name+" to agree on the coordinator", func() bool { return tn.n.engine.Coordinator(time.Now(), key) == coord.name })
	}
	all := []string{"n1", "n2", "n3"}
	for _, asker := range []*tnode{nodes[0], coord} {
		for _, tn := range nodes {
			tn.hit(t, key, 4)
		}
		waitCounts(t, key, 12, nodes...)
		var res [1]counter.Result
		who, err := asker.n.Inspect(context.Background(), key, []counter.Limit{asker.lim}, res[:])
		if err != nil || who != coord.name || res[0].Count != 12 || res[0].Remaining != 988 {
			t.Fatalf("Inspect on %s = %s %+v, %v; want %s, 12 counted", asker.name, who, res[0], err, coord.name)
		}
		before := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rep, err := asker.n.Reset(ctx, key, []counter.Limit{asker.lim})
		cancel()
		if err != nil || rep.Coordinator != coord.name || !slices.Equal(rep.Applied, all) || len(rep.Unconfirmed)+len(rep.Refused) != 0 || rep.At.Before(before.Truncate(time.Millisecond)) || rep.At.After(time.Now().Add(time.Millisecond)) {
			t.Fatalf("Reset on %s = %+v, %v; want applied by all, at an instant of the call", asker.name, rep, err)
		}
		for _, tn := range nodes {
			if n := tn.peek(key); n != 0 {
				t.Errorf("%s counts %d right after the reset, want 0", tn.name, n)
			}
		}
	}
	nodes[1].hit(t, key, 3)
	waitCounts(t, key, 3, nodes...)

	nw.partition(nodes[:2], nodes[2:])
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	_, err := nodes[0].n.Reset(ctx, key, []counter.Limit{nodes[0].lim})
	cancel()
	if !errors.Is(err, ErrResetUnanswered) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reset with the coordinator cut off: %v, want ErrResetUnanswered at the deadline", err)
	}
	nw.heal()
	nw.partition(nodes[1:2], []*tnode{nodes[0], coord})
	ctx, cancel = context.WithTimeout(context.Background(), 300*time.Millisecond)
	rep, err := nodes[0].n.Reset(ctx, key, []counter.Limit{nodes[0].lim})
	cancel()
	if err != nil || !slices.Equal(rep.Applied, []string{"n1", "n3"}) || !slices.Equal(rep.Unconfirmed, []string{"n2"}) {
		t.Fatalf("reset with n2 cut off = %+v, %v; want applied by n1 and n3, n2 unconfirmed", rep, err)
	}
	// n2 missed the reset and still counts its 3, and one more in the
	// same slice; the others refuse that slice, which started before the
	// reset. A marker key's hit goes in the same delta, so once the
	// others count the marker they have had the slice.
	nw.heal()
	nodes[1].hit(t, key, 1)
	nodes[1].hit(t, "marker", 1)
	waitCounts(t, "marker", 1, nodes...)
	if n := nodes[1].peek(key); n != 4 {
		t.Errorf("n2 counts %d, want its 4", n)
	}
	for _, tn := range []*tnode{nodes[0], coord} {
		if n := tn.peek(key); n != 0 {
			t.Errorf("%s counts %d, want 0: n2's slice is from before the reset", tn.name, n)
		}
	}
}
