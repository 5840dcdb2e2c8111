package clustersim

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/limiter"
)

// TestWorkersChangeNothing: spreading an instant's ticks and deliveries
// over goroutines gives the decisions and the traffic of one goroutine,
// with latency, duplication, loss, reordering, a partition and the
// coordinator, and measures the time of each node's Engine when Timed
// (run with -race: the workers share the cluster's buffers).
func TestWorkersChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 21))
	var at []int64
	var nodes []int
	var keys []string
	for ms := int64(0); ms < 3000; ms += rng.Int64N(7) {
		at, nodes, keys = append(at, ms), append(nodes, rng.IntN(4)), append(keys, fmt.Sprintf("k%d", rng.IntN(3)))
	}
	for _, v := range []struct {
		name    string
		latency time.Duration
		coord   bool
		cut     bool
	}{
		{"no latency, budget", 0, false, false},
		{"latency, coordinated", 2 * time.Millisecond, true, false},
		{"partitioned, coordinated", 0, true, true},
	} {
		t.Run(v.name, func(t *testing.T) {
			type run struct {
				allowed []bool
				stats   Stats
			}
			runs := make([]run, 2)
			for k, workers := range []int{1, 4} {
				sc := smallSim()
				sc.Budget, sc.Uncoordinated = true, !v.coord
				sc.Latency, sc.Dup, sc.Loss, sc.Reorder, sc.NetSeed = v.latency, true, 0.1, 2*time.Millisecond, 3
				sc.Workers, sc.Timed = workers, workers > 1
				s, err := New(sc)
				if err != nil {
					t.Fatal(err)
				}
				var d limiter.Decision
				for i := range at {
					if v.cut && i == len(at)/3 {
						s.SetCut(func(from, to int) bool { return from/2 != to/2 })
					}
					if v.cut && i == 2*len(at)/3 {
						s.SetCut(nil)
					}
					if err := s.Check(at[i], keys[i], nodes[i], 1, &d); err != nil {
						t.Fatal(err)
					}
					runs[k].allowed = append(runs[k].allowed, d.Allowed)
				}
				if runs[k].stats, err = s.Finish(); err != nil {
					t.Fatal(err)
				}
				if sc.Timed {
					for i := range s.Len() {
						if tm := s.Node(i).Times(); tm.Tick.Wall+tm.Hot.Wall <= 0 || tm.Receive.Wall <= 0 {
							t.Errorf("node %d: Engine times %+v not measured", i, tm)
						}
					}
					// The asking side is timed whenever a check asked.
					var ask EngineTime
					for i := range s.Len() {
						ask = ask.add(s.Node(i).Times().Ask)
					}
					if asked := runs[k].stats.Asks + runs[k].stats.SelfCoordinated; (asked > 0) != (ask.Wall > 0) {
						t.Errorf("%d asks and self-coordinated checks, %d ns timed on the asking side", asked, ask.Wall)
					}
				}
			}
			for i := range runs[0].allowed {
				if runs[0].allowed[i] != runs[1].allowed[i] {
					t.Fatalf("request %d: allowed %t with one worker, %t with four", i, runs[0].allowed[i], runs[1].allowed[i])
				}
			}
			if runs[0].stats != runs[1].stats {
				t.Errorf("stats with one worker %+v, with four %+v", runs[0].stats, runs[1].stats)
			}
			if s := runs[0].stats; s.Sent[engine.PurposeDelta].Messages == 0 || s.Messages != sumSent(s) {
				t.Errorf("traffic by purpose %+v does not add up to %d messages", s.Sent, s.Messages)
			}
		})
	}
}

// sumSent is the messages of st.Sent over every purpose.
func sumSent(st Stats) int {
	n := 0
	for _, tr := range st.Sent {
		n += tr.Messages
	}
	return n
}

// TestCutLosesMessages: a partition loses what crosses it, and the copies
// are still counted as sent.
func TestCutLosesMessages(t *testing.T) {
	sc := smallSim()
	sc.EveryTick = true
	count := func(cut bool) (received uint64, st Stats) {
		s, err := New(sc)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(0); err != nil {
			t.Fatal(err)
		}
		if cut {
			s.SetCut(func(from, to int) bool { return to == 3 })
		}
		var d limiter.Decision
		for ms := int64(0); ms < 1000; ms += 10 {
			if err := s.Check(ms, "k", int(ms/10)%3, 1, &d); err != nil {
				t.Fatal(err)
			}
		}
		if st, err = s.Finish(); err != nil {
			t.Fatal(err)
		}
		return s.Node(3).Engine().Stats.MessagesReceived.Load(), st
	}
	open, openStats := count(false)
	cut, cutStats := count(true)
	if open == 0 || cut >= open {
		t.Errorf("node 3 received %d messages across a cut, %d without", cut, open)
	}
	if cutStats.Messages != openStats.Messages || cutStats.Bytes != openStats.Bytes {
		t.Errorf("sent %d messages (%d bytes) with the cut, %d (%d) without: lost copies are sent ones", cutStats.Messages, cutStats.Bytes, openStats.Messages, openStats.Bytes)
	}
}
