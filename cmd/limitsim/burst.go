package main

import (
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// The cross-node burst evaluation (SPEC "Where the seed's own design falls
// short", items 3 and 4) runs limiterd's real code on the seed's cluster (8
// nodes, 0.2 s sync, 600 per 60 s in 12 slices) with ticks at the same
// instant on every node, no latency and no clock skew, one client spread
// over the nodes by the seed's LCG, then varies one of tick phase, clock
// skew and latency at a time.

// burstSetting is one setting of the cluster: the budget alone (off, or on
// with a floor, and with limiterd's delivery grace unless noGrace), or
// coordinated, limiterd's default.
type burstSetting struct {
	name    string
	budget  bool
	floor   float64
	noGrace bool // DeliveryGrace 0: what the grace costs, at no latency
	// coordinated: the key's coordinator decides past a node's blind
	// share, the budget (floor) only when no answer comes in time.
	coordinated bool
}

// The settings the varied-dimension tables compare.
func noBudget() burstSetting { return burstSetting{name: "no budget"} }
func floor1() burstSetting   { return burstSetting{name: "floor 1", budget: true, floor: 1} }

// coordinatedSetting is limiterd's default: coordinated at the margin,
// with the default budget (floor 1) as the fallback.
func coordinatedSetting() burstSetting {
	return burstSetting{name: "coordinated", budget: true, floor: 1, coordinated: true}
}

// floor returns the budget at floor f.
func floor(f float64) burstSetting {
	return burstSetting{name: fmt.Sprintf("floor %g", f), budget: true, floor: f}
}

// variedSettings are the rows of each varied dimension, in order.
func variedSettings() []burstSetting {
	return []burstSetting{noBudget(), floor1(), coordinatedSetting()}
}

// sim returns the base cluster with this setting.
func (bs burstSetting) sim() simConfig {
	sc := defaultSimConfig()
	sc.budget, sc.floor, sc.uncoordinated = bs.budget, bs.floor, !bs.coordinated
	if bs.noGrace {
		sc.grace = 0
	}
	return sc
}

// compliantPattern is a client that never exceeds its limit in any window.
type compliantPattern struct {
	name string
	at   []int64
}

// burstPlan is what limitsim burst runs; tests run a smaller one.
type burstPlan struct {
	durationMs int64
	rates      []float64 // NFR1 table: client rates, requests per second
	settings   []burstSetting
	patterns   []compliantPattern // NFR2 table
	// One dimension varied at a time, with the budget off and at floor 1.
	staggers, skews, latencies    []time.Duration
	staggerRates, skewRates       []float64
	latencyRates                  []float64
	skewPatterns, staggerPatterns []int // indexes into patterns
	// latencyPatterns are clients with chosen nodes that the latency
	// table runs after its rates: the holes latency opens in the budget.
	latencyPatterns []nodePattern
}

// defaultBurstPlan is the plan of limitsim burst: three windows of model
// time, so that steady state with expiring slices is included.
func defaultBurstPlan() burstPlan {
	d := int64(3 * seedWindowMs)
	return burstPlan{
		durationMs: d,
		rates:      []float64{10, 20, 50, 90, 200, 1000, 10000},
		settings: []burstSetting{
			noBudget(), floor(0.5), floor1(), floor(2), floor(4),
			{name: "1, grace 0", budget: true, floor: 1, noGrace: true},
			coordinatedSetting(),
		},
		patterns:        compliantPatterns(d),
		staggers:        []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 200 * time.Millisecond},
		staggerRates:    []float64{90, 1000, 10000},
		staggerPatterns: []int{2, 3},
		skews:           []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond, time.Second},
		skewRates:       []float64{90, 1000},
		skewPatterns:    []int{1, 2, 3},
		latencies:       []time.Duration{0, time.Millisecond, 5 * time.Millisecond, 50 * time.Millisecond, 60 * time.Millisecond},
		latencyRates:    []float64{1000, 10000},
		latencyPatterns: []nodePattern{postTickBurst(), latencyChain(), afterGrace()},
	}
}

