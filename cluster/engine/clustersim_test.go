package engine_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/limiter"
)

// The engines' black-box tests on the simulated network of package
// internal/clustersim: engines joined by a network the test controls
// (partitions: SetCut), on one simulated clock, every engine ticking at
// every 200 ms (EveryTick), every message delivered at once.

// simNet is a cluster of n engines over counters with a limit of limit
// per minute in 12 slices, every check decided locally and no budget: the
// tests count exactly what they hit. edit, if set, changes the engines'
// configuration. The engines see each other up at 0 ms, hellos and
// replies delivered.
func simNet(t *testing.T, n int, limit int64, edit func(*engine.Config)) *clustersim.Cluster {
	t.Helper()
	cfg := clustersim.DefaultConfig()
	cfg.Nodes, cfg.Limit, cfg.Window, cfg.Slices = n, limit, time.Minute, 12
	cfg.Uncoordinated, cfg.Budget, cfg.EveryTick, cfg.EditEngine = true, false, true, edit
	cl, err := clustersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(0); err != nil {
		t.Fatal(err)
	}
	if err := cl.Advance(-1); err != nil { // the hellos, just before 0 ms
		t.Fatal(err)
	}
	return cl
}

// hit counts k requests of key at ms on node i's counter; all must be
// allowed.
func hit(t *testing.T, cl *clustersim.Cluster, i int, ms int64, key string, k int) {
	t.Helper()
	n := cl.Node(i)
	var res [1]counter.Result
	for range k {
		d, err := n.Counter().Allow(cl.Clock(i, ms), key, 1, []counter.Limit{n.Limit()}, res[:])
		if err != nil || !d.Allowed {
			t.Fatalf("%s: request of %q at %d ms not allowed: %+v %v", n.Name(), key, ms, d, err)
		}
	}
}

// count reads key's count at ms on node i through the counter's public
// API, counting nothing: a request of more hits than the limit has room
// for is denied, and a denied request reports the count.
func count(t *testing.T, cl *clustersim.Cluster, i int, ms int64, key string) int64 {
	t.Helper()
	n := cl.Node(i)
	var res [1]counter.Result
	if _, err := n.Counter().Allow(cl.Clock(i, ms), key, n.Limit().Max(), []counter.Limit{n.Limit()}, res[:]); err != nil {
		t.Fatal(err)
	}
	return res[0].Count
}

// step runs the ticks at ms and delivers everything, replies included,
// unless a cut drops it.
func step(t *testing.T, cl *clustersim.Cluster, ms int64) {
	t.Helper()
	if err := cl.Advance(ms); err != nil {
		t.Fatal(err)
	}
}

// catchUps is how many catch-up messages the engines have sent.
func catchUps(cl *clustersim.Cluster) int {
	return cl.Stats().Sent[engine.PurposeCatchUp].Messages
}

