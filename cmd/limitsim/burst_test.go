package main

import (
	"github.com/limiterd/limiterd/internal/seed"

	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/decision"
)

// quickBurstPlan is a smaller plan with every table of limitsim burst:
// two windows, fewer rates and values. It runs in every test mode; the full
// plan (40 million simulated requests) only without the race detector,
// which slows the simulation about 40-fold and has nothing to find there:
// each run is one goroutine, and the parallel runs share nothing.
func quickBurstPlan() burstPlan {
	d := int64(2 * seedWindowMs)
	return burstPlan{
		durationMs:      d,
		rates:           []float64{10, 90, 300},
		settings:        []burstSetting{noBudget(), floor1(), coordinatedSetting()},
		patterns:        compliantPatterns(d),
		staggers:        []time.Duration{0, 200 * time.Millisecond},
		staggerRates:    []float64{90},
		staggerPatterns: []int{3},
		skews:           []time.Duration{0, time.Second},
		skewRates:       []float64{90},
		skewPatterns:    []int{2, 3},
		latencies:       []time.Duration{0, time.Millisecond, 50 * time.Millisecond},
		latencyRates:    []float64{90},
		latencyPatterns: []nodePattern{postTickBurst(), latencyChain(), afterGrace()},
	}
}

// runPlan runs p and renders it as limitsim burst would.
func runPlan(t *testing.T, p burstPlan) (burstResults, []byte) {
	t.Helper()
	br, err := p.run()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := writeBurst(&out, p, br); err != nil {
		t.Fatal(err)
	}
	return br, out.Bytes()
}

// checkBurst asserts what the evaluation is for, on any plan: in the base
// cluster the derived bound holds for every rate and setting, floor 1 and
// the coordinated cluster keep NFR1, and without the budget or with the
// coordinator no compliant client is ever rejected.
func checkBurst(t *testing.T, p burstPlan, br burstResults) {
	t.Helper()
	vs := variedSettings()
	for i, rate := range p.rates {
		for j, s := range p.settings {
			r := br.nfr1[i][j]
			if b := clusterBound(s.sim()); int64(r.maxInWindow) > b {
				t.Errorf("%g/s, %s: %d admitted in a window, above the derived bound %d", rate, s.name, r.maxInWindow, b)
			}
			if (s == floor1() || s.coordinated) && float64(r.maxInWindow) > nfr1Ratio*seedLimit {
				t.Errorf("%g/s, %s: %d admitted in a window; NFR1 allows %g", rate, s.name, r.maxInWindow, nfr1Ratio*seedLimit)
			}
			// In the base cluster every answer comes in time.
			if s.coordinated && r.stats.fallback != 0 {
				t.Errorf("%g/s, coordinated: %d checks fell back with no latency", rate, r.stats.fallback)
			}
			if r.requests != len(steadyAt(rate, p.durationMs)) || r.accepted+r.rejected != r.requests {
				t.Errorf("%g/s, %s: %+v does not add up", rate, s.name, r)
			}
		}
	}
	for i, pat := range p.patterns {
		if n := maxInWindow(pat.at, seedWindowMs); n > seedLimit {
			t.Fatalf("pattern %q has %d requests in a window: not compliant", pat.name, n)
		}
		for j, s := range p.settings {
			r := br.nfr2[i][j]
			if r.falseRejections != r.rejected {
				t.Errorf("%s, %s: %d rejections but %d false ones; a compliant client's are all false", pat.name, s.name, r.rejected, r.falseRejections)
			}
			if (!s.budget || s.coordinated) && r.rejected != 0 {
				t.Errorf("%s, %s: %d rejected (NFR2)", pat.name, s.name, r.rejected)
			}
		}
	}
	// Without the budget, or with the coordinator, and without clock skew
	// no compliant client is rejected, whatever the tick phases.
	for i := range p.staggers {
		for j, s := range vs {
			if s.budget && !s.coordinated {
				continue
			}
			for k, r := range br.stagger[len(vs)*i+j][len(p.staggerRates):] {
				if r.rejected != 0 {
					t.Errorf("stagger %v, %s, %s: %d rejected (NFR2)", p.staggers[i], p.patterns[p.staggerPatterns[k]].name, s.name, r.rejected)
				}
			}
		}
	}
	for _, rows := range [][][]clientRun{br.skew, br.skewTick} {
		for j, s := range vs {
			if s.budget && !s.coordinated {
				continue
			}
			for k, r := range rows[j][len(p.skewRates):] {
				if p.skews[0] == 0 && r.rejected != 0 {
					t.Errorf("no skew, %s, %s: %d rejected (NFR2)", p.patterns[p.skewPatterns[k]].name, s.name, r.rejected)
				}
			}
		}
	}
	// The post-tick burst, the budget's hole before the delivery grace, and
	// a burst right after the grace stay within the bound at every latency
	// up to the grace; at no latency so does everything else.
	b := clusterBound(floor1().sim())
	cb := clusterBound(coordinatedSetting().sim())
	for i, lat := range p.latencies {
		// With every answer in time (a round trip within the deadline)
		// the coordinated cluster keeps its bound on every pattern and
		// rate.
		if 2*lat <= decision.DefaultDeadline {
			for k, r := range br.latency[len(vs)*i+2] {
				if int64(r.maxInWindow) > cb || r.stats.fallback != 0 {
					t.Errorf("latency %v, coordinated, column %d: %d admitted in a window (bound %d), %d fallbacks", lat, k, r.maxInWindow, cb, r.stats.fallback)
				}
			}
		}
		row := br.latency[len(vs)*i+1]
		for k, ep := range p.latencyPatterns {
			r := row[len(p.latencyRates)+k]
			closed := ep.name == postTickBurst().name || ep.name == afterGrace().name
			if (lat == 0 || closed && lat.Milliseconds() <= graceMs(defaultSimConfig())) && int64(r.maxInWindow) > b {
				t.Errorf("%s, latency %v, floor 1: %d admitted in a window, above the bound %d", ep.name, lat, r.maxInWindow, b)
			}
		}
	}
}

