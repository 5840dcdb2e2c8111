package burst

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// cell formats "admitted ratio" for the NFR1 columns.
func cell(n int) string { return fmt.Sprintf("%d %.3f", n, seedstudy.Ratio(n, seedstudy.Limit)) }

// shortName is a pattern's name without its parenthesis, for narrow columns.
func shortName(name string) string {
	if i := strings.Index(name, " ("); i > 0 {
		return name[:i]
	}
	return name
}

// Write prints the tables of limitsim burst.
func Write(w io.Writer, p Plan, br Results) error {
	bw := bufio.NewWriter(w)
	sc := clustersim.DefaultConfig()
	fmt.Fprintf(bw, "cluster: %d nodes, sync %v, limit %d per %v in %d slices, %d s of model time, real counter, limiter and Engine\n",
		sc.Nodes, sc.Sync, sc.Limit, sc.Window, sc.Slices, p.DurationMs/1000)
	fmt.Fprintf(bw, "one client, request i at floor(i*1000/rate) ms on the node drawn by the seed's LCG (seed %d)\n", seed.LCGSeed)
	fmt.Fprintf(bw, "base: every node ticks at the same instant, messages arrive at once, one clock; %d runs, %d requests\n", br.Runs, br.Requests)

	header := func(first string, width int) {
		fmt.Fprintf(bw, "%-*s%10s", width, first, "requests")
		for _, s := range p.Settings {
			fmt.Fprintf(bw, "%13s", s.Name)
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "\nNFR1: most admitted in any %d s interval, and / %d (NFR1 allows %.1fx)\n", seedstudy.WindowMs/1000, seedstudy.Limit, seedstudy.NFR1Ratio)
	header("client rate", 14)
	for i, rate := range p.Rates {
		fmt.Fprintf(bw, "%-14s%10d", fmt.Sprintf("%g/s", rate), br.NFR1[i][0].Requests)
		for _, r := range br.NFR1[i] {
			fmt.Fprintf(bw, "%13s", cell(r.MaxInWindow))
		}
		fmt.Fprintln(bw)
	}
	fmt.Fprintf(bw, "%-24s", "bound, any rate")
	for _, s := range p.Settings {
		fmt.Fprintf(bw, "%13s", cell(int(ClusterBound(s.Sim()))))
	}
	fmt.Fprintf(bw, "\n%-24s", "floor f per node")
	for _, s := range p.Settings {
		if !s.Budget {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", BudgetFloorRequests(s.Sim()))
	}
	fmt.Fprintf(bw, "\n%-24s", "blind share b per node")
	for _, s := range p.Settings {
		if !s.Coordinated {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", BlindShare(s.Sim()))
	}
	fmt.Fprintf(bw, "\n%-24s", "lease pool per key")
	for _, s := range p.Settings {
		if !s.Coordinated {
			fmt.Fprintf(bw, "%13s", "-")
			continue
		}
		fmt.Fprintf(bw, "%13d", s.Sim().Shares().Leases)
	}
	fmt.Fprintf(bw, "\n%-24s%13d\n", "tail T per node", NodeTail(sc))

	fmt.Fprintf(bw, "\nNFR2: false rejections of clients that never exceed their limit (NFR2 allows none)\n")
	header("pattern", 30)
	for i, pat := range p.Patterns {
		fmt.Fprintf(bw, "%-30s%10d", pat.Name, br.NFR2[i][0].Requests)
		for _, r := range br.NFR2[i] {
			fmt.Fprintf(bw, "%13d", r.FalseRejections)
		}
		fmt.Fprintln(bw)
	}

	if c := slices.IndexFunc(p.Settings, func(s Setting) bool { return s.Coordinated }); c >= 0 {
		fmt.Fprintf(bw, "\ncoordinated: how the checks were decided: here (the node alone, within its blind share, on a lease\n")
		fmt.Fprintf(bw, "from the key's coordinator, or on a full window; of which on a lease), by the key's coordinator, or in\n")
		fmt.Fprintf(bw, "fallback (the budget: no answer within the %v deadline)\n", decision.DefaultDeadline)
		fmt.Fprintf(bw, "%-30s%10s%10s%10s%13s%10s\n", "client rate or pattern", "requests", "here", "on lease", "coordinator", "fallback")
		decided := func(name string, r clustersim.ClientRun) {
			fmt.Fprintf(bw, "%-30s%10d%10d%10d%13d%10d\n", name, r.Requests, r.Stats.Here, r.Stats.Leased, r.Stats.Coordinator, r.Stats.Fallback)
		}
		for i, rate := range p.Rates {
			decided(fmt.Sprintf("%g/s", rate), br.NFR1[i][c])
		}
		for i, pat := range p.Patterns {
			decided(pat.Name, br.NFR2[i][c])
		}
	}

	writeVaried(bw, p, "\nticks: node i ticks i x D / 8 after node 0 (real nodes' timers have unrelated phases)",
		"stagger D", p.Staggers, p.StaggerRates, p.StaggerPatterns, nil, br.Stagger)
	writeVaried(bw, p, "\nskew: node i's clock reads true time - D + 2D x i/7; ticks at the same true instant",
		"skew D", p.Skews, p.SkewRates, p.SkewPatterns, nil, br.Skew)
	writeVaried(bw, p, "\nskew, ticks on each node's clock (as limiterd ticks): the same clocks, each node ticking at multiples of 0.2 s on its own",
		"skew D", p.Skews, p.SkewRates, p.SkewPatterns, nil, br.SkewTick)
	writeVaried(bw, p, "\nlatency: every message arrives D after its tick",
		"latency D", p.Latencies, p.LatencyRates, nil, p.LatencyPatterns, br.Latency)
	return bw.Flush()
}

// writeVaried prints one varied-dimension table: per value and setting, the
// most admitted in a window for each rate and each extra pattern, the
// false rejections of each compliant pattern, with skew the largest
// peer offset observed, and for the coordinated setting how many of the
// row's checks the coordinator decided and how many fell back.
func writeVaried(bw *bufio.Writer, p Plan, title, dim string, values []time.Duration, rates []float64, pats []int, extra []NodePattern, rows [][]clustersim.ClientRun) {
	fmt.Fprintln(bw, title)
	fmt.Fprintln(bw, "rates: most admitted in any 60 s interval (true time); patterns: false rejections")
	fmt.Fprintf(bw, "%-11s%-11s", dim, "setting")
	for _, rate := range rates {
		fmt.Fprintf(bw, "%13s", fmt.Sprintf("%g/s", rate))
	}
	for _, ep := range extra {
		fmt.Fprintf(bw, "%18s", ep.Name)
	}
	for _, pi := range pats {
		name := shortName(p.Patterns[pi].Name)
		fmt.Fprintf(bw, "%*s", len(name)+2, name)
	}
	skew := dim == "skew D"
	if skew {
		fmt.Fprintf(bw, "%14s", "peer offset")
	}
	fmt.Fprintf(bw, "%13s%10s\n", "coordinator", "fallback")
	vs := VariedSettings()
	for i, v := range values {
		for j, s := range vs {
			row := rows[len(vs)*i+j]
			fmt.Fprintf(bw, "%-11v%-11s", v, s.Name)
			for k := range rates {
				fmt.Fprintf(bw, "%13s", cell(row[k].MaxInWindow))
			}
			for k := range extra {
				fmt.Fprintf(bw, "%18s", cell(row[len(rates)+k].MaxInWindow))
			}
			for k, pi := range pats {
				fmt.Fprintf(bw, "%*d", len(shortName(p.Patterns[pi].Name))+2, row[len(rates)+len(extra)+k].FalseRejections)
			}
			if skew {
				off := int64(0)
				for _, r := range row {
					off = max(off, r.MaxOffsetMs)
				}
				fmt.Fprintf(bw, "%14s", fmt.Sprintf("%d ms", off))
			}
			if !s.Coordinated {
				fmt.Fprintf(bw, "%13s%10s\n", "-", "-")
				continue
			}
			var coord, fallback int
			for _, r := range row {
				coord, fallback = coord+r.Stats.Coordinator, fallback+r.Stats.Fallback
			}
			fmt.Fprintf(bw, "%13d%10d\n", coord, fallback)
		}
	}
}
