package main

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// smallSim is a cheap cluster for property tests: 20 per second in 4
// slices, 4 nodes syncing every 50 ms.
func smallSim() simConfig {
	return simConfig{nodes: 4, limit: 20, window: time.Second, slices: 4, sync: 50 * time.Millisecond, floor: 1, grace: 0.25}
}

// compliantTrace draws bursty arrivals and keeps those that fit an exact
// sliding log of limit per window: a client that never exceeds its limit,
// often sitting right at it.
func compliantTrace(rng *rand.Rand, limit int, windowMs, durationMs int64) []int64 {
	var at []int64
	lo := 0
	for t := int64(0); t < durationMs; t += rng.Int64N(windowMs / 4) {
		for range rng.IntN(limit) {
			c := t + rng.Int64N(windowMs/10)
			if len(at) > 0 && c < at[len(at)-1] {
				c = at[len(at)-1]
			}
			for lo < len(at) && at[lo] <= c-windowMs {
				lo++
			}
			if len(at)-lo < limit {
				at = append(at, c)
			}
		}
	}
	return at
}

// TestNoBudgetNeverRejectsACompliantClient is NFR2 on the cluster: with the
// budget off and one clock, the nodes' counts are never above the truth,
// whatever the latency, tick phases, duplicated and reordered delivery, or
// the nodes the requests reach.
func TestNoBudgetNeverRejectsACompliantClient(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 5))
	variants := []struct {
		name             string
		latency, stagger time.Duration
		dup              bool
		loss             float64
		reorder          time.Duration
	}{
		{"base", 0, 0, false, 0, 0},
		{"duplicated and late", 0, 0, true, 0, 0},
		{"latency 7ms", 7 * time.Millisecond, 0, true, 0, 0},
		{"staggered ticks", 3 * time.Millisecond, 50 * time.Millisecond, true, 0, 0},
		{"lossy and reordered", time.Millisecond, 0, false, 0.3, 40 * time.Millisecond},
	}
	for _, v := range variants {
		t.Run(v.name, func(t *testing.T) {
			sc := smallSim()
			sc.latency, sc.stagger, sc.dup, sc.loss, sc.reorder, sc.netSeed = v.latency, v.stagger, v.dup, v.loss, v.reorder, 7
			for run := range 6 {
				at := compliantTrace(rng, int(sc.limit), 1000, 8000)
				nodes := lcgNodes(uint32(run), sc.nodes)
				if run%2 == 1 {
					nodes = roundRobin(sc.nodes)
				}
				r, err := runClient(sc, at, nodes)
				if err != nil {
					t.Fatal(err)
				}
				if r.rejected != 0 || r.accepted != len(at) {
					t.Fatalf("run %d: %d of %d compliant requests rejected", run, r.rejected, len(at))
				}
				if r.maxInWindow != int(sc.limit) {
					t.Fatalf("run %d: the trace peaks at %d in a window; it should sit at the limit", run, r.maxInWindow)
				}
			}
		})
	}
}

// TestBudgetFloorAdmitsTheLimitRate: a client at its limit rate sends at
// most the floor (BudgetFloor 1) in any sync interval, so the budget never
// rejects it, even when every request reaches the same node.
func TestBudgetFloorAdmitsTheLimitRate(t *testing.T) {
	for _, nodes := range []func(int) int{func(int) int { return 0 }, roundRobin(4), lcgNodes(7, 4)} {
		for _, stagger := range []time.Duration{0, 50 * time.Millisecond} {
			sc := smallSim()
			sc.budget, sc.stagger, sc.latency = true, stagger, time.Millisecond
			r, err := runClient(sc, steadyAt(20, 10_000), nodes)
			if err != nil {
				t.Fatal(err)
			}
			if r.rejected != 0 {
				t.Errorf("stagger %v: %d of %d rejected at the limit rate", stagger, r.rejected, r.requests)
			}
		}
	}
}

// TestDupChangesNoDecision: a second, late copy of every message is a
// no-op for the merge (counts are absolute, merged by max), so every
// decision is the same with it as without it, budget or not.
func TestDupChangesNoDecision(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	var trace []byte
	for i, at := range randomBursty(rng, 80_000) {
		trace = fmt.Appendf(trace, "%d k%d\n", at, i%3)
	}
	for _, args := range [][]string{
		{"--budget=false"},
		{"--budget-floor", "1", "--latency", "3ms"},
		{"--budget-floor", "2", "--stagger", "200ms", "--latency", "1ms"},
	} {
		base := append([]string{"replay", "--nodes", "8", "--decisions"}, args...)
		_, plain, _ := runCmd(t, string(trace), base...)
		code, dup, stderr := runCmd(t, string(trace), append(base, "--dup")...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, %s", args, code, stderr)
		}
		pd, _ := splitClusterOutput(t, plain)
		dd, ds := splitClusterOutput(t, dup)
		if !slices.Equal(pd, dd) {
			t.Errorf("%v: decisions differ with duplicated delivery", args)
		}
		if ds["rejected"] == "0" {
			t.Errorf("%v: nothing rejected; the trace should exceed the limit", args)
		}
	}
}

func TestSimConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*simConfig)
	}{
		{"no nodes", func(sc *simConfig) { sc.nodes = 0 }},
		{"too many nodes", func(sc *simConfig) { sc.nodes = 257 }},
		{"zero sync", func(sc *simConfig) { sc.sync = 0 }},
		{"fractional sync", func(sc *simConfig) { sc.sync = 1500 * time.Microsecond }},
		{"negative latency", func(sc *simConfig) { sc.latency = -time.Millisecond }},
		{"stagger above sync", func(sc *simConfig) { sc.stagger = 201 * time.Millisecond }},
		{"huge skew", func(sc *simConfig) { sc.skew = 2 * time.Hour }},
	}
	for _, tt := range tests {
		sc := defaultSimConfig()
		tt.edit(&sc)
		if _, err := newSimCluster(sc); !errors.Is(err, errSimConfig) {
			t.Errorf("%s: %v, want errSimConfig", tt.name, err)
		}
	}
	sc := defaultSimConfig()
	sc.floor = -1 // the counter's own validation
	if _, err := newSimCluster(sc); !errors.Is(err, errSimConfig) {
		t.Errorf("negative floor: %v", err)
	}
}

func TestSkewAndStaggerLayout(t *testing.T) {
	tests := []struct {
		name       string
		stagger    time.Duration
		clockTicks bool
		wantPhases []int64
	}{
		{"staggered", 200 * time.Millisecond, false, []int64{0, 25, 50, 75, 100, 125, 150, 175}},
		// A node 50 ms ahead reads a multiple of 200 ms 50 ms early: phase 150.
		{"ticks on each clock", 0, true, []int64{50, 35, 21, 7, 193, 179, 165, 150}},
		{"both", 200 * time.Millisecond, true, []int64{50, 60, 71, 82, 93, 104, 115, 125}},
	}
	for _, tt := range tests {
		sc := defaultSimConfig()
		sc.skew, sc.stagger, sc.clockTicks = 50*time.Millisecond, tt.stagger, tt.clockTicks
		s, err := newSimCluster(sc)
		if err != nil {
			t.Fatal(err)
		}
		var offsets, phases []int64
		for _, n := range s.nodes {
			offsets, phases = append(offsets, n.offset), append(phases, n.phase)
		}
		if want := []int64{-50, -35, -21, -7, 7, 21, 35, 50}; !slices.Equal(offsets, want) {
			t.Errorf("%s: offsets %v, want %v", tt.name, offsets, want)
		}
		if !slices.Equal(phases, tt.wantPhases) {
			t.Errorf("%s: phases %v, want %v", tt.name, phases, tt.wantPhases)
		}
	}
}

// TestSkewIsObserved: the offset each Syncer estimates from its peers'
// messages is the clock difference plus the latency.
func TestSkewIsObserved(t *testing.T) {
	sc := smallSim()
	sc.skew, sc.latency = 30*time.Millisecond, 2*time.Millisecond
	r, err := runClient(sc, steadyAt(40, 3000), roundRobin(sc.nodes))
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2*30 + 2); r.maxOffsetMs != want {
		t.Errorf("largest observed offset %d ms, want %d", r.maxOffsetMs, want)
	}
}

// TestIdleTicksChangeNothing: the simulator skips the ticks of nodes that
// counted nothing since their last one, where limiterd ticks every node at
// every interval. The budget depends on ticks (a tick starts a sync
// interval and the delivery grace), so this checks that the shortcut
// changes no decision and no message, with latency, tick phases and skew.
func TestIdleTicksChangeNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 9))
	base := floor1().sim()
	bursty := randomBursty(rng, 2*seedWindowMs)
	chain := tailsThen(base, latencyChain())
	tests := []struct {
		name                   string
		latency, stagger, skew time.Duration
		at                     []int64
		seed                   uint32 // of the LCG that picks the nodes; 0: the pattern's own
		clockTicks             bool
	}{
		{"latency chain", time.Millisecond, 0, 0, chain.at, 0, false},
		{"bursty, latency 3ms", 3 * time.Millisecond, 0, 0, bursty, 3, false},
		{"bursty, latency 60ms", 60 * time.Millisecond, 0, 0, bursty, 4, false},
		{"bursty, staggered", time.Millisecond, 200 * time.Millisecond, 0, bursty, 5, false},
		{"bursty, skewed", 0, 0, 50 * time.Millisecond, bursty, 6, false},
		{"steady 90/s", 2 * time.Millisecond, 0, 0, steadyAt(90, seedWindowMs), 7, false},
		{"bursty, skewed, ticks on each clock", time.Millisecond, 0, 70 * time.Millisecond, bursty, 8, true},
	}
	for _, tt := range tests {
		var runs [2]clientRun
		for i, every := range []bool{false, true} {
			sc := base
			sc.latency, sc.stagger, sc.skew, sc.clockTicks, sc.everyTick = tt.latency, tt.stagger, tt.skew, tt.clockTicks, every
			node := chain.node()
			if tt.seed != 0 {
				node = lcgNodes(tt.seed, sc.nodes)
			}
			r, err := runClient(sc, tt.at, node)
			if err != nil {
				t.Fatal(err)
			}
			runs[i] = r
		}
		if runs[0] != runs[1] {
			t.Errorf("%s: skipping idle ticks gives %+v, ticking every node %+v", tt.name, runs[0], runs[1])
		}
		if runs[0].rejected == 0 {
			t.Errorf("%s: nothing rejected; the budget was never tested", tt.name)
		}
	}
}
