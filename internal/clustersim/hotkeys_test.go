package clustersim

import (
	"fmt"
	"math/rand/v2"
	"testing"

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
	for ms := int64(0); ms < 60_000; ms += 2 {
		if event != nil {
			if err := event(ms); err != nil {
				t.Fatal(err)
			}
		}
		key := fmt.Sprint("c", rng.IntN(16))
		node := rng.IntN(s.Len())
		// The next node that takes checks, as a load balancer that
		// follows /readyz sends them (Cluster.Ready).
		for tries := 0; ; tries++ {
			ready, err := s.Ready(ms, node)
			if err != nil {
				t.Fatal(err)
			}
			if ready {
				break
			}
			if tries == s.Len() {
				t.Fatalf("no node takes checks at %d ms", ms)
			}
			node = (node + 1) % s.Len()
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
	for _, at := range admitted {
		worst = max(worst, MaxInWindow(at, s.Config().Window.Milliseconds()))
	}
	return worst, st
}
