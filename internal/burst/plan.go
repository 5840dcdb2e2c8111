package burst

import (
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// Plan is what limitsim burst runs; tests run a smaller one.
type Plan struct {
	DurationMs int64
	Rates      []float64 // NFR1 table: client rates, requests per second
	Settings   []Setting
	Patterns   []CompliantPattern // NFR2 table
	// One dimension varied at a time, for each of VariedSettings.
	Staggers, Skews, Latencies    []time.Duration
	StaggerRates, SkewRates       []float64
	LatencyRates                  []float64
	SkewPatterns, StaggerPatterns []int // indexes into Patterns
	// LatencyPatterns are clients with chosen nodes that the latency
	// table runs after its rates: the holes latency opens in the budget.
	LatencyPatterns []NodePattern
}

// DefaultPlan is the plan of limitsim burst: three windows of model
// time, so that steady state with expiring slices is included.
func DefaultPlan() Plan {
	d := int64(3 * seedstudy.WindowMs)
	return Plan{
		DurationMs: d,
		Rates:      []float64{10, 20, 50, 90, 200, 1000, 10000},
		Settings: []Setting{
			NoBudget(), AtFloor(0.5), Floor1(), AtFloor(2), AtFloor(4),
			{Name: "1, grace 0", Budget: true, Floor: 1, NoGrace: true},
			Coordinated(),
		},
		Patterns:        CompliantPatterns(d),
		Staggers:        []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond},
		StaggerRates:    []float64{90, 1000, 10000},
		StaggerPatterns: []int{2, 3},
		Skews:           []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, time.Second},
		SkewRates:       []float64{90, 1000},
		SkewPatterns:    []int{1, 2, 3},
		Latencies:       []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond},
		LatencyRates:    []float64{1000, 10000},
		LatencyPatterns: []NodePattern{PostTickBurst(), LatencyChain(), AfterGrace()},
	}
}

// Results holds every run of a plan.
type Results struct {
	NFR1     [][]clustersim.ClientRun // [rate][setting]
	NFR2     [][]clustersim.ClientRun // [pattern][setting]
	Stagger  [][]clustersim.ClientRun // [stagger x VariedSettings][StaggerRates, then StaggerPatterns]
	Skew     [][]clustersim.ClientRun // [skew x VariedSettings][SkewRates, then SkewPatterns]
	SkewTick [][]clustersim.ClientRun // the same with ClockTicks
	Latency  [][]clustersim.ClientRun // [latency x VariedSettings][LatencyRates, then LatencyPatterns]
	Runs     int
	Requests int
}

// job is one run of the plan, writing its result to *out.
type job struct {
	name string
	sc   clustersim.Config
	at   func() []int64
	node func() func(int) int
	out  *clustersim.ClientRun
}

// Run executes every run of the plan, spread over GOMAXPROCS goroutines.
// Runs are independent and each writes its own slot, so the results do not
// depend on scheduling.
func (p Plan) Run() (Results, error) {
	var br Results
	var jobs []job
	lcg := func() func(int) int { return clustersim.LCGNodes(seed.LCGSeed, clustersim.DefaultConfig().Nodes) }
	steady := func(rate float64) func() []int64 {
		return func() []int64 { return clustersim.SteadyAt(rate, p.DurationMs) }
	}
	fixed := func(at []int64) func() []int64 { return func() []int64 { return at } }
	grid := func(rows int, cols int) [][]clustersim.ClientRun {
		g := make([][]clustersim.ClientRun, rows)
		for i := range g {
			g[i] = make([]clustersim.ClientRun, cols)
		}
		return g
	}
	br.NFR1 = grid(len(p.Rates), len(p.Settings))
	for i, rate := range p.Rates {
		for j, s := range p.Settings {
			jobs = append(jobs, job{fmt.Sprintf("%g/s, %s", rate, s.Name), s.Sim(), steady(rate), lcg, &br.NFR1[i][j]})
		}
	}
	br.NFR2 = grid(len(p.Patterns), len(p.Settings))
	for i, pat := range p.Patterns {
		for j, s := range p.Settings {
			jobs = append(jobs, job{pat.Name + ", " + s.Name, s.Sim(), fixed(pat.At), lcg, &br.NFR2[i][j]})
		}
	}
	// vary adds the runs of one varied dimension: for each value and each
	// varied setting, the over-limit rates then the compliant patterns.
	vs := VariedSettings()
	vary := func(values []time.Duration, set func(*clustersim.Config, time.Duration), rates []float64, pats []int, extra []NodePattern) [][]clustersim.ClientRun {
		cols := len(rates) + len(pats) + len(extra)
		g := grid(len(vs)*len(values), cols)
		for i, v := range values {
			for j, s := range vs {
				sc := s.Sim()
				set(&sc, v)
				row := g[len(vs)*i+j]
				for k, rate := range rates {
					jobs = append(jobs, job{fmt.Sprintf("%v, %g/s, %s", v, rate, s.Name), sc, steady(rate), lcg, &row[k]})
				}
				for k, ep := range extra {
					jobs = append(jobs, job{fmt.Sprintf("%v, %s, %s", v, ep.Name, s.Name), sc, fixed(ep.At), ep.Node, &row[len(rates)+k]})
				}
				for k, pi := range pats {
					jobs = append(jobs, job{fmt.Sprintf("%v, %s, %s", v, p.Patterns[pi].Name, s.Name), sc, fixed(p.Patterns[pi].At), lcg, &row[len(rates)+len(extra)+k]})
				}
			}
		}
		return g
	}
	br.Stagger = vary(p.Staggers, func(sc *clustersim.Config, v time.Duration) { sc.Stagger = v }, p.StaggerRates, p.StaggerPatterns, nil)
	br.Skew = vary(p.Skews, func(sc *clustersim.Config, v time.Duration) { sc.Skew = v }, p.SkewRates, p.SkewPatterns, nil)
	br.SkewTick = vary(p.Skews, func(sc *clustersim.Config, v time.Duration) { sc.Skew, sc.ClockTicks = v, true }, p.SkewRates, p.SkewPatterns, nil)
	br.Latency = vary(p.Latencies, func(sc *clustersim.Config, v time.Duration) { sc.Latency = v }, p.LatencyRates, nil, p.LatencyPatterns)

	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				r, err := clustersim.RunClient(j.sc, j.at(), j.node())
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", j.name, err)
					continue
				}
				*j.out = r
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return br, err
		}
		br.Runs++
		br.Requests += jobs[i].out.Requests
	}
	return br, nil
}
