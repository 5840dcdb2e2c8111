package faults

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/nodetest"
)

// TestFaultCoordinatorStopped is scenario 7 of docs/faults.md: the
// coordinator of a hot key is stopped (SIGSTOP: nothing tells the others,
// no socket closes, memberlist learns it only by its probes) mid-burst for
// 5 s, then continued. Each other node gives up at most a few asks to it
// (engine.Config.FailoverMisses in a row, more only for asks already in
// flight together) and then asks the key's runner-up, long before
// memberlist declares the node dead. While the stopped node speaks again
// and some nodes ask it while others still ask the runner-up, two
// coordinators grant: the window stays within the bound package counter
// states for that, a limit and a lease pool more than the budget's.
func TestFaultCoordinatorStopped(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	coordinatorStopped(t)
}

// TestFaultCoordinatorStoppedRouted is TestFaultCoordinatorStopped with
// every key synced to its coordinator alone (-sync-routing always): the
// runner-up, which takes the stopped node's keys over, holds no count of
// them but what the nodes send it once they fail the coordinator over.
func TestFaultCoordinatorStoppedRouted(t *testing.T) {
	t.Parallel()
	coordinatorStopped(t, "-sync-routing", "always")
}

// coordinatorStopped is TestFaultCoordinatorStopped with args added to
// every node's flags.
func coordinatorStopped(t *testing.T, args ...string) {
	c := startLab(t, 8, args...)
	twoCoordinators := labTwoCoordinatorsBound(t, 8)
	key := "abuse-hot"
	k := engine.CoordinatorOf(key, nodetest.Names(c.Procs))
	var coord *nodetest.Proc
	others := c.Procs[:0:0]
	for _, p := range c.Procs {
		if p.Name == k {
			coord = p
		} else {
			others = append(others, p)
		}
	}
	cs := []loadClient{{key: key, every: labWindow / (labLimit * 10)}}
	cs = append(cs, clients(4, 0)...)
	run := drive(t, c, 30*time.Second, cs)
	run.up[coord.Index].Store(false) // the load goes through the others
	time.Sleep(10 * time.Second)
	// Asks given up on the stopped node only: under a loaded machine an
	// answer from a live node can be late too.
	expired := func(p *nodetest.Proc) float64 {
		return p.Metric(t, "limiterd_coordinator_asks_expired_total", "peer", coord.Name)
	}
	runnerUp := func() float64 {
		return sumMetric(t, others, "limiterd_coordinator_asks_total", "to", "runner_up")
	}
	if g := sumMetric(t, others, "limiterd_coordinated_checks_total", "result", "granted"); g == 0 {
		t.Fatal("no check went to the coordinator before the stop")
	}
	e0 := make([]float64, len(others))
	for i, p := range others {
		e0[i] = expired(p)
	}
	r0 := runnerUp()
	if err := coord.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	// Watch the others give asks up, and start asking the runner-up.
	var lastExpiry, firstRunnerUp time.Duration
	last := make([]float64, len(others))
	copy(last, e0)
	for time.Since(stopped) < 5*time.Second {
		time.Sleep(20 * time.Millisecond)
		for i, p := range others {
			if v := expired(p); v > last[i] {
				last[i], lastExpiry = v, time.Since(stopped)
			}
		}
		if firstRunnerUp == 0 && runnerUp() > r0 {
			firstRunnerUp = time.Since(stopped)
		}
	}
	if err := coord.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	run.wait()
	v := run.judge(cs, stopped, time.Time{}, nil)
	gaveUp := 0.0
	for i := range others {
		gaveUp += last[i] - e0[i]
	}
	misses := engine.DefaultConfig("x").FailoverMisses
	t.Logf("coordinator %s stopped for 5 s: %v", k, v)
	nodetest.Figures(t, "7 a hot key's coordinator stopped (SIGSTOP) for 5 s, then continued"+scenarioNote(args),
		"5xx", v.fiveXX, "unanswered", v.noAnswer, "compliant denied", v.compliantDenied,
		"false rejections (oracle)", v.falseRejections, "worst ratio", v.worst, "bound with two coordinators", fmt.Sprintf("%.2f", twoCoordinators),
		"asks given up on the stopped node", gaveUp, "last given up after", lastExpiry.Round(10*time.Millisecond),
		"first ask to the runner-up after", firstRunnerUp.Round(10*time.Millisecond))
	v.holdsPromise(t, "")
	if firstRunnerUp == 0 {
		t.Error("no ask went to the runner-up while the coordinator was stopped")
	}
	// Each node gives up FailoverMisses asks in a row, and the ones in
	// flight beside them: at most one per client at once.
	for i, p := range others {
		if n, most := last[i]-e0[i], float64(misses+len(cs)-1); n > most {
			t.Errorf("%s gave up %v asks on the stopped coordinator, more than %v", p.Name, n, most)
		}
	}
	if v.worst > twoCoordinators {
		t.Errorf("worst window %.2f x the limit, above the bound with two coordinators %.2f", v.worst, twoCoordinators)
	}
}
