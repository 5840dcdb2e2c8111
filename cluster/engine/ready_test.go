package engine

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestReadyWaitsForEveryPeer: a node that joined at 0 is ready once every
// live peer has sent it a sync message (a hello, a heartbeat, a state)
// since its engine started, or once CatchUpWait has passed; a peer taken
// down no longer holds it back, and one heard once stays heard.
func TestReadyWaitsForEveryPeer(t *testing.T) {
	n := newTestNode(t, "n", 3)
	a, b := newTestNode(t, "a", 3), newTestNode(t, "b", 3)
	for _, p := range []string{"a", "b"} {
		if _, err := n.e.PeerUp(at(0), p); err != nil {
			t.Fatal(err)
		}
	}
	// greet has peer p see n up: its hello (a sync message) reaches n.
	greet := func(p testNode, ms int64) {
		out, err := p.e.PeerUp(at(ms), "n")
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, n, at(ms), msgsTo(out, "n"))
	}
	wait := DefaultTiming().CatchUpWait
	for _, step := range []struct {
		name    string
		do      func()
		ms      int64
		unheard []string
	}{
		{"joined, nobody heard", func() {}, 100, []string{"a", "b"}},
		{"a sees n up", func() { greet(a, 200) }, 200, []string{"b"}},
		{"still waiting for b just before CatchUpWait", func() {}, wait.Milliseconds() - 1, []string{"b"}},
		{"b taken down", func() { n.e.PeerDown(at(300), "b") }, 300, nil},
		{"b up again, never heard", func() {
			if _, err := n.e.PeerUp(at(400), "b"); err != nil {
				t.Fatal(err)
			}
		}, 400, []string{"b"}},
		{"b sees n up", func() { greet(b, 500) }, 500, nil},
		{"b down and up again, heard before", func() {
			n.e.PeerDown(at(600), "b")
			if _, err := n.e.PeerUp(at(700), "b"); err != nil {
				t.Fatal(err)
			}
		}, 700, nil},
	} {
		step.do()
		got := n.e.Unheard(nil)
		if !slices.Equal(got, step.unheard) {
			t.Fatalf("%s: unheard %v, want %v", step.name, got, step.unheard)
		}
		err := n.e.Ready(at(step.ms), at(0))
		if len(step.unheard) == 0 {
			if err != nil {
				t.Fatalf("%s: %v, want ready", step.name, err)
			}
			continue
		}
		if !errors.Is(err, ErrUnheard) || !strings.Contains(err.Error(), strings.Join(step.unheard, ", ")) {
			t.Fatalf("%s: %v, want ErrUnheard naming %v", step.name, err, step.unheard)
		}
		if err := n.e.Ready(at(wait.Milliseconds()), at(0)); err != nil {
			t.Fatalf("%s: %v at CatchUpWait, want ready", step.name, err)
		}
	}

	// A new engine has heard nobody; with CatchUpWait 0 it is ready at
	// once all the same.
	m := newTestNodeWith(t, "m", 2, 600, func(c *Config) { c.CatchUpWait = 0 })
	if _, err := m.e.PeerUp(at(0), "a"); err != nil {
		t.Fatal(err)
	}
	if got := m.e.Unheard(nil); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("unheard %v, want [a]", got)
	}
	if err := m.e.Ready(at(0), at(0)); err != nil {
		t.Fatalf("CatchUpWait 0: %v, want ready at once", err)
	}
}

// TestReadyNamesAFewPeers: the error names three peers and counts the
// rest, so that /readyz stays short on a large cluster.
func TestReadyNamesAFewPeers(t *testing.T) {
	n := newTestNode(t, "n", 6)
	for _, p := range []string{"e", "a", "d", "b", "c"} {
		if _, err := n.e.PeerUp(at(0), p); err != nil {
			t.Fatal(err)
		}
	}
	err := n.e.Ready(at(1500), at(0))
	if want := "a, b, c and 2 more, 1.5s after joining (at most 5s)"; err == nil || !strings.HasSuffix(err.Error(), want) {
		t.Fatalf("%v, want it to end %q", err, want)
	}
}