// compliantPatterns are clients at or under their limit in every window:
// steady ones, and a full limit at the start of every window, spread over
// 5 s (the seed's intermittent pattern), 1 s, one sync interval, or 1 ms.
func compliantPatterns(durationMs int64) []compliantPattern {
	return []compliantPattern{
		{"steady 0.5x (5/s)", steadyAt(5, durationMs)},
		{"steady 0.9x (9/s)", steadyAt(9, durationMs)},
		{"steady 1.0x (10/s)", steadyAt(10, durationMs)},
		{"600 over 5 s a minute (seed)", burstsAt(seedLimit, seedWindowMs, seedSliceMs, durationMs)},
		{"600 over 1 s a minute", burstsAt(seedLimit, seedWindowMs, 1000, durationMs)},
		{"600 over 200 ms a minute", burstsAt(seedLimit, seedWindowMs, 200, durationMs)},
		{"600 at one instant a minute", burstsAt(seedLimit, seedWindowMs, 1, durationMs)},
	}
}

// nodePattern is a client whose requests go to chosen nodes: request i
// at at[i] on node nodes[i].
type nodePattern struct {
	name  string
	at    []int64
	nodes []int
}

// postTickBurst was the budget's post-tick hole before the delivery grace:
// 600 requests at 0 ms and 600 more at 200 ms, the instant of the first
// tick, request i on node i mod 8. With any latency the second burst met
// nodes that had reset their budget but not yet heard the first burst.
func postTickBurst() nodePattern {
	p := nodePattern{name: "post-tick burst", at: make([]int64, 2*seedLimit), nodes: make([]int, 2*seedLimit)}
	for i := range p.at {
		p.nodes[i] = i % defaultSimConfig().nodes
		if i >= seedLimit {
			p.at[i] = 200
		}
	}
	return p
}

// latencyChain is the hole the delivery grace leaves for 0 < latency <
// grace (docs/blind-interval.md, "Latency"): nodes 0-3 fill their budget
// in one interval (100 requests each at 200 ms); nodes 4-7 fill theirs at
// 400 ms, right after the tick, before those messages arrive, so their
// shares ignore nodes 0-3's admissions; at 450 ms the grace is over and
// nodes 0-3 no longer count their previous interval, although nodes 4-7's
// admissions, which did not account for it, are not known to them yet.
// With tails hidden in expired slices on top (chainWithTails) it is the
// worst case found for that latency.
func latencyChain() nodePattern {
	p := nodePattern{name: "latency chain"}
	for _, b := range []struct {
		at    int64
		nodes []int
	}{{200, []int{0, 1, 2, 3}}, {400, []int{4, 5, 6, 7}}, {450, []int{0, 1, 2, 3}}} {
		for _, n := range b.nodes {
			for range 100 {
				p.at, p.nodes = append(p.at, b.at), append(p.nodes, n)
			}
		}
	}
	return p
}

// afterGrace is the hole latency above the delivery grace leaves: 100
// requests on every node at 0 ms and again at 250 ms, when the grace after
// the tick at 200 ms is over: a node then no longer counts its first burst
// as unacknowledged, and with more latency than the grace its peers have
// not merged it yet.
func afterGrace() nodePattern {
	p := nodePattern{name: "after the grace"}
	for _, at := range []int64{0, 250} {
		for n := range defaultSimConfig().nodes {
			for range 100 {
				p.at, p.nodes = append(p.at, at), append(p.nodes, n)
			}
		}
	}
	return p
}

// nodeFlood is 100 requests on every node at 0 ms: more than any node's
// budget in one interval.
func nodeFlood(sc simConfig) nodePattern {
	p := nodePattern{name: "flood"}
	for n := range sc.nodes {
		for range 100 {
			p.at, p.nodes = append(p.at, 0), append(p.nodes, n)
		}
	}
	return p
}