func TestBurstQuickGolden(t *testing.T) {
	p := quickBurstPlan()
	br, out := runPlan(t, p)
	checkBurst(t, p, br)
	golden(t, "burst_quick.golden", out)
	// Floor 1 on the latency chain with 1 ms latency: the hole the delivery
	// grace leaves (docs/blind-interval.md, "Latency"). Pinned so that a fix
	// shows up here.
	if got := br.latency[len(variedSettings())+1][len(p.latencyRates)+1].maxInWindow; got != 780 {
		t.Errorf("latency chain, 1 ms latency, floor 1: %d admitted, want 780", got)
	}
}

// TestBurstDeterministic runs the quick plan twice: scheduling of the
// parallel runs must not show in the output.
func TestBurstDeterministic(t *testing.T) {
	p := quickBurstPlan()
	p.durationMs = seedWindowMs
	p.patterns = compliantPatterns(p.durationMs)[2:4]
	p.staggerPatterns, p.skewPatterns = []int{1}, []int{0, 1}
	p.rates, p.staggers, p.skews, p.latencies = []float64{90}, p.staggers[1:], p.skews[1:], p.latencies[1:]
	p.staggerRates, p.latencyRates = []float64{90}, []float64{90}
	_, a := runPlan(t, p)
	_, b := runPlan(t, p)
	if !bytes.Equal(a, b) {
		t.Errorf("two runs differ:\n%s\n---\n%s", a, b)
	}
}

// randomBursty is an adversarial client: bursts of up to 700 requests over
// up to 400 ms, a third of them starting exactly at a tick instant.
func randomBursty(rng *rand.Rand, durationMs int64) []int64 {
	var at []int64
	var t0 int64
	for t0 < durationMs {
		t0 += rng.Int64N(3000)
		if rng.IntN(3) == 0 {
			t0 -= t0 % 200
		}
		at = append(at, seed.Spread(t0, 1+rng.Int64N(400), 1+rng.IntN(700))...)
	}
	slices.Sort(at)
	return at
}

