package engine

import (
	"strconv"
	"testing"

	"github.com/limiterd/limiterd/counter"
)

// loopbackMessageBytes is the largest sync message of a datagram on
// Linux's loopback, as the cluster package sizes it (memberlist's framing
// taken from its largest budget, DefaultStreamBytes).
const loopbackMessageBytes = DefaultStreamBytes - 1 - 5

// askBeside returns a coordinator k and an asker a of 2 nodes, up, with a
// key k coordinates, and the sync messages of a tick of a's in which a
// counted one request of each of keys clients, in loopback's datagrams:
// what k merges between the asks it answers, as a peer of the node of 8
// does.
func askBeside(tb testing.TB, keys int) (a, k *coordNode, key string, sync [][]byte) {
	tb.Helper()
	big := func(cfg *Config) { cfg.DatagramBytes = loopbackMessageBytes }
	a, k = newCoordNodeLimit(tb, "a", 2, 600, big), newCoordNodeLimit(tb, "k", 2, 600, big)
	up(tb, 0, a.testNode, k.testNode)
	es := make([]counter.Entry, keys)
	for i := range es {
		es[i] = counter.Entry{Limit: a.lim.ID(), Origin: "a", Key: "client-" + strconv.Itoa(100000+i), Start: at(100).UnixMilli(), Count: 1}
	}
	sync, err := encodeEntries(a.e.h, kindDelta, "a", at(200).UnixMilli(), es, loopbackMessageBytes)
	if err != nil {
		tb.Fatal(err)
	}
	return a, k, a.keyFor(at(200), "k"), sync
}

// TestReleaseLeavesNothingToClear: a wire released after a sync message
// holds none of its keys or entries, not even cleared ones in its length,
// so that the release after the next message, an ask as likely as not,
// does not clear them all again (wire.release).
func TestReleaseLeavesNothingToClear(t *testing.T) {
	a, _, _, sync := askBeside(t, 3000)
	w := newWire(a.e.h)
	_, m, err := w.decode(sync[0], DefaultDecodeLimits())
	if err != nil {
		t.Fatal(err)
	}
	w.entries = m.entries(w.entries[:0])
	if len(w.entries) < 1000 {
		t.Fatalf("a message of %d entries, want a tick's thousands", len(w.entries))
	}
	w.release()
	if len(w.entries) != 0 {
		t.Errorf("released: %d entries left to clear", len(w.entries))
	}
	for i, g := range w.m.Groups[:cap(w.m.Groups)] {
		if len(g.Keys) != 0 {
			t.Errorf("released: group %d has %d keys left to clear", i, len(g.Keys))
		}
		for j, k := range g.Keys[:cap(g.Keys)] {
			if k != "" {
				t.Fatalf("released: group %d still holds key %d, %q", i, j, k)
			}
		}
	}
	for i, e := range w.entries[:cap(w.entries)] {
		if e != (counter.Entry{}) {
			t.Fatalf("released: entry %d still held: %+v", i, e)
		}
	}
}

// BenchmarkAnswerAsk measures a coordinator's Receive of an ask, its
// decision and answer included, as a peer of the node of 8 answers them:
// between sync messages of a tick's changes (a loopback datagram of
// 3,000 entries), each decoded, as the asks are, with one of the engine's
// pooled wires. Only the ask's Receive is timed.
//
//	go test ./cluster/engine -run '^$' -bench AnswerAsk -benchtime 3000x
func BenchmarkAnswerAsk(b *testing.B) {
	a, k, key, sync := askBeside(b, 3000)
	var res [1]counter.Result
	ask := new(counter.Ask)
	now := at(200)
	for range b.N {
		b.StopTimer()
		deliver(b, k.testNode, now, sync[:1])
		a.c.PrepareAsk(now, key, 1, []counter.Limit{a.lim}, ask)
		asked, err := a.e.Ask(now, ask, res[:])
		if err != nil || len(asked.Out.Msgs) != 1 {
			b.Fatalf("Ask: %+v %v", asked, err)
		}
		b.StartTimer()
		r, err := k.e.Receive(now, asked.Out.Msgs[0])
		b.StopTimer()
		if err != nil || len(r.Out) != 1 || r.Out[0].Purpose != PurposeAnswer {
			b.Fatalf("the coordinator's Receive: %+v %v", r, err)
		}
		// The answer settles the ask, so that the asker's asks stay few.
		if _, err := a.e.Receive(now, r.Out[0].Msgs[0]); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
