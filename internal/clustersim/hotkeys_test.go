package clustersim

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/limiter"
)

// hotKeysMinute runs the fault lab's load on s, started: for a minute, a
// check every 2 ms of one of 16 keys at a node drawn at random (seeded),
// about five times each key's limit of 50 per 10 s. It finishes s and
// returns the most any key admitted in a window and the run's stats.
func hotKeysMinute(t *testing.T, s *Cluster, seed uint64) (worst int, st Stats) {
	t.Helper()
	return hotKeysMinuteWith(t, s, seed, nil)
}

// hotKeysMinuteWith is hotKeysMinute with event, if not nil, called
// before each check with its instant (to stop and restart nodes); a check
// drawn for a stopped node goes to the next running one.
func hotKeysMinuteWith(t *testing.T, s *Cluster, seed uint64, event func(ms int64) error) (worst int, st Stats) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 3))
	admitted := map[string][]int64{}
	var d limiter.Decision
	catchUp := engine.DefaultTiming().CatchUpWait.Milliseconds() // the sim's nodes' (engine.DefaultConfig)
	unserved := 0
	for ms := int64(0); ms < 60_000; ms += 2 {
		if event != nil {
			if err := event(ms); err != nil {
				t.Fatal(err)
			}
		}
		key := fmt.Sprint("c", rng.IntN(16))
		node := rng.IntN(s.Len())
		// The next node that takes checks, as a load balancer that
		// follows /readyz sends them (Cluster.Ready). While none does,
		// which the loss can make so at the start (every node still
		// waits for a lost hello), the balancer answers the check itself
		// (503): it reaches no node. Once the catch-up wait is over
		// every running node takes checks.
		served := false
		for tries := 0; tries < s.Len(); tries++ {
			ready, err := s.Ready(ms, node)
			if err != nil {
				t.Fatal(err)
			}
			if ready {
				served = true
				break
			}
			node = (node + 1) % s.Len()
		}
		if !served {
			if ms >= catchUp {
				t.Fatalf("no node takes checks at %d ms, after the catch-up wait of %d ms", ms, catchUp)
			}
			unserved++
			continue
		}
		if err := s.Check(ms, key, node, 1, &d); err != nil {
			t.Fatal(err)
		}
		if d.Allowed {
			admitted[key] = append(admitted[key], ms)
		}
	}
	st, err := s.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if unserved > 0 {
		t.Logf("%d checks at the start reached no node: none was ready yet", unserved)
	}
	for _, at := range admitted {
		worst = max(worst, MaxInWindow(at, s.Config().Window.Milliseconds()))
	}
	return worst, st
}