// TestClusterBoundRandom checks the derived bound on adversarial patterns,
// with nodes drawn at random or in turn, and that it is nearly tight (so
// the formula is not vacuous).
func TestClusterBoundRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(20260730, 3))
	runs := 8
	if raceEnabled {
		runs = 2
	}
	for _, s := range []burstSetting{floor(0.5), floor1()} {
		sc := s.sim()
		worst := 0
		for run := range runs {
			at := randomBursty(rng, 2*seedWindowMs)
			nodes := lcgNodes(uint32(run), sc.nodes)
			if run%2 == 1 {
				nodes = roundRobin(sc.nodes)
			}
			r, err := runClient(sc, at, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if b := clusterBound(sc); int64(r.maxInWindow) > b {
				t.Errorf("%s, run %d: %d admitted in a window, bound %d", s.name, run, r.maxInWindow, b)
			}
			worst = max(worst, r.maxInWindow)
		}
		if worst <= seedLimit {
			t.Errorf("%s: worst run admitted %d; the patterns no longer stress the blind interval", s.name, worst)
		}
		t.Logf("%s: worst of %d adversarial runs admitted %d in a window; bound %d", s.name, runs, worst, clusterBound(sc))
	}
}

func TestClusterBoundFormula(t *testing.T) {
	tests := []struct {
		setting     burstSetting
		floor, want int64
	}{
		{noBudget(), 0, 8 * (600 + 2)},
		{floor(0), 0, 599 + 8 + 16}, // the first request of an interval always fits
		{floor(0.5), 2, 600 + 16 + 16},
		{floor1(), 3, 600 + 24 + 16},
		{floor(2), 5, 600 + 40 + 16},
		{floor(4), 10, 600 + 80 + 16},
		{burstSetting{budget: true, floor: 1, noGrace: true}, 2, 600 + 16 + 16},
	}
	for _, tt := range tests {
		sc := tt.setting.sim()
		if got := budgetFloorRequests(sc); tt.setting.budget && got != tt.floor {
			t.Errorf("floor %g: %d a node, want %d", tt.setting.floor, got, tt.floor)
		}
		if got := clusterBound(sc); got != tt.want {
			t.Errorf("%+v: bound %d, want %d", tt.setting, got, tt.want)
		}
	}
	if got := nodeTail(defaultSimConfig()); got != 2 { // 600 x 0.1 x 0.3 / 8 = 2.25, rounded down
		t.Errorf("per-node tail %d, want 2", got)
	}
}

// TestClusterBoundTight replays the patterns that reach the bound: tails
// hidden in expired slices on every node, then a flood that fills every
// node's budget, admits exactly the bound. With latency below the grace
// the latency chain goes past it: pinned, so that a fix shows up here.
func TestClusterBoundTight(t *testing.T) {
	sc := floor1().sim()
	tests := []struct {
		pattern nodePattern
		latency time.Duration
		want    int64
	}{
		{tailsThen(sc, nodeFlood(sc)), 0, clusterBound(sc)},
		{tailsThen(sc, nodeFlood(sc)), time.Millisecond, clusterBound(sc)},
		{tailsThen(sc, latencyChain()), 0, clusterBound(sc)},
		{tailsThen(sc, latencyChain()), time.Millisecond, 796}, // 5/4 x (L + N x f) + N x T
		{tailsThen(sc, latencyChain()), 20 * time.Millisecond, 796},
	}
	for _, tt := range tests {
		sc := sc
		sc.latency = tt.latency
		r, err := runClient(sc, tt.pattern.at, tt.pattern.node())
		if err != nil {
			t.Fatal(err)
		}
		if int64(r.maxInWindow) != tt.want {
			t.Errorf("%s, latency %v: %d admitted in a window, want %d", tt.pattern.name, tt.latency, r.maxInWindow, tt.want)
		}
	}
}