// tailsThen prefixes p with what makes the tail term of the bound real:
// every node opens a slice at 0 ms with one request and adds its tail T at
// 300 ms; p is shifted to start one window later, when those slices have
// expired and every node sees an empty window, but the tails still lie in
// the window [300 ms, 60.3 s) with everything p admits in its first 300 ms.
func tailsThen(sc simConfig, p nodePattern) nodePattern {
	q := nodePattern{name: p.name + " after tails"}
	for n := range sc.nodes {
		q.at, q.nodes = append(q.at, 0), append(q.nodes, n)
	}
	for n := range sc.nodes {
		for range nodeTail(sc) {
			q.at, q.nodes = append(q.at, 300), append(q.nodes, n)
		}
	}
	shift := sc.window.Milliseconds() - p.at[0]
	for i, at := range p.at {
		q.at, q.nodes = append(q.at, at+shift), append(q.nodes, p.nodes[i])
	}
	return q
}

// node returns the pattern's node choice.
func (p nodePattern) node() func(int) int { return func(i int) int { return p.nodes[i] } }

// graceMs is the delivery grace in ms, as counter/cluster.go computes it.
func graceMs(sc simConfig) int64 {
	return int64(sc.grace * float64(sc.sync.Milliseconds()))
}

// budgetFloorRequests is the budget's per-node floor f, as
// counter/cluster.go computes it: BudgetFloor x the requests a client at
// its limit rate sends in a sync interval plus the delivery grace (the
// longest span a node counts as unacknowledged), rounded up.
func budgetFloorRequests(sc simConfig) int64 {
	span := float64(sc.sync.Milliseconds() + graceMs(sc))
	return int64(math.Ceil(sc.floor * float64(sc.limit) * span / float64(sc.window.Milliseconds())))
}

// nodeTail is the most requests one node's expired slice may hide, as
// the nodes' counters compute it (counter.Counter.Shares).
func nodeTail(sc simConfig) int64 { return sc.shares().Tail }

// blindShare is a node's blind share b of a coordinated cluster, as the
// nodes' counters compute it (counter.Counter.Shares).
func blindShare(sc simConfig) int64 { return sc.shares().Blind }

// clusterBound is the derived bound (docs/blind-interval.md) on what the
// cluster admits of one key in any window-long interval, for any client
// rate, with ticks at the same instant, no latency and no skew. With the
// coordinator (every answer in time) it is the counter's own WorstCase,
// L + N x b + Λ + N x T, b the blind share and Λ the lease pool (package
// counter, "Coordination at the margin"). Without
// the budget it is N x (L + T), T the hidden tail of one node's slices.
// With it, if C of the window is known to every node at the last tick,
// each node admits at most min(L - C, max(1, f + (L - C) / N)) after it,
// f the per-node floor; the bound is the most C plus N of those can make,
// plus N x T: L + N x f + N x T whenever f >= 1 and N divides L.
func clusterBound(sc simConfig) int64 {
	n := int64(sc.nodes)
	if !sc.uncoordinated && sc.nodes > 1 {
		sh := sc.shares()
		return sc.limit + n*sh.Blind + sh.Leases + n*sh.Tail
	}
	if !sc.budget {
		return n * (sc.limit + nodeTail(sc))
	}
	f, l := budgetFloorRequests(sc), sc.limit
	var most int64
	for c := int64(0); c < l; c++ {
		per := min(l-c, max(1, f+(l-c)/n))
		most = max(most, c+n*per)
	}
	return most + n*nodeTail(sc)
}

// burstResults holds every run of a plan.
type burstResults struct {
	nfr1     [][]clientRun // [rate][setting]
	nfr2     [][]clientRun // [pattern][setting]
	stagger  [][]clientRun // [stagger x variedSettings][staggerRates, then staggerPatterns]
	skew     [][]clientRun // [skew x variedSettings][skewRates, then skewPatterns]
	skewTick [][]clientRun // the same with clockTicks
	latency  [][]clientRun // [latency x variedSettings][latencyRates, then latencyPatterns]
	runs     int
	requests int
}

