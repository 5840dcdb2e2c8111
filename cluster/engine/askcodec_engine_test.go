package engine

import (
	"bytes"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestReceiveCoordinationKeepsNoBytes: the coordination decoders' strings
// alias the message (askcodec_decode.go), and the transport may reuse its
// bytes once Receive returns. So nothing Receive leaves behind or returns
// may hold one: after overwriting the bytes of an ask, its answer and a
// release, the sender's name Receive returned, the answer's, the peer
// table (which tells a replayed ask), the coordinator's grant and the
// asker's slice it merged are all as they were. It rests on
// counter.Coordinate and Release copying every string they keep
// (counter.Ask) and on the sender's name being a copy (wire.name).
func TestReceiveCoordinationKeepsNoBytes(t *testing.T) {
	a, k := newCoordNode(t, "a", 2), newCoordNode(t, "k", 2)
	up(t, 0, a.testNode, k.testNode)
	key := a.keyFor(at(0), "k")
	// receive hands n the message in a buffer of its own, then overwrites
	// the buffer as a transport's next packet would.
	receive := func(n *coordNode, now time.Time, msg []byte) Received {
		t.Helper()
		buf := bytes.Clone(msg)
		rcv, err := n.receive(t, now, buf)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		return rcv
	}
	ask := new(counter.Ask)
	a.c.PrepareAsk(at(10), key, 1, []counter.Limit{a.lim}, ask)
	// A slice of a's of the key, which k merges before deciding.
	ask.Entries = append(ask.Entries, counter.Entry{Limit: a.lim.ID(), Key: key, Origin: "a", Start: at(5).UnixMilli(), Count: 2})
	var res [1]counter.Result
	asked, err := a.e.Ask(at(10), ask, res[:])
	if err != nil || len(asked.Out.Msgs) != 1 {
		t.Fatalf("Ask: %+v %v", asked, err)
	}
	rcv := receive(k, at(11), asked.Out.Msgs[0])
	if rcv.From != "a" || len(rcv.Out) != 1 || rcv.Out[0].To != "a" {
		t.Fatalf("the coordinator's Receive, its bytes overwritten: from %q, %+v", rcv.From, rcv.Out)
	}
	answer := rcv.Out[0].Msgs[0]
	got := receive(a, at(12), answer)
	if got.From != "k" || !got.Answered || got.Answer.From != "k" || got.Answer.ID != asked.ID || !got.Answer.Allowed || len(got.Answer.Results) != 1 || got.Answer.Results[0].Count != 2 {
		t.Fatalf("the asker's Receive, its bytes overwritten: %+v", got)
	}
	// k counts a's slice and its grant, under the key and limit they name.
	var r [1]counter.Result
	k.c.Allow(at(13), key, 10, []counter.Limit{k.lim}, r[:]) // 10 never fits: counts nothing
	if r[0].Count != 3 || r[0].Pending != 1 {
		t.Fatalf("the coordinator counts %d, %d pending; want a's 2 and the grant pending", r[0].Count, r[0].Pending)
	}
	if st := k.c.AppendState(nil, at(13), "a", 0); len(st) != 1 || st[0].Origin != "a" || st[0].Limit != k.lim.ID() || st[0].Key != key || st[0].Count != 2 {
		t.Fatalf("the coordinator holds %+v of a's, want its slice of %q", st, key)
	}
	// The peer table remembers the ask under a's name: the same ask again
	// (a repeat, AskAgain) gets the same answer, from a copy of its own,
	// and is not decided again.
	if again := receive(k, at(14), asked.Out.Msgs[0]); len(again.Out) != 1 || !bytes.Equal(again.Out[0].Msgs[0], answer) || k.e.Stats.AsksAnswered.Load() != 1 {
		t.Fatalf("the ask again: %+v, decided %d times; want the first answer, decided once", again, k.e.Stats.AsksAnswered.Load())
	}
	// A release of a grant, its bytes overwritten, stops it counting.
	asked, _ = a.ask(t, at(20), key)
	receive(k, at(20), asked.Out.Msgs[0])
	rel, ok, err := a.e.AskExpired(at(21), asked.ID)
	if err != nil || !ok {
		t.Fatalf("AskExpired: %v %v", ok, err)
	}
	if rcv := receive(k, at(22), rel.Msgs[0]); rcv.From != "a" {
		t.Fatalf("the release's sender, its bytes overwritten: %q", rcv.From)
	}
	k.c.Allow(at(23), key, 10, []counter.Limit{k.lim}, r[:])
	if r[0].Pending != 0 || k.e.Stats.Releases.Load() != 1 {
		t.Fatalf("after the release the coordinator has %d pending, %d releases; want 0 and 1", r[0].Pending, k.e.Stats.Releases.Load())
	}
}