// A partition that no membership noticed (nobody declared dead) loses what
// each side counted meanwhile, for keys under the anti-entropy threshold
// (half the limit), on the other side: deltas are sent once. When the
// heal brings the first message from a peer silent for longer than the
// threshold, the receiver sends it a catch-up, and every node converges to
// the truth within a few sync intervals, never above it.
func TestCatchUpAfterSilence(t *testing.T) {
	for _, tc := range []struct {
		name        string
		left, right int64 // requests counted on nodes 0 and 2 during the partition
		before      int64 // on node 1 before it
	}{
		{"both sides, 60 % in all", 30, 30, 0},
		{"one side, 60 % in all", 40, 0, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const limit = 100
			cl := simNet(t, 4, limit, nil)
			truth := func() int64 { return tc.before + tc.left + tc.right }
			check := func(ms int64, want func(i int) int64) {
				t.Helper()
				for i := range cl.Len() {
					got := count(t, cl, i, ms, "k")
					if got > truth() {
						t.Fatalf("%d ms: %s counts %d, above the truth %d", ms, cl.Node(i).Name(), got, truth())
					}
					if w := want(i); w >= 0 && got != w {
						t.Fatalf("%d ms: %s counts %d, want %d", ms, cl.Node(i).Name(), got, w)
					}
				}
			}
			ms := int64(0)
			if tc.before > 0 {
				hit(t, cl, 1, 100, "k", int(tc.before))
			}
			for ; ms <= 2000; ms += 200 {
				step(t, cl, ms)
			}
			// The partition: {0, 1} | {2, 3}, 12 s, no PeerDown.
			cut := func(from, to int) bool { return from/2 != to/2 }
			cl.SetCut(cut)
			hit(t, cl, 0, ms+50, "k", int(tc.left))
			hit(t, cl, 2, ms+50, "k", int(tc.right))
			for end := ms + 12_000; ms < end; ms += 200 {
				step(t, cl, ms)
			}
			check(ms, func(i int) int64 {
				if i < 2 {
					return tc.before + tc.left
				}
				return tc.before + tc.right
			})
			before := catchUps(cl)
			// Healed. Idle nodes send nothing but heartbeats, one per
			// anti-entropy interval (5 ticks): within it every node hears
			// from every peer, and the catch-ups arrive at once.
			cl.SetCut(nil)
			for end := ms + 1000 + 200; ms <= end; ms += 200 {
				step(t, cl, ms)
			}
			check(ms, func(int) int64 { return truth() })
			if catchUps(cl) == before {
				t.Fatal("converged without a catch-up: the test does not exercise it")
			}
			// A second cut, longer than the silence threshold but healed
			// within RejoinInterval of the catch-ups (a flap): no new one.
			before = catchUps(cl)
			cl.SetCut(cut)
			for end := ms + 5000; ms < end; ms += 200 {
				step(t, cl, ms)
			}
			cl.SetCut(nil)
			for end := ms + 1200; ms < end; ms += 200 {
				step(t, cl, ms)
			}
			if got := catchUps(cl); got != before {
				t.Errorf("a flap within RejoinInterval sent %d more catch-up messages", got-before)
			}
			check(ms, func(int) int64 { return truth() })
		})
	}
}

// Without the catch-up the same partition leaves the halves apart: what
// TestCatchUpAfterSilence heals.
func TestSilenceWithoutCatchUpLeavesCountsApart(t *testing.T) {
	// A threshold longer than the partition: never silent.
	cl := simNet(t, 2, 100, func(c *engine.Config) { c.SilenceThreshold = time.Hour })
	cl.SetCut(func(from, to int) bool { return from != to })
	hit(t, cl, 0, 50, "k", 40)
	ms := int64(0)
	for ; ms < 12_000; ms += 200 {
		step(t, cl, ms)
	}
	cl.SetCut(nil)
	for end := ms + 5000; ms < end; ms += 200 {
		step(t, cl, ms)
	}
	if got := count(t, cl, 1, ms, "k"); got != 0 {
		t.Fatalf("node-1 counts %d; the scenario no longer needs the catch-up", got)
	}
}

// routedSim starts a simulated cluster of n nodes, every limit routed and
// every node ticking each interval, and returns it, its configuration
// and its nodes' names.
func routedSim(t *testing.T, n int) (*clustersim.Cluster, clustersim.Config, []string) {
	t.Helper()
	cfg := clustersim.DefaultConfig()
	cfg.Nodes, cfg.Routing, cfg.EveryTick = n, counter.RouteAlways, true
	cl, err := clustersim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.Start(0); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = cl.Node(i).Name()
	}
	return cl, cfg, names
}

