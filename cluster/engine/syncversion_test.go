package engine

import (
	"fmt"
	"testing"
)

// TestSyncVersionFollowsTheOldestPeer: a node writes version 2 while every
// peer it was told of decodes it, version 1 (which every release decodes)
// from the moment one is a release that does not, and version 2 again once
// that peer is upgraded or forgotten; a version 1 message from such a
// peer is merged as before, so a rolling upgrade keeps every pair syncing.
func TestSyncVersionFollowsTheOldestPeer(t *testing.T) {
	a, b, c := newTestNode(t, "a", 3), newTestNode(t, "b", 3), newTestNode(t, "c", 3)
	up(t, 0, a, b, c)
	ms := int64(100)
	tick := func(want uint8) {
		t.Helper()
		a.hit(t, ms, fmt.Sprint("client-", ms), 1)
		out, err := a.e.Tick(at(ms))
		if err != nil {
			t.Fatal(err)
		}
		for _, to := range []string{"b", "c"} {
			msgs := msgsTo(out, to)
			if len(msgs) == 0 {
				t.Fatalf("at %d ms: nothing to %s", ms, to)
			}
			for _, m := range msgs {
				if _, got, err := decode(nil, m, DefaultDecodeLimits()); err != nil || got.Version != want {
					t.Fatalf("at %d ms: a message to %s of version %d (%v), want %d", ms, to, got.Version, err, want)
				}
			}
			deliver(t, map[string]testNode{"b": b, "c": c}[to], at(ms), msgs)
		}
		if got := b.count(t, ms, fmt.Sprint("client-", ms)); got != 1 {
			t.Fatalf("at %d ms: b counts %d, want 1", ms, got)
		}
		ms += 200
	}
	tick(wireVersion)
	a.e.SetPeerSyncVersion("b", wireVersion)
	tick(wireVersion)
	a.e.SetPeerSyncVersion("c", wireVersionPlain) // c is of an older release
	if a.e.SyncVersion() != wireVersionPlain {
		t.Fatalf("SyncVersion %d with a version 1 peer", a.e.SyncVersion())
	}
	tick(wireVersionPlain)
	hb, err := a.e.heartbeat(at(ms))
	if err != nil || hb[0][2] != wireVersionPlain {
		t.Fatalf("heartbeat %x, %v: want version 1", hb, err)
	}
	a.e.SetPeerSyncVersion("c", wireVersion) // c upgraded
	tick(wireVersion)
	a.e.SetPeerSyncVersion("c", wireVersionPlain)
	a.e.Forget("c") // c left for good
	if a.e.SyncVersion() != wireVersion {
		t.Fatalf("SyncVersion %d once the version 1 peer is forgotten", a.e.SyncVersion())
	}

	// What a version 1 peer sends is merged.
	c.e.SetPeerSyncVersion("a", wireVersionPlain)
	c.hit(t, ms, "from-c", 2)
	out, err := c.e.Tick(at(ms))
	if err != nil {
		t.Fatal(err)
	}
	msgs := msgsTo(out, "b")
	if _, got, err := decode(nil, msgs[0], DefaultDecodeLimits()); err != nil || got.Version != wireVersionPlain {
		t.Fatalf("c wrote version %d (%v), want 1", got.Version, err)
	}
	deliver(t, b, at(ms), msgs)
	if got := b.count(t, ms, "from-c"); got != 2 {
		t.Fatalf("b counts %d of c's version 1 message, want 2", got)
	}
}
