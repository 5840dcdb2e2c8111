package engine

import (
	"bytes"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// failoverCluster is a, k and r up to each other, and a key that a asks
// k about, whose runner-up (the winner without k) is r.
func failoverCluster(t *testing.T) (a, k, r *coordNode, key string) {
	t.Helper()
	a, k, r = newCoordNode(t, "a", 3), newCoordNode(t, "k", 3), newCoordNode(t, "r", 3)
	up(t, 0, a.testNode, k.testNode, r.testNode)
	for i := range 10_000 {
		key = "key-" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
		if CoordinatorOf(key, []string{"a", "k", "r"}) == "k" && CoordinatorOf(key, []string{"a", "r"}) == "r" {
			return a, k, r, key
		}
	}
	t.Fatal("no key coordinated by k with r for runner-up")
	return
}

// miss makes one ask of key from a and gives it up at ms, returning where it went.
func miss(t *testing.T, a *coordNode, ms int64, key string) Asked {
	t.Helper()
	asked, _ := a.ask(t, at(ms), key)
	if _, ok, err := a.e.AskExpired(at(ms+5), asked.ID); !ok || err != nil {
		t.Fatalf("AskExpired: %v %v", ok, err)
	}
	return asked
}

// TestFailoverAfterMisses: a coordinator that misses FailoverMisses asks in
// a row is passed over for the key's runner-up, and asked again as soon
// as any message of its arrives.
func TestFailoverAfterMisses(t *testing.T) {
	a, k, _, key := failoverCluster(t)
	ms := int64(100)
	heard := func() { // a message from k: a heartbeat
		t.Helper()
		hb, err := k.e.heartbeat(at(ms))
		if err != nil {
			t.Fatal(err)
		}
		deliver(t, a.testNode, at(ms), hb)
	}
	heard()
	other := a.keyFor(at(ms), "k") // another key of k's
	misses := a.e.cfg.FailoverMisses
	for i := range misses {
		if got := miss(t, a, ms, key); got.Out.To != "k" || got.RunnerUp {
			t.Fatalf("ask %d after %d misses went to %s (runner-up %v), want k", i+1, i, got.Out.To, got.RunnerUp)
		}
		ms += 10
	}
	asked, _ := a.ask(t, at(ms), key)
	if asked.Out.To != "r" || !asked.RunnerUp {
		t.Fatalf("after %d misses the ask went to %s (runner-up %v), want r", misses, asked.Out.To, asked.RunnerUp)
	}
	if got := a.e.FailedOver(at(ms)); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("FailedOver %v, want [k]", got)
	}
	if a.e.Stats.AsksToRunnerUp.Load() != 1 || a.e.Stats.AsksExpired.Load() != uint64(misses) || a.e.Peers()["k"].AsksExpired != uint64(misses) || a.e.Peers()["r"].AsksExpired != 0 {
		t.Fatalf("stats: %d to the runner-up, %d expired (%d of them k's, %d r's)", a.e.Stats.AsksToRunnerUp.Load(), a.e.Stats.AsksExpired.Load(), a.e.Peers()["k"].AsksExpired, a.e.Peers()["r"].AsksExpired)
	}
	// Other keys of k are passed over too: k is silent, not the key.
	if got := a.e.Coordinator(at(ms), other); got == "k" {
		t.Fatalf("%s still goes to the silent k", other)
	}
	// k speaks: asked again.
	ms += 10
	heard()
	if got := a.e.Coordinator(at(ms), key); got != "k" || len(a.e.FailedOver(at(ms))) != 0 {
		t.Fatalf("after hearing from k the key goes to %s, failed over %v", got, a.e.FailedOver(at(ms)))
	}
	// An answer, even a late one, is a message: it ends the misses too.
	for range misses - 1 {
		miss(t, a, ms, key)
	}
	asked, _ = a.ask(t, at(ms), key)
	rcv, err := k.receive(t, at(ms), asked.Out.Msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	a.e.AskExpired(at(ms+5), asked.ID) // the answer comes after the deadline
	if r, _ := a.receive(t, at(ms+6), rcv.Out[0].Msgs[0]); r.Answered {
		t.Fatal("an answer after AskExpired was returned as awaited")
	}
	if got := a.e.Coordinator(at(ms+6), key); got != "k" {
		t.Fatalf("after k's late answer the key goes to %s, want k", got)
	}
}

// TestFailoverAfterSilence: a coordinator that missed one ask and has sent
// nothing for FailoverSilence is passed over at once, so that a key whose
// checks at the margin are rare does not wait on it FailoverMisses times;
// a single miss of a coordinator heard from recently is not enough.
func TestFailoverAfterSilence(t *testing.T) {
	a, k, _, key := failoverCluster(t)
	silence := a.e.cfg.FailoverSilence.Milliseconds()
	hb, err := k.e.heartbeat(at(1000))
	if err != nil {
		t.Fatal(err)
	}
	deliver(t, a.testNode, at(1000), hb)
	miss(t, a, 1100, key)
	for _, tc := range []struct {
		ms   int64
		want string
	}{
		{1000 + silence - 1, "k"}, // one miss, heard from within FailoverSilence
		{1000 + silence, "r"},     // one miss and silent for FailoverSilence
	} {
		if got := a.e.Coordinator(at(tc.ms), key); got != tc.want {
			t.Errorf("at %d ms the key goes to %s, want %s", tc.ms, got, tc.want)
		}
	}
}

// TestFailoverToSelf: when the asker itself is the runner-up, nothing is
// sent and nothing decided: the caller decides alone with its budget.
func TestFailoverToSelf(t *testing.T) {
	a, k := newCoordNode(t, "a", 2), newCoordNode(t, "k", 2)
	up(t, 0, a.testNode, k.testNode)
	key := a.keyFor(at(0), "k")
	for range a.e.cfg.FailoverMisses {
		miss(t, a, 10, key)
	}
	ask := new(counter.Ask)
	a.c.PrepareAsk(at(20), key, 1, []counter.Limit{a.lim}, ask)
	var res [1]counter.Result
	asked, err := a.e.Ask(at(20), ask, res[:])
	if err != nil || !asked.Alone || asked.Local || len(asked.Out.Msgs) != 0 || a.e.Stats.AsksAlone.Load() != 1 {
		t.Fatalf("Ask: %+v %v, want it left to the budget", asked, err)
	}
}

// TestAskSettled: Settled is the highest id at or below which no ask is
// pending, so a coordinator never drops a grant the asker may still count.
func TestAskSettled(t *testing.T) {
	a, _, _, key := failoverCluster(t)
	first, _ := a.ask(t, at(10), key)
	second, ask := a.ask(t, at(11), key)
	if ask.Settled != first.ID-1 {
		t.Fatalf("with ask %d pending, Settled %d, want %d", first.ID, ask.Settled, first.ID-1)
	}
	a.e.AskExpired(at(12), first.ID)
	a.e.AskExpired(at(12), second.ID)
	third, ask := a.ask(t, at(13), key)
	if ask.Settled != third.ID-1 || a.e.Pending() != 1 {
		t.Fatalf("with none pending before it, Settled %d, want %d (%d pending)", ask.Settled, third.ID-1, a.e.Pending())
	}
}

func TestFailoverConfigValidate(t *testing.T) {
	for _, edit := range []func(*Config){
		func(c *Config) { c.FailoverMisses = 0 },
		func(c *Config) { c.FailoverSilence = 0 },
		func(c *Config) { c.FailoverSilence = -time.Second },
	} {
		c := DefaultConfig("a")
		edit(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: no error", c)
		}
	}
}

// TestFirstAskID: ask ids start above Config.FirstAskID, so that a process
// restarted under its name (the transport sets it from the start time)
// asks with ids its coordinators never saw, and none is dropped as a
// replay of its previous incarnation's.
func TestFirstAskID(t *testing.T) {
	const base = 1_800_000_000_000_000_000
	a := newCoordNodeWith(t, "a", 2, func(c *Config) { c.FirstAskID = base })
	k := newCoordNode(t, "k", 2)
	up(t, 0, a.testNode, k.testNode)
	asked, _ := a.ask(t, at(1), a.keyFor(at(1), "k"))
	if asked.ID != base+1 {
		t.Fatalf("first ask id %d, want %d", asked.ID, uint64(base)+1)
	}
	if r, err := k.receive(t, at(1), asked.Out.Msgs[0]); err != nil || len(r.Out) != 1 || r.Out[0].Purpose != PurposeAnswer {
		t.Fatalf("the coordinator did not answer the ask: %+v %v", r, err)
	}
}

// TestAskAgain: an ask sent again, the same message, is decided once. A
// repeat of an ask whose answer was lost gets the same answer again, not
// a second grant, and is taken; a repeat of an ask that never arrived is
// decided as the first; an ask answered or given up is not repeated; and
// a repeat older than the answers kept is dropped as a replay.
func TestAskAgain(t *testing.T) {
	a, k, _, key := failoverCluster(t)
	count := func() int64 {
		t.Helper()
		var r [1]counter.Result
		k.c.Allow(at(12), key, 10, []counter.Limit{k.lim}, r[:]) // 10 of 10 never fits beside a grant: counts nothing
		return r[0].Count
	}
	// The answer is lost: the repeat gets it again.
	first, _ := a.ask(t, at(10), key)
	rcv, err := k.receive(t, at(10), first.Out.Msgs[0])
	if err != nil || len(rcv.Out) != 1 || !a.e.AskAgain(first.ID) {
		t.Fatalf("first ask: %+v %v", rcv, err)
	}
	again, err := k.receive(t, at(11), first.Out.Msgs[0])
	if err != nil || len(again.Out) != 1 || !bytes.Equal(again.Out[0].Msgs[0], rcv.Out[0].Msgs[0]) || again.Out[0].To != "a" {
		t.Fatalf("the repeat: %+v %v, want the first answer again", again, err)
	}
	if n := count(); n != 1 {
		t.Fatalf("the coordinator counts %d after an ask and its repeat, want 1 grant", n)
	}
	if r, _ := a.receive(t, at(11), again.Out[0].Msgs[0]); !r.Answered || r.Answer.ID != first.ID || !r.Answer.Allowed {
		t.Fatalf("the repeated answer: %+v", r)
	}
	if r, _ := a.receive(t, at(11), rcv.Out[0].Msgs[0]); r.Answered {
		t.Fatal("the first answer, late, was taken after the repeat's")
	}
	if a.e.AskAgain(first.ID) {
		t.Fatal("an answered ask was asked again")
	}
	// The ask is lost: the repeat is decided as the first.
	second, _ := a.ask(t, at(12), key)
	if !a.e.AskAgain(second.ID) {
		t.Fatal("a pending ask was not asked again")
	}
	rcv, err = k.receive(t, at(13), second.Out.Msgs[0])
	if err != nil || len(rcv.Out) != 1 {
		t.Fatalf("the repeat of a lost ask: %+v %v", rcv, err)
	}
	if r, _ := a.receive(t, at(13), rcv.Out[0].Msgs[0]); !r.Answered || r.Answer.ID != second.ID {
		t.Fatalf("the answer to a repeat of a lost ask: %+v", r)
	}
	st, kst := &a.e.Stats, &k.e.Stats
	if st.AsksRetried.Load() != 2 || st.AsksToCoordinator.Load() != 2 || st.AsksExpired.Load() != 0 || kst.AsksAnswered.Load() != 2 || kst.AnswersRepeated.Load() != 1 || kst.Replays.Load() != 0 {
		t.Fatalf("stats: %d retried, %d first, %d expired; the coordinator answered %d, %d again, %d replays", st.AsksRetried.Load(), st.AsksToCoordinator.Load(), st.AsksExpired.Load(), kst.AsksAnswered.Load(), kst.AnswersRepeated.Load(), kst.Replays.Load())
	}
	// Past answersKept more answers, the first's is forgotten: a repeat
	// of it is a replay, never decided again.
	for i := range answersKept {
		asked, _ := a.ask(t, at(20+int64(i)), key)
		if _, err := k.receive(t, at(20+int64(i)), asked.Out.Msgs[0]); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := k.receive(t, at(100), first.Out.Msgs[0]); !errors.Is(err, ErrReplay) || len(r.Out) != 0 {
		t.Fatalf("a repeat past the answers kept: %+v %v, want a replay", r, err)
	}
}
