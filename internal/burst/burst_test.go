package burst

import (
	"bytes"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// quickBurstPlan is a smaller plan with every table of limitsim burst:
// two windows, fewer rates and values.
func quickBurstPlan() Plan {
	d := int64(2 * seedstudy.WindowMs)
	return Plan{
		DurationMs:      d,
		Rates:           []float64{10, 90, 300},
		Settings:        []Setting{NoBudget(), Floor1(), Coordinated()},
		Patterns:        CompliantPatterns(d),
		Staggers:        []time.Duration{0, 200 * time.Millisecond},
		StaggerRates:    []float64{90},
		StaggerPatterns: []int{3},
		Skews:           []time.Duration{0, time.Second},
		SkewRates:       []float64{90},
		SkewPatterns:    []int{2, 3},
		Latencies:       []time.Duration{0, time.Millisecond, 50 * time.Millisecond},
		LatencyRates:    []float64{90},
		LatencyPatterns: []NodePattern{PostTickBurst(), LatencyChain(), AfterGrace()},
	}
}

// runPlan runs p and renders it as limitsim burst would.
func runPlan(t *testing.T, p Plan) (Results, []byte) {
	t.Helper()
	br, err := p.Run()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := Write(&out, p, br); err != nil {
		t.Fatal(err)
	}
	return br, out.Bytes()
}

// checkBurst asserts what the evaluation is for, on any plan: in the base
// cluster the derived bound holds for every rate and setting, floor 1 and
// the coordinated cluster keep NFR1, and without the budget or with the
// coordinator no compliant client is ever rejected.
func checkBurst(t *testing.T, p Plan, br Results) {
	t.Helper()
	vs := VariedSettings()
	for i, rate := range p.Rates {
		for j, s := range p.Settings {
			r := br.NFR1[i][j]
			if b := ClusterBound(s.Sim()); int64(r.MaxInWindow) > b {
				t.Errorf("%g/s, %s: %d admitted in a window, above the derived bound %d", rate, s.Name, r.MaxInWindow, b)
			}
			if (s == Floor1() || s.Coordinated) && float64(r.MaxInWindow) > seedstudy.NFR1Ratio*seedstudy.Limit {
				t.Errorf("%g/s, %s: %d admitted in a window; NFR1 allows %g", rate, s.Name, r.MaxInWindow, seedstudy.NFR1Ratio*seedstudy.Limit)
			}
			// In the base cluster every answer comes in time.
			if s.Coordinated && r.Stats.Fallback != 0 {
				t.Errorf("%g/s, coordinated: %d checks fell back with no latency", rate, r.Stats.Fallback)
			}
			if r.Requests != len(clustersim.SteadyAt(rate, p.DurationMs)) || r.Accepted+r.Rejected != r.Requests {
				t.Errorf("%g/s, %s: %+v does not add up", rate, s.Name, r)
			}
		}
	}
	for i, pat := range p.Patterns {
		if n := clustersim.MaxInWindow(pat.At, seedstudy.WindowMs); n > seedstudy.Limit {
			t.Fatalf("pattern %q has %d requests in a window: not compliant", pat.Name, n)
		}
		for j, s := range p.Settings {
			r := br.NFR2[i][j]
			if r.FalseRejections != r.Rejected {
				t.Errorf("%s, %s: %d rejections but %d false ones; a compliant client's are all false", pat.Name, s.Name, r.Rejected, r.FalseRejections)
			}
			if (!s.Budget || s.Coordinated) && r.Rejected != 0 {
				t.Errorf("%s, %s: %d rejected (NFR2)", pat.Name, s.Name, r.Rejected)
			}
		}
	}
	// Without the budget, or with the coordinator, and without clock skew
	// no compliant client is rejected, whatever the tick phases.
	for i := range p.Staggers {
		for j, s := range vs {
			if s.Budget && !s.Coordinated {
				continue
			}
			for k, r := range br.Stagger[len(vs)*i+j][len(p.StaggerRates):] {
				if r.Rejected != 0 {
					t.Errorf("stagger %v, %s, %s: %d rejected (NFR2)", p.Staggers[i], p.Patterns[p.StaggerPatterns[k]].Name, s.Name, r.Rejected)
				}
			}
		}
	}
	for _, rows := range [][][]clustersim.ClientRun{br.Skew, br.SkewTick} {
		for j, s := range vs {
			if s.Budget && !s.Coordinated {
				continue
			}
			for k, r := range rows[j][len(p.SkewRates):] {
				if p.Skews[0] == 0 && r.Rejected != 0 {
					t.Errorf("no skew, %s, %s: %d rejected (NFR2)", p.Patterns[p.SkewPatterns[k]].Name, s.Name, r.Rejected)
				}
			}
		}
	}
	// The post-tick burst, the budget's hole before the delivery grace, and
	// a burst right after the grace stay within the bound at every latency
	// up to the grace; at no latency so does everything else.
	b := ClusterBound(Floor1().Sim())
	cb := ClusterBound(Coordinated().Sim())
	for i, lat := range p.Latencies {
		// With every answer in time (a round trip within the deadline)
		// the coordinated cluster keeps its bound on every pattern and
		// rate.
		if 2*lat <= decision.DefaultDeadline {
			for k, r := range br.Latency[len(vs)*i+2] {
				if int64(r.MaxInWindow) > cb || r.Stats.Fallback != 0 {
					t.Errorf("latency %v, coordinated, column %d: %d admitted in a window (bound %d), %d fallbacks", lat, k, r.MaxInWindow, cb, r.Stats.Fallback)
				}
			}
		}
		row := br.Latency[len(vs)*i+1]
		for k, ep := range p.LatencyPatterns {
			r := row[len(p.LatencyRates)+k]
			closed := ep.Name == PostTickBurst().Name || ep.Name == AfterGrace().Name
			if (lat == 0 || closed && lat.Milliseconds() <= GraceMs(clustersim.DefaultConfig())) && int64(r.MaxInWindow) > b {
				t.Errorf("%s, latency %v, floor 1: %d admitted in a window, above the bound %d", ep.Name, lat, r.MaxInWindow, b)
			}
		}
	}
}

// shortBurstPlan is quickBurstPlan over 10 s, with two rates and
// latencies of 0 and 1 ms: every table of limitsim burst, small enough for
// the race detector.
func shortBurstPlan() Plan {
	p := quickBurstPlan()
	p.DurationMs = 10_000
	p.Rates = []float64{10, 300}
	p.Patterns = CompliantPatterns(p.DurationMs)
	p.Latencies = p.Latencies[:2]
	return p
}

// TestBurstShort is TestBurstQuickGolden (burst_full_test.go) on the short
// plan, which the race detector runs too.
func TestBurstShort(t *testing.T) {
	p := shortBurstPlan()
	br, out := runPlan(t, p)
	checkBurst(t, p, br)
	checkGolden(t, "burst_short.golden", out)
	checkLatencyChainHole(t, p, br)
}

// checkLatencyChainHole pins floor 1 on the latency chain with 1 ms
// latency: the hole the delivery grace leaves (docs/blind-interval.md,
// "Latency"), so that a fix shows up here. p's second latency is 1 ms.
func checkLatencyChainHole(t *testing.T, p Plan, br Results) {
	t.Helper()
	if got := br.Latency[len(VariedSettings())+1][len(p.LatencyRates)+1].MaxInWindow; got != 780 {
		t.Errorf("latency chain, 1 ms latency, floor 1: %d admitted, want 780", got)
	}
}

// deterministicPlan is p cut down to one rate and one value of each varied
// dimension past the first, over durationMs.
func deterministicPlan(p Plan, durationMs int64) Plan {
	p.DurationMs = durationMs
	p.Patterns = CompliantPatterns(p.DurationMs)[2:4]
	p.StaggerPatterns, p.SkewPatterns = []int{1}, []int{0, 1}
	p.Rates, p.Staggers, p.Skews, p.Latencies = []float64{90}, p.Staggers[1:], p.Skews[1:], p.Latencies[1:]
	p.StaggerRates, p.LatencyRates = []float64{90}, []float64{90}
	return p
}

// checkDeterministic runs p twice: scheduling of the parallel runs must
// not show in the output.
func checkDeterministic(t *testing.T, p Plan) {
	t.Helper()
	_, a := runPlan(t, p)
	_, b := runPlan(t, p)
	if !bytes.Equal(a, b) {
		t.Errorf("two runs differ:\n%s\n---\n%s", a, b)
	}
}

// TestBurstDeterministicShort is TestBurstDeterministic
// (burst_full_test.go) on the short plan with one latency pattern, which
// the race detector runs too.
func TestBurstDeterministicShort(t *testing.T) {
	p := deterministicPlan(shortBurstPlan(), 10_000)
	p.LatencyPatterns = p.LatencyPatterns[:1]
	checkDeterministic(t, p)
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
	for _, s := range []Setting{AtFloor(0.5), Floor1()} {
		sc := s.Sim()
		worst := 0
		for run := range runs {
			at := RandomBursty(rng, 2*seedstudy.WindowMs)
			nodes := clustersim.LCGNodes(uint32(run), sc.Nodes)
			if run%2 == 1 {
				nodes = clustersim.RoundRobin(sc.Nodes)
			}
			r, err := clustersim.RunClient(sc, at, nodes)
			if err != nil {
				t.Fatal(err)
			}
			if b := ClusterBound(sc); int64(r.MaxInWindow) > b {
				t.Errorf("%s, run %d: %d admitted in a window, bound %d", s.Name, run, r.MaxInWindow, b)
			}
			worst = max(worst, r.MaxInWindow)
		}
		if worst <= seedstudy.Limit {
			t.Errorf("%s: worst run admitted %d; the patterns no longer stress the blind interval", s.Name, worst)
		}
		t.Logf("%s: worst of %d adversarial runs admitted %d in a window; bound %d", s.Name, runs, worst, ClusterBound(sc))
	}
}

func TestClusterBoundFormula(t *testing.T) {
	tests := []struct {
		setting     Setting
		floor, want int64
	}{
		{NoBudget(), 0, 8 * (600 + 2)},
		{AtFloor(0), 0, 599 + 8 + 16}, // the first request of an interval always fits
		{AtFloor(0.5), 2, 600 + 16 + 16},
		{Floor1(), 3, 600 + 24 + 16},
		{AtFloor(2), 5, 600 + 40 + 16},
		{AtFloor(4), 10, 600 + 80 + 16},
		{Setting{Budget: true, Floor: 1, NoGrace: true}, 2, 600 + 16 + 16},
	}
	for _, tt := range tests {
		sc := tt.setting.Sim()
		if got := BudgetFloorRequests(sc); tt.setting.Budget && got != tt.floor {
			t.Errorf("floor %g: %d a node, want %d", tt.setting.Floor, got, tt.floor)
		}
		if got := ClusterBound(sc); got != tt.want {
			t.Errorf("%+v: bound %d, want %d", tt.setting, got, tt.want)
		}
	}
	if got := NodeTail(clustersim.DefaultConfig()); got != 2 { // 600 x 0.1 x 0.3 / 8 = 2.25, rounded down
		t.Errorf("per-node tail %d, want 2", got)
	}
}

// TestClusterBoundTight replays the patterns that reach the bound: tails
// hidden in expired slices on every node, then a flood that fills every
// node's budget, admits exactly the bound. With latency below the grace
// the latency chain goes past it: pinned, so that a fix shows up here.
func TestClusterBoundTight(t *testing.T) {
	sc := Floor1().Sim()
	tests := []struct {
		pattern NodePattern
		latency time.Duration
		want    int64
	}{
		{TailsThen(sc, NodeFlood(sc)), 0, ClusterBound(sc)},
		{TailsThen(sc, NodeFlood(sc)), time.Millisecond, ClusterBound(sc)},
		{TailsThen(sc, LatencyChain()), 0, ClusterBound(sc)},
		{TailsThen(sc, LatencyChain()), time.Millisecond, 796}, // 5/4 x (L + N x f) + N x T
		{TailsThen(sc, LatencyChain()), 20 * time.Millisecond, 796},
	}
	for _, tt := range tests {
		sc := sc
		sc.Latency = tt.latency
		r, err := clustersim.RunClient(sc, tt.pattern.At, tt.pattern.Node())
		if err != nil {
			t.Fatal(err)
		}
		if int64(r.MaxInWindow) != tt.want {
			t.Errorf("%s, latency %v: %d admitted in a window, want %d", tt.pattern.Name, tt.latency, r.MaxInWindow, tt.want)
		}
	}
}
