package engine

import (
	"fmt"
	"slices"
	"testing"

	"github.com/limiterd/limiterd/counter"
)

// TestWireReuse decodes messages of different shapes one after the other
// with one wire, as a pooled wire does, and checks each against a fresh
// decode: reused columns must never leak entries of an earlier message.
func TestWireReuse(t *testing.T) {
	h := newHandle(1024)
	mk := func(limits, origins, keys int) []byte {
		var es []counter.Entry
		for l := range limits {
			for o := range origins {
				for k := range keys {
					es = append(es, counter.Entry{Limit: fmt.Sprintf("l%d|1000|10", l), Origin: fmt.Sprintf("n%d", o), Key: fmt.Sprintf("k%d-%d", k, l), Start: int64(1_800_000_000_000 + k), Count: uint32(k + 1)})
				}
			}
		}
		kind := kindDelta
		if len(es) == 0 {
			kind = kindHello
		}
		msgs, err := encodeEntries(h, kind, "n9", 1, es, 1<<20)
		if err != nil || len(msgs) != 1 {
			t.Fatalf("encode: %v, %d messages", err, len(msgs))
		}
		return msgs[0]
	}
	big, small, hello := mk(3, 2, 40), mk(1, 1, 2), mk(0, 0, 0)
	// FuzzDecode's find: a delta whose one group is an empty map (and whose
	// sender is "0000"). A fresh wire refuses it, the group has no limit; a
	// wire that kept the last message's group took its limit and origin.
	emptyGroup := []byte("D\x94\x01\xa30000\x91\x80\x00\x00\x000000\xff\x00\x00\x00000000\xa10\x91\xa10\x910\x910")
	// A message array of two: version and sender, no send time, no groups.
	short := []byte("D\x92\x01\xa2n9")
	w := newWire(h)
	for i, b := range [][]byte{big, small, big, hello, []byte("Dgarbage"), small, big, emptyGroup, big, short, small} {
		_, fresh, errFresh := decode(h, b, DefaultDecodeLimits())
		_, got, err := w.decode(b, DefaultDecodeLimits())
		if (err == nil) != (errFresh == nil) {
			t.Fatalf("message %d: reused wire error %v, fresh %v", i, err, errFresh)
		}
		if err != nil {
			continue
		}
		if got.From != fresh.From || got.SentMs != fresh.SentMs || got.Version != fresh.Version {
			t.Fatalf("message %d: reused wire decoded %q at %d (v%d), fresh %q at %d (v%d)", i, got.From, got.SentMs, got.Version, fresh.From, fresh.SentMs, fresh.Version)
		}
		want := fresh.entries(nil)
		if g := got.entries(nil); !slices.Equal(g, want) {
			t.Fatalf("message %d: reused wire decoded %d entries, fresh %d\n%v\n%v", i, len(g), len(want), g, want)
		}
	}
	// And encoding after encoding reuses groups without mixing them.
	es := []counter.Entry{{Limit: "a|1|1", Origin: "x", Key: "k", Start: 5, Count: 1}}
	for range 3 {
		msgs, err := w.encodeEntries(kindDelta, wireVersion, "n9", 1, slices.Clone(es), 1<<20)
		if err != nil {
			t.Fatal(err)
		}
		_, m, err := decode(h, msgs[0], DefaultDecodeLimits())
		if err != nil {
			t.Fatal(err)
		}
		if got := m.entries(nil); !slices.Equal(got, es) {
			t.Fatalf("re-encoded %v, want %v", got, es)
		}
		es = append(es, counter.Entry{Limit: "b|1|1", Origin: "y", Key: fmt.Sprint("k", len(es)), Start: 6, Count: 2})
	}
}