// TestSilentCoordinatorFailedOverEverywhere: one node's misses fail a
// silent coordinator over on every node at the tick after them (the
// silence notice), so a node that never asked it before asks the
// runner-up at once. The key is routed: the runner-up passes the ask on
// to the coordinator while it was heard within FailoverSilence (a
// notice may come of asks lost under loss, and only the coordinator
// holds the counts), and decides it itself after that much silence.
func TestSilentCoordinatorFailedOverEverywhere(t *testing.T) {
	const n = 12
	cl, cfg, names := routedSim(t, n)
	key := "k"
	for i := 0; engine.CoordinatorOf(key, names) != names[0]; i++ {
		key = "k" + string(rune('a'+i%26)) + key
	}
	step(t, cl, 1000)
	cl.SetCut(func(from, to int) bool { return from == 0 || to == 0 })
	var d limiter.Decision
	ms := int64(1001)
	for i := range engine.DefaultConfig("x").FailoverMisses {
		if err := cl.Check(ms, key, 1, 1, &d); err != nil {
			t.Fatal(err)
		}
		if d.Decided != limiter.DecidedInFallback {
			t.Fatalf("check %d of node 0's key at node 1 with node 0 cut off: decided %v, want in fallback", i+1, d.Decided)
		}
		ms += 20
	}
	// Node 1 tells the others at its next tick; nobody else asked node 0.
	step(t, cl, ms+cfg.Sync.Milliseconds())
	for i := 2; i < n; i++ {
		e := cl.Node(i).Engine()
		if got := e.FailedOver(cl.Clock(i, ms)); !slices.Equal(got, []string{names[0]}) || e.Stats.FailoversTold.Load() != 1 || e.Stats.AsksExpired.Load() != 0 {
			t.Fatalf("%s fails over %v (%d told, %d of its own asks expired), want %s on node 1's notice alone",
				names[i], got, e.Stats.FailoversTold.Load(), e.Stats.AsksExpired.Load(), names[0])
		}
	}
	runnerUp := cl.Node(slices.Index(names, engine.CoordinatorOf(key, names[1:])))
	silence := engine.DefaultConfig("x").FailoverSilence.Milliseconds()
	var relayed uint64
	for _, c := range []struct {
		ms      int64
		decided limiter.Decider
		relays  bool
	}{
		{ms + cfg.Sync.Milliseconds() + 1, limiter.DecidedInFallback, true}, // node 0 silent for less than FailoverSilence
		{1000 + silence + cfg.Sync.Milliseconds(), limiter.DecidedByCoordinator, false},
	} {
		if err := cl.Check(c.ms, key, 5, 1, &d); err != nil {
			t.Fatal(err)
		}
		n := runnerUp.Engine().Stats.AsksRelayed.Load()
		if d.Decided != c.decided || !d.Allowed || (n > relayed) != c.relays {
			t.Fatalf("node 5's check of the key at %d ms: decided %v (allowed %v), passed on by the runner-up %v; want decided %v, passed on %v",
				c.ms, d.Decided, d.Allowed, n > relayed, c.decided, c.relays)
		}
		relayed = n
	}
}

// TestRunnerUpAsksAroundAOneWayCut: the key's runner-up hears nothing
// from the coordinator, which hears it, and the others hear both (a cut
// one way). Once it fails the coordinator over, its checks of the key go
// around through the next node and are decided by the coordinator, on the
// whole count, instead of by its budget alone; the coordinator stays
// failed over at the runner-up.
func TestRunnerUpAsksAroundAOneWayCut(t *testing.T) {
	const n = 6
	cl, _, names := routedSim(t, n)
	// A key node 0 coordinates, node 1 its runner-up.
	key := "k"
	for i := 0; engine.CoordinatorOf(key, names) != names[0] || engine.CoordinatorOf(key, names[1:]) != names[1]; i++ {
		key = "k" + string(rune('a'+i%26)) + key
	}
	step(t, cl, 1000)
	cl.SetCut(func(from, to int) bool { return from == 0 && to == 1 })
	var d limiter.Decision
	ms := int64(1001)
	decided := map[limiter.Decider]int{}
	for i := range 40 {
		// Node 0 has checks of its own, so that it sends every tick, as a
		// node under load does (a quiet one is heard once a second).
		if err := cl.Check(ms, fmt.Sprint("other-", i), 0, 1, &d); err != nil {
			t.Fatal(err)
		}
		if err := cl.Check(ms, key, 1, 1, &d); err != nil {
			t.Fatal(err)
		}
		decided[d.Decided]++
		ms += 20
		step(t, cl, ms)
	}
	e := cl.Node(1).Engine()
	if !slices.Contains(e.FailedOver(cl.Clock(1, ms)), names[0]) || e.Stats.AsksAround.Load() == 0 || e.Stats.AsksAlone.Load() != 0 {
		t.Fatalf("node 1: failed over %v, %d asks around, %d decided alone; want node 0 failed over and asked around", e.FailedOver(cl.Clock(1, ms)), e.Stats.AsksAround.Load(), e.Stats.AsksAlone.Load())
	}
	if decided[limiter.DecidedInFallback] > engine.DefaultConfig("x").FailoverMisses {
		t.Fatalf("node 1's checks: %v; want all but the misses before the failover decided by the coordinator", decided)
	}
}