// job is one run of the plan, writing its result to *out.
type job struct {
	name string
	sc   simConfig
	at   func() []int64
	node func() func(int) int
	out  *clientRun
}

// run executes every run of the plan, spread over GOMAXPROCS goroutines.
// Runs are independent and each writes its own slot, so the results do not
// depend on scheduling.
func (p burstPlan) run() (burstResults, error) {
	var br burstResults
	var jobs []job
	lcg := func() func(int) int { return lcgNodes(seedLCGSeed, defaultSimConfig().nodes) }
	steady := func(rate float64) func() []int64 { return func() []int64 { return steadyAt(rate, p.durationMs) } }
	fixed := func(at []int64) func() []int64 { return func() []int64 { return at } }
	grid := func(rows int, cols int) [][]clientRun {
		g := make([][]clientRun, rows)
		for i := range g {
			g[i] = make([]clientRun, cols)
		}
		return g
	}
	br.nfr1 = grid(len(p.rates), len(p.settings))
	for i, rate := range p.rates {
		for j, s := range p.settings {
			jobs = append(jobs, job{fmt.Sprintf("%g/s, %s", rate, s.name), s.sim(), steady(rate), lcg, &br.nfr1[i][j]})
		}
	}
	br.nfr2 = grid(len(p.patterns), len(p.settings))
	for i, pat := range p.patterns {
		for j, s := range p.settings {
			jobs = append(jobs, job{pat.name + ", " + s.name, s.sim(), fixed(pat.at), lcg, &br.nfr2[i][j]})
		}
	}
	// vary adds the runs of one varied dimension: for each value and each
	// varied setting, the over-limit rates then the compliant patterns.
	vs := variedSettings()
	vary := func(values []time.Duration, set func(*simConfig, time.Duration), rates []float64, pats []int, extra []nodePattern) [][]clientRun {
		cols := len(rates) + len(pats) + len(extra)
		g := grid(len(vs)*len(values), cols)
		for i, v := range values {
			for j, s := range vs {
				sc := s.sim()
				set(&sc, v)
				row := g[len(vs)*i+j]
				for k, rate := range rates {
					jobs = append(jobs, job{fmt.Sprintf("%v, %g/s, %s", v, rate, s.name), sc, steady(rate), lcg, &row[k]})
				}
				for k, ep := range extra {
					jobs = append(jobs, job{fmt.Sprintf("%v, %s, %s", v, ep.name, s.name), sc, fixed(ep.at), ep.node, &row[len(rates)+k]})
				}
				for k, pi := range pats {
					jobs = append(jobs, job{fmt.Sprintf("%v, %s, %s", v, p.patterns[pi].name, s.name), sc, fixed(p.patterns[pi].at), lcg, &row[len(rates)+len(extra)+k]})
				}
			}
		}
		return g
	}
	br.stagger = vary(p.staggers, func(sc *simConfig, v time.Duration) { sc.stagger = v }, p.staggerRates, p.staggerPatterns, nil)
	br.skew = vary(p.skews, func(sc *simConfig, v time.Duration) { sc.skew = v }, p.skewRates, p.skewPatterns, nil)
	br.skewTick = vary(p.skews, func(sc *simConfig, v time.Duration) { sc.skew, sc.clockTicks = v, true }, p.skewRates, p.skewPatterns, nil)
	br.latency = vary(p.latencies, func(sc *simConfig, v time.Duration) { sc.latency = v }, p.latencyRates, nil, p.latencyPatterns)

	errs := make([]error, len(jobs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range runtime.GOMAXPROCS(0) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				r, err := runClient(j.sc, j.at(), j.node())
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
		br.runs++
		br.requests += jobs[i].out.requests
	}
	return br, nil
}
