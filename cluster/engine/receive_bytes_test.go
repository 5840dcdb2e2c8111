package engine

import (
	"bytes"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestReceiveKeepsNoBytes: the transport may reuse a message's bytes once
// Receive returns (memberlist's NotifyMsg allows it), and the decoded
// strings alias them (wire.decode). So nothing Receive leaves behind may
// hold one: overwriting the bytes afterwards must change nothing of the
// counter, neither the keys it tracks, nor those it marks hot (AppendHot),
// nor the slices of its own a peer gave back after a restart, which the
// next tick sends on. It rests on counter.Merge copying every string it
// keeps (the contract on counter.Entry).
func TestReceiveKeepsNoBytes(t *testing.T) {
	// receive hands n each message in a buffer of its own, then overwrites
	// the buffer as a transport's next packet would.
	receive := func(n testNode, now time.Time, msgs [][]byte) []Outbound {
		t.Helper()
		var out []Outbound
		for _, m := range msgs {
			buf := bytes.Clone(m)
			rcv, err := n.e.Receive(now, buf)
			o := rcv.Out
			if err != nil {
				t.Fatal(err)
			}
			for i := range buf {
				buf[i] = 'X'
			}
			out = append(out, o...)
		}
		return out
	}
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	want := map[string]int64{} // a's counts
	for i := range 50 {
		k := fmt.Sprint("client-", 1000+i)
		want[k] = int64(1 + i%3)
		a.hit(t, 10, k, 1+i%3)
	}
	// A key b counts too, made hot (half its limit) by a's count.
	b.hit(t, 10, "hot", 100)
	b.hit(t, 10, "mine", 7)
	a.hit(t, 10, "hot", 250)
	want["hot"] = 250
	out, err := a.e.Tick(at(200))
	if err != nil {
		t.Fatal(err)
	}
	receive(b, at(200), msgsTo(out, "b"))

	var res [1]counter.Result
	for k, n := range want {
		if _, err := b.c.Peek(at(201), k, 0, []counter.Limit{b.lim}, res[:]); err != nil {
			t.Fatal(err)
		}
		if k == "hot" {
			n += 100
		}
		if res[0].Count != n {
			t.Errorf("b counts %d for %q after the message's bytes were overwritten, want %d", res[0].Count, k, n)
		}
	}
	got := map[string]int64{}
	for _, e := range b.c.AppendState(nil, at(201), "a", 0) {
		if e.Limit != b.lim.ID() || e.Origin != "a" {
			t.Errorf("b holds a slice of limit %q and origin %q", e.Limit, e.Origin)
		}
		got[e.Key] += int64(e.Count)
	}
	if !maps.Equal(got, want) {
		t.Errorf("b holds a's slices of %d keys, want %d:\n%v", len(got), len(want), got)
	}
	if hot := b.c.AppendHot(nil, at(201), "b"); len(hot) != 1 || hot[0].Key != "hot" || hot[0].Count != 100 {
		t.Errorf("b's hot slices: %+v, want its 100 of \"hot\"", hot)
	}

	// b restarts; a gives it back its slices, which its next tick sends on.
	b.hit(t, 300, "mine", 0)
	out, err = b.e.Tick(at(400))
	if err != nil {
		t.Fatal(err)
	}
	receive(a, at(400), msgsTo(out, "a"))
	b2 := newTestNode(t, "b", 2)
	now := at(11_000) // past a's RejoinInterval since it answered b's first hello
	out, err = b2.e.PeerUp(now, "a")
	if err != nil {
		t.Fatal(err)
	}
	receive(b2, now, msgsTo(receive(a, now, msgsTo(out, "a")), "b"))
	out, err = b2.e.Tick(now.Add(200 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	sent := map[string]int64{}
	for _, m := range msgsTo(out, "a") {
		_, _, _, es, err := DecodeEntries(m, DefaultDecodeLimits())
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range es {
			if e.Origin == "b" {
				sent[e.Key] += int64(e.Count)
			}
		}
	}
	if want := map[string]int64{"hot": 100, "mine": 7}; !maps.Equal(sent, want) {
		t.Errorf("restarted b sends on its slices given back as %v, want %v", sent, want)
	}
}
