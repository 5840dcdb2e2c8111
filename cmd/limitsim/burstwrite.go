package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/limiterd/limiterd/decision"
)

func runBurst(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("burst", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim burst

Evaluates the cross-node burst (SPEC.md, "Where the seed's own design falls
short", items 3 and 4) on limiterd's real counter, limiter, decision layer and
engine.Engine:
8 simulated nodes syncing every 0.2 s, a limit of 600 per 60 s in 12 slices,
one client for 180 s of model time, each request on the node the seed's LCG
draws (seed 20260730). The base cluster ticks all nodes at the same instant,
delivers at once and has one clock; the last tables vary one of these.
Settings: the per-node budget off, or on with a floor F: a node admits
while what its peers may not know of yet, plus one, is at most
f + (600 - what it knows of the window apart from that) / 8, with
f = ceil(F x 600 x (0.2 s + 0.05 s delivery grace) / 60 s); and coordinated,
limiterd's default: past its blind share b a node asks the key's
coordinator, and only without an answer within the 5 ms deadline does the
budget at floor 1 decide. The coordinated table shows how its checks were
decided: here, by the coordinator, or in fallback.

  NFR1     the most admitted in any 60 s interval, and its ratio to the
           limit, for client rates from 10/s to 10,000/s; then the bound
           derived for any client rate (docs/blind-interval.md)
  NFR2     false rejections of clients that never exceed their limit
  ticks    node i ticks i x D / 8 after node 0
  skew     node i's clock reads true time - D + 2D x i/7; with the largest
           peer offset the Syncers observed (the cluster's offset metric);
           once with ticks at the same true instant, once with each node
           ticking at multiples of 0.2 s on its own clock, as limiterd does
  latency  every message arrives D after its tick; then two patterns with
           chosen nodes: the post-tick burst (600 requests at 0 ms and 600
           at 200 ms, the first tick, round robin) and the latency chain
           (100 requests on each of nodes 0-3 at 200 ms, on nodes 4-7 at
           400 ms, on nodes 0-3 again at 450 ms) and 100 requests on every
           node at 0 ms and again at 250 ms, just after the delivery grace

The output is deterministic. It takes a few seconds; the command takes no
flags besides -h.
`)
	}
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	p := defaultBurstPlan()
	br, err := p.run()
	if err == nil {
		err = writeBurst(stdout, p, br)
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim burst: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// cell formats "admitted ratio" for the NFR1 columns.
func cell(n int) string { return fmt.Sprintf("%d %.3f", n, ratio(n, seedLimit)) }

// shortName is a pattern's name without its parenthesis, for narrow columns.
func shortName(name string) string {
	if i := strings.Index(name, " ("); i > 0 {
		return name[:i]
	}
	return name
}

// writeBurst prints the tables of limitsim burst.
func writeBurst(w io.Writer, p burstPlan, br burstResults) error {
	bw := bufio.NewWriter(w)
	sc := defaultSimConfig()
	fmt.Fprintf(bw, "cluster: %d nodes, sync %v, limit %d per %v in %d slices, %d s of model time, real counter, limiter and Syncer\n",
		sc.nodes, sc.sync, sc.limit, sc.window, sc.slices, p.durationMs/1000)
	fmt.Fprintf(bw, "one client, request i at floor(i*1000/rate) ms on the node drawn by the seed's LCG (seed %d)\n", seedLCGSeed)
	fmt.Fprintf(bw, "base: every node ticks at the same instant, messages arrive at once, one clock; %d runs, %d requests\n", br.runs, br.requests)

	header := func(first string, width int) {
		fmt.Fprintf(bw, "%-*s%10s", width, first, "requests")
		for _, s := range p.settings {
			fmt.Fprintf(bw, "%13s", s.name)
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "\nNFR1: most admitted in any %d s interval, and / %d (NFR1 allows %.1fx)\n", seedWindowMs/1000, seedLimit, nfr1Ratio)
	header("client rate", 14)
	for i, rate := range p.rates {
		fmt.Fprintf(bw, "%-14s%10d", fmt.Sprintf("%g/s", rate), br.nfr1[i][0].requests)
		for _, r := range br.nfr1[i] {
			fmt.Fprintf(bw, "%13s", cell(r.maxInWindow))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "%-24s", "bound, any rate")
	for _, s := range p.settings {
		fmt.Fprintf(bw, "%13s", cell(int(clusterBound(s.sim()))))
	}
	fmt.Fprintf(bw, "\n%-24s", "floor f per node")
	for _, s := range p.settings {
		if !s.budget {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", budgetFloorRequests(s.sim()))
	}
	fmt.Fprintf(bw, "\n%-24s", "blind share b per node")
	for _, s := range p.settings {
		if !s.coordinated {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", blindShare(s.sim()))
	}
	fmt.Fprintf(bw, "\n%-24s", "lease pool per key")
	for _, s := range p.settings {
		if !s.coordinated {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", s.sim().shares().Leases)
	}
	fmt.Fprintf(bw, "\n%-24s%13d\n", "tail T per node", nodeTail(sc))

	fmt.Fprintf(bw, "\nNFR2: false rejections of clients that never exceed their limit (NFR2 allows none)\n")
	header("pattern", 30)
	for i, pat := range p.patterns {
		fmt.Fprintf(bw, "%-30s%10d", pat.name, br.nfr2[i][0].requests)
		for _, r := range br.nfr2[i] {
			fmt.Fprintf(bw, "%13d", r.falseRejections)
		}
		fmt.Fprintln(bw)
	}

	if c := slices.IndexFunc(p.settings, func(s burstSetting) bool { return s.coordinated }); c >= 0 {
		fmt.Fprintf(bw, "\ncoordinated: how the checks were decided: here (the node alone, within its blind share, on a lease\n")
		fmt.Fprintf(bw, "from the key's coordinator, or on a full window; of which on a lease), by the key's coordinator, or in\n")
		fmt.Fprintf(bw, "fallback (the budget: no answer within the %v deadline)\n", decision.DefaultDeadline)
		fmt.Fprintf(bw, "%-30s%10s%10s%10s%13s%10s\n", "client rate or pattern", "requests", "here", "on lease", "coordinator", "fallback")
		decided := func(name string, r clientRun) {
			fmt.Fprintf(bw, "%-30s%10d%10d%10d%13d%10d\n", name, r.requests, r.stats.here, r.stats.leased, r.stats.coordinator, r.stats.fallback)
		}
		for i, rate := range p.rates {
			decided(fmt.Sprintf("%g/s", rate), br.nfr1[i][c])
		}
		for i, pat := range p.patterns {
			decided(pat.name, br.nfr2[i][c])
		}
	}

	writeVaried(bw, p, "\nticks: node i ticks i x D / 8 after node 0 (real nodes' timers have unrelated phases)",
		"stagger D", p.staggers, p.staggerRates, p.staggerPatterns, nil, br.stagger)
	writeVaried(bw, p, "\nskew: node i's clock reads true time - D + 2D x i/7; ticks at the same true instant",
		"skew D", p.skews, p.skewRates, p.skewPatterns, nil, br.skew)
	writeVaried(bw, p, "\nskew, ticks on each node's clock (as limiterd ticks): the same clocks, each node ticking at multiples of 0.2 s on its own",
		"skew D", p.skews, p.skewRates, p.skewPatterns, nil, br.skewTick)
	writeVaried(bw, p, "\nlatency: every message arrives D after its tick",
		"latency D", p.latencies, p.latencyRates, nil, p.latencyPatterns, br.latency)
	return bw.Flush()
}

// writeVaried prints one varied-dimension table: per value and setting, the
// most admitted in a window for each rate and each extra pattern, the
// false rejections of each compliant pattern, with skew the largest
// peer offset observed, and for the coordinated setting how many of the
// row's checks the coordinator decided and how many fell back.
func writeVaried(bw *bufio.Writer, p burstPlan, title, dim string, values []time.Duration, rates []float64, pats []int, extra []nodePattern, rows [][]clientRun) {
	fmt.Fprintln(bw, title)
	fmt.Fprintln(bw, "rates: most admitted in any 60 s interval (true time); patterns: false rejections")
	fmt.Fprintf(bw, "%-11s%-11s", dim, "setting")
	for _, rate := range rates {
		fmt.Fprintf(bw, "%13s", fmt.Sprintf("%g/s", rate))
	}
	for _, ep := range extra {
		fmt.Fprintf(bw, "%18s", ep.name)
	}
	for _, pi := range pats {
		name := shortName(p.patterns[pi].name)
		fmt.Fprintf(bw, "%*s", len(name)+2, name)
	}
	skew := dim == "skew D"
	if skew {
		fmt.Fprintf(bw, "%14s", "peer offset")
	}
	fmt.Fprintf(bw, "%13s%10s\n", "coordinator", "fallback")
	vs := variedSettings()
	for i, v := range values {
		for j, s := range vs {
			row := rows[len(vs)*i+j]
			fmt.Fprintf(bw, "%-11v%-11s", v, s.name)
			for k := range rates {
				fmt.Fprintf(bw, "%13s", cell(row[k].maxInWindow))
			}
			for k := range extra {
				fmt.Fprintf(bw, "%18s", cell(row[len(rates)+k].maxInWindow))
			}
			for k, pi := range pats {
				fmt.Fprintf(bw, "%*d", len(shortName(p.patterns[pi].name))+2, row[len(rates)+len(extra)+k].falseRejections)
			}
			if skew {
				off := int64(0)
				for _, r := range row {
					off = max(off, r.maxOffsetMs)
				}
				fmt.Fprintf(bw, "%14s", fmt.Sprintf("%d ms", off))
			}
			if !s.coordinated {
				fmt.Fprintf(bw, "%13s%10s\n", "-", "-")
				continue
			}
			var coord, fallback int
			for _, r := range row {
				coord, fallback = coord+r.stats.coordinator, fallback+r.stats.fallback
			}
			fmt.Fprintf(bw, "%13d%10d\n", coord, fallback)
		}
	}
}
