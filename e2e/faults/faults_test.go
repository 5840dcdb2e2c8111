package faults

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// TestFaultPartition is scenario 1 of docs/faults.md: 8 nodes cut into 5 + 3
// for 30 s under load, then healed. During the cut each side counts alone,
// so a key's window may hold up to sides x the limit (each side keeps its
// own 1.1 x); no check fails and no compliant client is denied. After it
// the halves find each other again, and every node's count of a key is the
// sum of what the two sides admitted: nothing lost, nothing twice.
func TestFaultPartition(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	partition(t, false)
}

// TestFaultPartitionRouted is TestFaultPartition with every key synced to
// its coordinator alone (-sync-routing always), the probe key's too: each
// side's nodes send their changes to the side's coordinator of the key,
// and after the heal to the key's coordinator, which then counts the
// probe checks of both sides, nothing twice. Only it knows the key's total
// (a routed key's other nodes keep their own counts): the test reads the
// most any node counts.
func TestFaultPartitionRouted(t *testing.T) {
	t.Parallel()
	partition(t, true, "-sync-routing", "always")
}

// partition is TestFaultPartition with args added to every node's flags;
// routed: the probe key converges on its coordinator alone.
func partition(t *testing.T, routed bool, args ...string) {
	c := startLab(t, 8, args...)
	a, b := []int{0, 1, 2, 3, 4}, []int{5, 6, 7}
	cs := clients(8, 4)
	run := drive(t, c, 80*time.Second, cs)
	time.Sleep(10 * time.Second)

	convCount(t, c.Procs[0], "p", 10)
	cutAt := time.Now()
	if err := c.Lab.Partition(a, b); err != nil {
		t.Fatal(err)
	}
	// Counted on each side while cut: 30 on A, 20 on B.
	for i := range 30 {
		convCount(t, c.Procs[a[i%len(a)]], "p", 1)
	}
	for i := range 20 {
		convCount(t, c.Procs[b[i%len(b)]], "p", 1)
	}
	time.Sleep(30*time.Second - time.Since(cutAt))
	if err := c.Lab.Heal(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	// The halves see each other: every node all 8 members alive.
	rejoin := c.WaitAlive(c.Procs, 8, 60*time.Second)
	// Every node (routed: the key's coordinator) counts 10 + 30 + 20
	// checks of the probe key.
	counts := func() (least, most int64) {
		least = math.MaxInt64
		for _, p := range c.Procs {
			n := convSeen(t, p, "p")
			least, most = min(least, n), max(most, n)
		}
		return least, most
	}
	converges := func() bool {
		least, most := counts()
		return most == 60 && (routed || least == 60)
	}
	var converged time.Duration
	nodetest.Eventually(t, "every node (routed: the key's coordinator) counts the 60 probe checks of both sides", 60*time.Second, func() bool {
		if converges() {
			converged = time.Since(healed)
			return true
		}
		return false
	})
	// And none counts more: nothing twice (a second look, after more syncs).
	time.Sleep(2 * time.Second)
	if least, most := counts(); !converges() {
		t.Errorf("after the heal nodes count %d to %d probe checks, want 60 (routed: at most 60, and 60 on the coordinator)", least, most)
	}
	run.wait()
	during := run.judge(cs, cutAt, healed, nil)
	all := run.judge(cs, time.Time{}, time.Time{}, nil)
	// Once every node counts both sides, and a window later: 1.1 x again.
	after := run.judge(cs, healed.Add(converged+labWindow), time.Time{}, nil)
	t.Logf("during the cut: %v", during)
	t.Logf("from a window after the counts converged: %v", after)
	t.Logf("whole run: %v", all)
	nodetest.Figures(t, "1 partition 5+3 for 30 s"+scenarioNote(args),
		"5xx", all.fiveXX, "unanswered", all.noAnswer, "compliant denied", all.compliantDenied,
		"false rejections (oracle)", all.falseRejections, "worst ratio during", during.worst,
		"worst ratio from a window after convergence", after.worst, "max latency during", during.max.Round(time.Millisecond),
		"all 8 alive after heal", rejoin.Round(100*time.Millisecond), "counts converged after heal", converged.Round(100*time.Millisecond))

	all.holdsPromise(t, "")
	// Two sides each count alone: at most 2 x (1.1 x the limit).
	if during.worst > 2*1.1 {
		t.Errorf("worst window during the cut %.2f x the limit, above 2 sides x 1.1", during.worst)
	}
	if after.worst > 1.1 {
		t.Errorf("worst window a window after the counts converged %.2f x the limit, above 1.1", after.worst)
	}
	// A check never waits on the network: past the coordinator's 5 ms
	// deadline it is decided here. A check stuck on the cut network would
	// take seconds (TCP's retransmissions, the client's 5 s timeout); 3 s
	// is far from both, even on a loaded two-core machine.
	if during.max > 3*time.Second {
		t.Errorf("a check during the cut took %v: it waited on the network", during.max)
	}
}

// TestFaultLoss is scenario 2: node 2 hears nothing from node 1 (node 1
// still hears node 2), and 20 % of the packets between any two nodes are
// lost, for 60 s under load. No compliant client is denied, a key's
// window stays within the bound the nodes derive, and the metrics show the
// loss: checks decided by the budget when no answer came in time, and
// node 2's lag behind node 1.
func TestFaultLoss(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	loss(t)
}

// TestFaultLossRouted is TestFaultLoss with every key synced to its
// coordinator alone (-sync-routing always): a node's asks lost on the way
// are passed on by the node they reach while it hears the coordinator, and
// its budget judges a check against the others' count the coordinator's
// last answer told (docs/faults.md, "On routed sync").
func TestFaultLossRouted(t *testing.T) {
	t.Parallel()
	loss(t, "-sync-routing", "always")
}

// loss is TestFaultLoss with args added to every node's flags.
func loss(t *testing.T, args ...string) {
	c := startLab(t, 8, args...)
	bound := labBound(t, 8, true)
	cs := clients(8, 4)
	run := drive(t, c, 70*time.Second, cs)
	time.Sleep(5 * time.Second)
	fb0 := sumMetric(t, c.Procs, "limiterd_coordinated_checks_total", "result", "fallback*")
	ru0 := sumMetric(t, c.Procs, "limiterd_coordinator_asks_total", "to", "runner_up")
	told0 := sumMetric(t, c.Procs, "limiterd_coordinator_silence_notices_total", "notice", "told")
	faultAt := time.Now()
	if err := c.Lab.DropOneWay(1, 2); err != nil {
		t.Fatal(err)
	}
	if err := c.Lab.Loss(20); err != nil {
		t.Fatal(err)
	}
	var maxLag float64
	for time.Since(faultAt) < 60*time.Second {
		time.Sleep(time.Second)
		maxLag = max(maxLag, c.Procs[2].Metric(t, "limiterd_sync_merge_lag_seconds", "peer", "node-1"))
	}
	fallbacks := sumMetric(t, c.Procs, "limiterd_coordinated_checks_total", "result", "fallback*") - fb0
	runnerUp := sumMetric(t, c.Procs, "limiterd_coordinator_asks_total", "to", "runner_up") - ru0
	told := sumMetric(t, c.Procs, "limiterd_coordinator_silence_notices_total", "notice", "told") - told0
	var drops int64
	for i := range 8 {
		n, err := c.Lab.Drops(i)
		if err != nil {
			t.Fatal(err)
		}
		drops += n
	}
	healed := time.Now()
	if err := c.Lab.Heal(); err != nil {
		t.Fatal(err)
	}
	run.wait()
	during := run.judge(cs, faultAt, healed, nil)
	t.Logf("during the loss: %v", during)
	// A node whose asks go unanswered fails the coordinator over to the
	// key's runner-up and tells the others; until they all agree, two
	// nodes grant the key. The runner-up of abuse-1, coordinated by node
	// 1, is node 2, which hears nothing from node 1: it then grants on a
	// count without node 1's admissions, for the whole minute. So with
	// any failover the bound is that of two coordinators (docs/faults.md).
	if runnerUp > 0 || told > 0 {
		bound = labTwoCoordinatorsBound(t, 8)
	}
	nodetest.Figures(t, "2 one-way loss 1->2 and 20 % random loss for 60 s"+scenarioNote(args),
		"5xx", during.fiveXX, "unanswered", during.noAnswer, "compliant denied", during.compliantDenied,
		"false rejections (oracle)", during.falseRejections, "worst ratio", during.worst, "derived bound", fmt.Sprintf("%.2f", bound),
		"packets dropped", drops, "checks decided by the budget", fallbacks, "node-2's largest merge lag of node-1 (s)", maxLag,
		"asks to a runner-up", runnerUp, "coordinators failed over on a peer's notice", told)

	during.holdsPromise(t, "")
	if during.worst > bound {
		t.Errorf("worst window %.2f x the limit, above the derived bound %.2f", during.worst, bound)
	}
	if drops == 0 || fallbacks == 0 {
		t.Errorf("the loss does not show: %d packets dropped, %v checks fell back", drops, fallbacks)
	}
}

// TestFaultRestarts is scenario 3: a node restarted every 10 s for 2
// minutes under load, SIGKILL and SIGTERM in turn. The other nodes answer
// every check, a restarted node learns the counts back before it takes
// checks, and a key's window stays within the derived bound: a killed
// node coordinates an eighth of the keys, which the others fail over to
// each key's runner-up and which it coordinates again once back, on the
// counts it has learnt back so far, so the bound is that of two
// coordinators (2.42 for this short rule; see restarts).
func TestFaultRestarts(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	restarts(t, false)
}

// TestFaultRestartsRouted is TestFaultRestarts with every key synced to
// its coordinator alone (-sync-routing always), the probe key's too, whose
// coordinator is one of the restarted nodes: only it knows the key's
// total, so a restarted node takes checks again once the most any node
// counts is every probe check, and, if it is the probe key's coordinator,
// once it counts them all itself, learnt back from the node that holds
// them: nothing lost, and never more than were made (nothing twice).
func TestFaultRestartsRouted(t *testing.T) {
	t.Parallel()
	restarts(t, true, "-sync-routing", "always")
}

// restarts is TestFaultRestarts with args added to every node's flags;
// routed: the probe key's counts are its coordinator's alone.
func restarts(t *testing.T, routed bool, args ...string) {
	c := startLab(t, 8, args...)
	// A restarted node takes checks once /readyz says it has heard from
	// every live peer (-catch-up-wait): they have seen it back, sent it
	// their counts and can answer its asks. Before that gate (2026-12-05)
	// it could decide on counts lacking its peers', its asks unanswered
	// and falling back to a budget that trusted them, the likely cause of
	// the 1.84 and 1.66 measured here (the simulator shows the mechanism:
	// clustersim's TestRestartsKeepTheBound, seen back after 3 s). Every
	// key should then keep the budget's bound, which covers the checks
	// decided while a killed coordinator is failed over. Routed, a key's
	// count is its coordinator's alone: the restarted coordinator grants
	// on the counts moved to it so far while nodes that have not yet seen
	// it back still ask the runner-up, two coordinators (package counter,
	// "Two coordinators at once"), whose bound is asserted there.
	bound, boundName := labBound(t, 8, true), "budget's bound"
	if routed {
		bound, boundName = labTwoCoordinatorsBound(t, 8), "bound with two coordinators"
	}
	// The probe key, and its coordinator on the whole cluster: routed, one
	// of the restarted nodes.
	key, names := "r", nodetest.Names(c.Procs)
	for i := 0; routed && engine.CoordinatorOf(envoyrules.CountKey("conv", []envoyrules.Entry{{Key: "probe", Value: key}}), names) == names[0]; i++ {
		key = fmt.Sprint("r", i)
	}
	coord := engine.CoordinatorOf(envoyrules.CountKey("conv", []envoyrules.Entry{{Key: "probe", Value: key}}), names)
	coordRestarts := 0
	cs := clients(8, 4)
	// Twelve restarts, SIGKILL and SIGTERM in turn over nodes 1 to 7;
	// routed, seven (each node once: the probe key's coordinator among
	// them), which keeps make test's time in bounds.
	rounds := 12
	if routed {
		rounds = 7
	}
	run := drive(t, c, time.Duration(rounds)*10*time.Second+20*time.Second, cs)
	type down struct {
		node     int
		signal   string
		from, to time.Time
		learnt   time.Duration
		// What the restarted node dropped as from a non-member, and how
		// many full states its peers deferred, while it came back: the
		// evidence for a restart whose window passes the budget's bound.
		notMember, deferred float64
	}
	var downs []down
	var learnt, ready time.Duration // the longest from the start to /readyz, then to the probe counts
	probes := 0
	for i := range rounds {
		time.Sleep(10 * time.Second)
		p := c.Procs[1+i%7]
		// Counted elsewhere, so the restarted node must learn it back.
		convCount(t, c.Procs[0], key, 5)
		probes += 5
		run.up[p.Index].Store(false)
		d := down{node: p.Index, from: time.Now(), signal: "SIGTERM"}
		deferred0 := sumMetric(t, c.Procs, "limiterd_sync_deferred_states_total") - p.Metric(t, "limiterd_sync_deferred_states_total")
		if i%2 == 0 {
			d.signal = "SIGKILL"
			c.Kill(p)
		} else {
			c.Terminate(p)
		}
		c.Start(p)
		// It takes checks once it counts what the others counted.
		restarted := time.Now() // Start returns once /readyz answers 200
		ready = max(ready, restarted.Sub(d.from))
		if p.Name == coord {
			coordRestarts++
		}
		nodetest.Eventually(t, p.Name+" learns the probe counts back", 30*time.Second, func() bool {
			if !routed {
				return convSeen(t, p, key) == int64(probes)
			}
			// Routed: the key's total is its coordinator's.
			most := int64(0)
			for _, q := range c.Procs {
				n := convSeen(t, q, key)
				if n > int64(probes) {
					t.Fatalf("%s counts %d probe checks of %d made", q.Name, n, probes)
				}
				most = max(most, n)
			}
			return most == int64(probes) && (p.Name != coord || convSeen(t, p, key) == int64(probes))
		})
		d.learnt = time.Since(restarted)
		learnt = max(learnt, d.learnt)
		d.to = time.Now()
		d.notMember = p.Metric(t, "limiterd_sync_not_member_messages_total")
		d.deferred = sumMetric(t, c.Procs, "limiterd_sync_deferred_states_total") - p.Metric(t, "limiterd_sync_deferred_states_total") - deferred0
		run.up[p.Index].Store(true)
		downs = append(downs, d)
	}
	run.wait()
	// Checks sent to a node while it stopped may fail; every other one
	// must be answered.
	others := func(o outcome) bool {
		for _, d := range downs {
			if o.node == d.node && o.at >= run.since(d.from)-time.Second && o.at < run.since(d.to) {
				return false
			}
		}
		return true
	}
	v := run.judge(cs, time.Time{}, time.Time{}, others)
	t.Logf("%d restarts: %v", rounds, v)
	// The restart before the busiest window's end, and what the node it
	// restarted missed meanwhile: what a run past the budget's bound must
	// say (docs/faults.md, 3).
	worstAfter := "none"
	for _, d := range downs {
		if run.since(d.from) < v.worstFrom+labWindow {
			worstAfter = fmt.Sprintf("node-%d's %s %.1f s before the window ends, its counts learnt in %v, %v messages of non-members dropped, %v full states its peers deferred; admitted by node %v",
				d.node, d.signal, (v.worstFrom + labWindow - run.since(d.from)).Seconds(), d.learnt.Round(10*time.Millisecond), d.notMember, d.deferred, v.worstByNode)
		}
	}
	nodetest.Figures(t, fmt.Sprintf("3 a node restarted every 10 s, %d times", rounds)+scenarioNote(args),
		"probe key's coordinator", coord, "its restarts", coordRestarts,
		"5xx", v.fiveXX, "unanswered", v.noAnswer, "compliant denied", v.compliantDenied,
		"false rejections (oracle)", v.falseRejections, "worst ratio", v.worst, boundName, fmt.Sprintf("%.2f", bound),
		"longest from the signal until ready", ready.Round(100*time.Millisecond), "then until the counts were learnt", learnt.Round(100*time.Millisecond), "worst window after", worstAfter)
	v.holdsPromise(t, "")
	if v.worst > bound {
		t.Errorf("worst window %.2f x the limit, above the derived bound %.2f", v.worst, bound)
	}
}

// TestFaultCoordinatorCut is scenario 4: the coordinator of a hot key is
// cut off from the other seven mid-burst. The others fall back to the
// budget (counted) without a failed check, the key stays within the
// derived bound, and once the seven have declared it dead the key's new
// coordinator among them grants again.
func TestFaultCoordinatorCut(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	coordinatorCut(t)
}

// TestFaultCoordinatorCutRouted is TestFaultCoordinatorCut with every key
// synced to its coordinator alone (-sync-routing always): the new
// coordinator learns the key's counts from the nodes that hold them.
func TestFaultCoordinatorCutRouted(t *testing.T) {
	t.Parallel()
	coordinatorCut(t, "-sync-routing", "always")
}

// coordinatorCut is TestFaultCoordinatorCut with args added to every
// node's flags.
func coordinatorCut(t *testing.T, args ...string) {
	c := startLab(t, 8, args...)
	bound := labBound(t, 8, true)
	key := "abuse-hot"
	k := engine.CoordinatorOf(key, nodetest.Names(c.Procs))
	var coord *nodetest.Proc
	var rest []int
	for _, p := range c.Procs {
		if p.Name == k {
			coord = p
		} else {
			rest = append(rest, p.Index)
		}
	}
	others := c.Procs[:0:0]
	for _, i := range rest {
		others = append(others, c.Procs[i])
	}
	cs := []loadClient{{key: key, every: labWindow / (labLimit * 10)}}
	cs = append(cs, clients(4, 0)...)
	run := drive(t, c, 45*time.Second, cs)
	run.up[coord.Index].Store(false) // the burst goes through the others
	time.Sleep(10 * time.Second)
	granted := func() float64 { return sumMetric(t, others, "limiterd_coordinated_checks_total", "result", "granted") }
	fallbacks := func() float64 {
		return sumMetric(t, others, "limiterd_coordinated_checks_total", "result", "fallback*")
	}
	g0, f0 := granted(), fallbacks()
	if g0 == 0 {
		t.Fatal("no check went to the coordinator before the cut")
	}
	cut := time.Now()
	if err := c.Lab.Partition([]int{coord.Index}, rest); err != nil {
		t.Fatal(err)
	}
	// The seven declare it dead; the new coordinator grants.
	var tookOver time.Duration
	nodetest.Eventually(t, "the seven see seven alive", 60*time.Second, func() bool {
		for _, p := range others {
			m, err := p.Members()
			if err != nil || nodetest.CountState(m, "alive") != 7 {
				return false
			}
		}
		return true
	})
	g1 := granted()
	nodetest.Eventually(t, "a new coordinator grants", 30*time.Second, func() bool {
		if granted() > g1 {
			tookOver = time.Since(cut)
			return true
		}
		return false
	})
	run.wait()
	fb := fallbacks() - f0
	v := run.judge(cs, cut, time.Time{}, nil)
	t.Logf("coordinator %s cut off: %v", k, v)
	nodetest.Figures(t, "4 a hot key's coordinator cut off mid-burst"+scenarioNote(args),
		"5xx", v.fiveXX, "unanswered", v.noAnswer, "compliant denied", v.compliantDenied,
		"false rejections (oracle)", v.falseRejections, "worst ratio", v.worst, "derived bound", bound,
		"checks decided by the budget", fb, "new coordinator granting after", tookOver.Round(100*time.Millisecond))
	v.holdsPromise(t, "")
	if fb == 0 {
		t.Error("no check fell back to the budget after the cut")
	}
	if v.worst > bound {
		t.Errorf("worst window %.2f x the limit, above the derived bound %.2f", v.worst, bound)
	}
}

// TestFaultClockSkew is scenario 5: one node of 8 whose clock is ahead by
// 50 ms, 200 ms and 2 s in turn (limiterd -test-clock-offset), under load.
// Its peers' offset metric shows the offset, and its own clock lead metric
// what the peers that ask it measured of it, at most the offset: it
// judges its windows that much later (counter.SetClockLead), so that as a
// coordinator it does not grant into room its peers' slices leave early
// on its clock. Within -max-clock-offset
// (1 s) its counts are merged as they are: NFR1 holds, no compliant client
// is denied, and the oracle counts the denials of abusive clients that the
// offset's late room makes false; past it
// the others refuse its slices, count them as skewed and warn, so the
// skewed node and the rest count as two sides of a partition: at most
// 2 x 1.1 x the limit, and still no compliant client denied.
func TestFaultClockSkew(t *testing.T) {
	t.Parallel() // each in a lab of its own; mostly waiting
	clockSkew(t)
}

// TestFaultClockSkewRouted is TestFaultClockSkew with every key synced to
// its coordinator alone (-sync-routing always): there only the key's
// coordinator knows its total, so a coordinator ahead would grant into the
// room its clock makes early if its askers did not tell it its lead.
func TestFaultClockSkewRouted(t *testing.T) {
	t.Parallel()
	clockSkew(t, "-sync-routing", "always")
}

// clockSkew is TestFaultClockSkew with args added to every node's flags.
func clockSkew(t *testing.T, args ...string) {
	c := startLab(t, 8, args...)
	skewed := c.Procs[7]
	base := skewed.Args
	cs := clients(8, 4)
	for i, off := range []time.Duration{50 * time.Millisecond, 200 * time.Millisecond, 2 * time.Second} {
		if i > 0 {
			// Each offset's run is judged alone (judge reads its own
			// log), so it must start on empty windows: otherwise the
			// nodes rightly deny what the run before left in them, and
			// the oracle, which does not see that run's admissions, counts
			// those denials as false (docs/faults.md, 5).
			time.Sleep(labWindow)
		}
		c.Terminate(skewed)
		skewed.Args = append(slices.Clone(base), "-test-clock-offset", off.String())
		c.Start(skewed)
		c.WaitAlive(c.Procs, 8, 30*time.Second)
		refused0 := sumMetric(t, c.Procs[:7], "limiterd_sync_skewed_messages_total")
		fellBack := func() float64 {
			return skewed.Metric(t, "limiterd_coordinated_checks_total", "result", "fallback*")
		}
		run := drive(t, c, 2*labWindow+5*time.Second, cs)
		run.wait()
		// The last message's offset, seen by node 0: the offset less its
		// delivery.
		seen := time.Duration(c.Procs[0].Metric(t, "limiterd_cluster_clock_offset_seconds", "peer", "node-7") * float64(time.Second))
		refused := sumMetric(t, c.Procs[:7], "limiterd_sync_skewed_messages_total") - refused0
		// The lead its askers tell the node ahead it has, by which it
		// judges its windows later (counter.SetClockLead), and node 0's,
		// on true time.
		lead := time.Duration(skewed.Metric(t, "limiterd_cluster_clock_lead_seconds") * float64(time.Second))
		lead0 := time.Duration(c.Procs[0].Metric(t, "limiterd_cluster_clock_lead_seconds") * float64(time.Second))
		// The skewed node's own checks at the margin that its budget
		// decided, its coordinators not answering (past the threshold they
		// answer it undecided).
		budget := fellBack()
		v := run.judge(cs, time.Time{}, time.Time{}, nil)
		// Its peers see it ahead: they refuse its slices and warn.
		warned := strings.Contains(c.Procs[0].Stderr.String(), "clock is ahead of ours by more than the maximum clock offset")
		t.Logf("clock ahead by %v: %v", off, v)
		nodetest.Figures(t, "5 a node's clock ahead by "+off.String()+scenarioNote(args),
			"offset node-0 sees", seen.Round(time.Millisecond), "5xx", v.fiveXX, "unanswered", v.noAnswer,
			"compliant denied", v.compliantDenied, "false rejections (oracle)", v.falseRejections,
			"worst ratio", v.worst, "messages refused as skewed", refused, "node-0 warned", warned,
			"node-7's clock lead", lead.Round(time.Millisecond), "node-0's", lead0.Round(time.Millisecond),
			"checks node-7 decided by the budget (since its start)", budget)
		if seen > off || seen < off-500*time.Millisecond {
			t.Errorf("node-0 sees node-7's clock %v ahead, want a little under %v", seen, off)
		}
		// A lead is at most the true one (every report is the clocks'
		// difference less a delay), and no more than -max-clock-offset.
		if lead > min(off, time.Second) || lead0 != 0 {
			t.Errorf("clock leads: node-7 %v (ahead by %v, -max-clock-offset 1s), node-0 %v (want 0)", lead, off, lead0)
		}
		if off == 200*time.Millisecond && lead < off/2 {
			t.Errorf("node-7, %v ahead, takes a clock lead of %v only", off, lead)
		}
		// NFR2 is the compliant clients': never denied. The oracle's false
		// rejections of the abusive ones are the skew's price, reported:
		// the peers keep each admission of a node ahead by d for W + d of
		// their time, so room it leaves comes d late (counter/doc.go).
		v.holdsPromise(t, "offset "+off.String())
		switch {
		case off < time.Second && refused != 0:
			t.Errorf("offset %v, within -max-clock-offset: %v messages refused as skewed", off, refused)
		case off < time.Second && v.worst > 1.1:
			t.Errorf("offset %v: worst window %.2f x the limit, above 1.1", off, v.worst)
		case off > time.Second && (refused == 0 || !warned):
			t.Errorf("offset %v, past -max-clock-offset: %v messages refused, warned %v; want both", off, refused, warned)
		case off > time.Second && v.worst > 2*1.1:
			t.Errorf("offset %v: worst window %.2f x the limit, above 2 sides x 1.1", off, v.worst)
		}
	}
}
