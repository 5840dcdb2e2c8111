package engine

import (
	"bytes"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// skewNode is a test engine with a 1 s MaxClockOffset whose log lines
// are kept.
type skewNode struct {
	testNode
	logs *bytes.Buffer
	off  time.Duration // its clock minus true time
}

func newSkewNode(t *testing.T, name string, off time.Duration) *skewNode {
	t.Helper()
	return newSkewNodeWith(t, name, off, 600)
}

// newSkewNodeWith is newSkewNode with a limit of limit.
func newSkewNodeWith(t *testing.T, name string, off time.Duration, limit int64) *skewNode {
	t.Helper()
	sn := &skewNode{logs: new(bytes.Buffer), off: off}
	sn.testNode = newTestNodeWith(t, name, 2, limit, func(cfg *Config) {
		cfg.MaxClockOffset = time.Second
		cfg.Log = slog.New(slog.NewTextHandler(sn.logs, nil))
	})
	return sn
}

// newCoordinatedSkewNode is newSkewNode of a coordinated two-node cluster
// with a limit of 10, whose checks at the margin ask the key's coordinator.
func newCoordinatedSkewNode(t *testing.T, name string, off time.Duration) *skewNode {
	t.Helper()
	sn := newSkewNodeWith(t, name, off, 10)
	cc, _ := sn.c.Cluster()
	cc.Coordinated = true
	if err := sn.c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	return sn
}

// now is the node's clock at true time ms.
func (sn *skewNode) now(ms int64) time.Time { return at(ms).Add(sn.off) }

// lines returns the node's log lines of level that mention peer.
func (sn *skewNode) lines(level, peer string) int {
	k := 0
	for _, l := range strings.Split(sn.logs.String(), "\n") {
		if strings.Contains(l, "level="+level) && strings.Contains(l, "peer="+peer) {
			k++
		}
	}
	return k
}

// peek returns key's count on the node at true time ms, counting nothing.
func (sn *skewNode) peek(t *testing.T, ms int64, key string) int64 {
	t.Helper()
	var res [1]counter.Result
	if _, err := sn.c.Peek(sn.now(ms), key, 1, []counter.Limit{sn.lim}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

// skewUp makes a and b see each other up at true time ms, each on its
// own clock, delivering the hellos and their replies at once.
func skewUp(t *testing.T, ms int64, a, b *skewNode) {
	t.Helper()
	for _, p := range [][2]*skewNode{{a, b}, {b, a}} {
		x, y := p[0], p[1]
		out, err := x.e.PeerUp(x.now(ms), y.name)
		if err != nil {
			t.Fatal(err)
		}
		replies := deliver(t, y.testNode, y.now(ms), msgsTo(out, y.name))
		deliver(t, x.testNode, x.now(ms), msgsTo(replies, x.name))
	}
}

// tick runs from's Tick at true time ms and delivers what it sends to to
// at the same instant (no delay); it returns to's answers.
func tick(t *testing.T, ms int64, from, to *skewNode) []Outbound {
	t.Helper()
	out, err := from.e.Tick(from.now(ms))
	if err != nil {
		t.Fatal(err)
	}
	return deliver(t, to.testNode, to.now(ms), msgsTo(out, to.name))
}

// exchange ticks a and b at true time ms, each delivering to the other,
// and delivers their answers (hellos, replies, catch-ups) back and forth
// until there are none.
func exchange(t *testing.T, ms int64, a, b *skewNode) {
	t.Helper()
	for _, p := range [][2]*skewNode{{a, b}, {b, a}} {
		from, to := p[0], p[1]
		out, err := from.e.Tick(from.now(ms))
		if err != nil {
			t.Fatal(err)
		}
		for msgs := msgsTo(out, to.name); len(msgs) > 0; from, to = to, from {
			msgs = msgsTo(deliver(t, to.testNode, to.now(ms), msgs), from.name)
		}
	}
}

// TestSkewedPeerIsHeardButNotCounted: a peer whose clock is ahead beyond
// MaxClockOffset stays up and its offset is shown, but its slices are
// counted as skewed instead of merged, and one warning says so however
// many messages come; within the limit they merge, and so they do from a
// peer behind, which every message 2 s late (a starved node) looks like:
// that peer refuses ours instead.
func TestSkewedPeerIsHeardButNotCounted(t *testing.T) {
	for _, tc := range []struct {
		off    time.Duration
		merged bool
	}{
		{0, true},
		{50 * time.Millisecond, true},
		{200 * time.Millisecond, true},
		{-200 * time.Millisecond, true},
		{time.Second, true}, // at the limit, not beyond it
		{2 * time.Second, false},
		{-2 * time.Second, true},
	} {
		t.Run(fmt.Sprint(tc.off), func(t *testing.T) {
			a, b := newSkewNode(t, "a", 0), newSkewNode(t, "b", tc.off)
			skewUp(t, 0, a, b)
			b.hit(t, 100+tc.off.Milliseconds(), "k", 5)
			for ms := int64(200); ms <= 3000; ms += 200 {
				tick(t, ms, b, a)
			}
			want, skewed := int64(5), uint64(0)
			if !tc.merged {
				want, skewed = 0, 1
			}
			if got := a.peek(t, 3100, "k"); got != want {
				t.Errorf("a counts %d of b's requests, want %d", got, want)
			}
			s := &a.e.Stats
			if s.EntriesSkewed.Load() != skewed || s.EntriesMerged.Load() != 1-skewed {
				t.Errorf("entries skewed %d, merged %d; want %d skewed (one slice of 5)", s.EntriesSkewed.Load(), s.EntriesMerged.Load(), skewed)
			}
			// One delta and three heartbeats, none of them merged.
			if tc.merged && s.SkewedMessages.Load() != 0 || !tc.merged && s.SkewedMessages.Load() < 4 {
				t.Errorf("skewed messages %d (merged %v)", s.SkewedMessages.Load(), tc.merged)
			}
			p := a.e.Peers()["b"]
			if !p.Up || p.Skewed == tc.merged || p.Offset != tc.off {
				t.Errorf("a's view of b: %+v, want up, skewed %v, offset %v", p, !tc.merged, tc.off)
			}
			warns := 0
			if !tc.merged {
				warns = 1
			}
			if got := a.lines("WARN", "b"); got != warns {
				t.Errorf("%d warnings about b, want %d:\n%s", got, warns, a.logs)
			}
			if !tc.merged && !strings.Contains(a.logs.String(), "offset="+tc.off.String()) {
				t.Errorf("the warning does not give the offset %v:\n%s", tc.off, a.logs)
			}
		})
	}
}

// TestSkewWarningOncePerMinute: a peer that stays skewed is warned about
// again after a minute, not before.
func TestSkewWarningOncePerMinute(t *testing.T) {
	a, b := newSkewNode(t, "a", 0), newSkewNode(t, "b", 2*time.Second)
	skewUp(t, 0, a, b)
	for _, tc := range []struct {
		ms    int64
		warns int
	}{
		{1000, 1}, {30_000, 1}, {59_000, 1}, {60_100, 2}, {90_000, 2}, {121_000, 3},
	} {
		b.hit(t, tc.ms+2000, "k", 1)
		tick(t, tc.ms, b, a)
		if got := a.lines("WARN", "b"); got != tc.warns {
			t.Errorf("at %d ms: %d warnings, want %d:\n%s", tc.ms, got, tc.warns, a.logs)
		}
	}
	if got := a.peek(t, 121_100, "k"); got != 0 {
		t.Errorf("a counts %d of b's requests, want none", got)
	}
}

// TestSkewedPeerResumes: once the peer's clock is set right, merging
// resumes by itself within two anti-entropy intervals (the offset judged
// is the largest of that long), an info line says so on the side that
// refused (the one that saw the other ahead), and its hello brings back
// the slices it refused meanwhile.
func TestSkewedPeerResumes(t *testing.T) {
	a, b := newSkewNode(t, "a", 0), newSkewNode(t, "b", 2*time.Second)
	skewUp(t, 0, a, b)
	b.hit(t, 2100, "k", 5)
	// Both keep hearing each other (no silence, so no catch-up); a
	// refuses b's slices, and b, which sees a's clock 2 s behind (as it
	// would a late message), merges a's.
	for ms := int64(200); ms <= 12_800; ms += 200 {
		exchange(t, ms, a, b)
	}
	if got := a.peek(t, 12_900, "k"); got != 0 || !a.e.Peers()["b"].Skewed || b.e.Peers()["a"].Skewed {
		t.Fatalf("skewed: a counts %d, want 0; a sees %+v, b sees %+v", got, a.e.Peers()["b"], b.e.Peers()["a"])
	}
	catchUps := a.e.Stats.CatchUps.Load() + b.e.Stats.CatchUps.Load()
	replies := a.e.Stats.Replies.Load() + b.e.Stats.Replies.Load()
	b.off = 0 // set right, past RejoinInterval after the catch-ups of the join
	resumed := int64(0)
	for ms := int64(13_000); ms <= 16_000; ms += 200 {
		if ms == 15_000 {
			b.hit(t, ms, "k", 3)
		}
		exchange(t, ms, a, b)
		if resumed == 0 && !a.e.Peers()["b"].Skewed {
			resumed = ms
		}
	}
	if resumed == 0 || resumed > 15_000 {
		t.Errorf("a merges b's slices again from %d ms, want within 2 s of 13000", resumed)
	}
	if got := a.peek(t, 16_100, "k"); got != 8 {
		t.Errorf("a counts %d, want all 8 of b's", got)
	}
	if p := a.e.Peers()["b"]; p.Skewed || p.Offset != 0 {
		t.Errorf("a's view of b: %+v", p)
	}
	if n := a.e.Stats.Replies.Load() + b.e.Stats.Replies.Load() - replies; n != 1 {
		t.Errorf("%d hellos answered after the clock was set right, want b's answer to a's", n)
	}
	if n := a.e.Stats.CatchUps.Load() + b.e.Stats.CatchUps.Load() - catchUps; n != 0 {
		t.Errorf("%d catch-ups after the clock was set right, want none (no silence, no join)", n)
	}
	if a.lines("WARN", "b") != 1 || b.lines("WARN", "a") != 0 || a.lines("INFO", "b") != 1 || b.lines("INFO", "a") != 0 ||
		!strings.Contains(a.logs.String(), "back within") {
		t.Errorf("logs:\na:\n%s\nb:\n%s", a.logs, b.logs)
	}
}

// TestLateMessageIsNotSkew: a message that arrives late (a queue, a long
// catch-up) looks sent by a clock behind ours; a peer heard on time
// within the last anti-entropy intervals is not taken for skewed.
func TestLateMessageIsNotSkew(t *testing.T) {
	a, b := newSkewNode(t, "a", 0), newSkewNode(t, "b", 0)
	skewUp(t, 0, a, b)
	b.hit(t, 100, "k", 4)
	late, err := b.e.Tick(b.now(200))
	if err != nil {
		t.Fatal(err)
	}
	for _, ms := range []int64{1000, 2000, 3000} {
		tick(t, ms, b, a) // heartbeats, on time
	}
	deliver(t, a.testNode, a.now(3200), msgsTo(late, "a")) // 3 s late
	if got := a.peek(t, 3300, "k"); got != 4 || a.e.Stats.EntriesSkewed.Load() != 0 {
		t.Errorf("a counts %d (skewed entries %d), want the late delta merged", got, a.e.Stats.EntriesSkewed.Load())
	}
	if p := a.e.Peers()["b"]; p.Skewed || p.Offset != -3*time.Second {
		t.Errorf("a's view of b: %+v, want not skewed, last offset -3s", p)
	}
}

// TestSkewedCoordinatorIsPassedOver: a key's coordinator whose clock is
// ahead beyond MaxClockOffset is passed over, as a silent one is, while
// this node refuses its slices, and asked again once its clock is back
// within; one ahead by less is asked throughout.
func TestSkewedCoordinatorIsPassedOver(t *testing.T) {
	for _, tc := range []struct {
		off        time.Duration
		passedOver bool
	}{
		{200 * time.Millisecond, false},
		{2 * time.Second, true},
	} {
		t.Run(fmt.Sprint(tc.off), func(t *testing.T) {
			a, k := newCoordinatedSkewNode(t, "a", 0), newCoordinatedSkewNode(t, "k", tc.off)
			skewUp(t, 0, a, k) // a judges k's clock from its hello on
			key := "x"
			for i := 0; CoordinatorOf(key, []string{"a", "k"}) != "k"; i++ {
				key = string(rune('a'+i%26)) + key
			}
			for ms := int64(200); ms <= 2000; ms += 200 {
				exchange(t, ms, a, k)
			}
			want, failed := "k", []string(nil)
			if tc.passedOver {
				want, failed = "a", []string{"k"} // the runner-up of two: a itself
			}
			if got := a.e.Coordinator(a.now(2100), key); got != want || a.e.Peers()["k"].Skewed != tc.passedOver {
				t.Errorf("a asks %q about %s (k skewed: %v), want %q", got, key, a.e.Peers()["k"].Skewed, want)
			}
			if got := a.e.FailedOver(a.now(2100)); !slices.Equal(got, failed) {
				t.Errorf("a has failed over %v, want %v", got, failed)
			}
			// k sees a behind, which is not judged: it asks a about a's keys.
			if got := k.e.FailedOver(k.now(2100)); len(got) != 0 {
				t.Errorf("k has failed over %v, want none", got)
			}
			k.off = 0 // set right: within two anti-entropy intervals a asks k again
			for ms := int64(2200); ms <= 6000; ms += 200 {
				exchange(t, ms, a, k)
			}
			if got := a.e.Coordinator(a.now(6100), key); got != "k" {
				t.Errorf("with k's clock set right, a asks %q, want k", got)
			}
		})
	}
}

// TestSkewedPeersAskIsNotDecided: an ask carries the asker's slices,
// which deciding would merge; from a skewed asker it is answered
// undecided at once (the asker decides alone, with its budget).
func TestSkewedPeersAskIsNotDecided(t *testing.T) {
	for _, tc := range []struct {
		off     time.Duration
		decided bool
	}{
		{200 * time.Millisecond, true},
		{2 * time.Second, false},
	} {
		t.Run(fmt.Sprint(tc.off), func(t *testing.T) {
			var answers []Answer
			a, k := newCoordinatedSkewNode(t, "a", tc.off), newCoordinatedSkewNode(t, "k", 0)
			skewUp(t, 0, a, k)
			key := "x"
			for i := 0; a.e.Coordinator(a.now(0), key) != "k"; i++ {
				key = string(rune('a'+i%26)) + key
			}
			lims := []counter.Limit{a.lim}
			var ask counter.Ask
			a.c.PrepareAsk(a.now(10), key, 1, lims, &ask)
			var res [1]counter.Result
			asked, err := a.e.Ask(a.now(10), &ask, res[:])
			if err != nil || asked.Local {
				t.Fatal(asked, err)
			}
			msg := asked.Out.Msgs[0]
			rcv, err := k.e.Receive(k.now(11), msg)
			out := rcv.Out
			if err != nil || len(out) != 1 || out[0].Purpose != PurposeAnswer {
				t.Fatalf("coordinator's Receive: %+v %v", out, err)
			}
			if r, err := a.e.Receive(a.now(12), out[0].Msgs[0]); err != nil || !r.Answered {
				t.Fatalf("the asker's Receive: %+v %v", r, err)
			} else {
				answers = append(answers, r.Answer)
			}
			if len(answers) != 1 || answers[0].Decided != tc.decided {
				t.Fatalf("answers %+v, want decided %v", answers, tc.decided)
			}
			var r [1]counter.Result
			k.c.Allow(k.now(13), key, 10, []counter.Limit{k.lim}, r[:]) // 10 never fits: counts nothing
			if want := map[bool]int64{true: 1, false: 0}[tc.decided]; r[0].Count != want {
				t.Errorf("the coordinator counts %d, want %d", r[0].Count, want)
			}
			if got, want := k.e.Stats.SkewedMessages.Load() > 0, !tc.decided; got != want {
				t.Errorf("skewed messages %d", k.e.Stats.SkewedMessages.Load())
			}
		})
	}
}
