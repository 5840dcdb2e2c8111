package nodecost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// WriteJSON prints rows one JSON object a line (Row's fields).
func WriteJSON(w io.Writer, rows []Row) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for _, r := range rows {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("nodecost: %w", err)
		}
	}
	return bw.Flush()
}

// WriteTable prints rows as a table, with a header saying what ran.
func WriteTable(w io.Writer, cfg Config, rows []Row) error {
	bw := bufio.NewWriter(w)
	sc := SimConfig(cfg, 0)
	fmt.Fprintf(bw, "scale: limiterd's real counter, limiter, decision layer and engine on N simulated nodes, the coordinator on;\n")
	if cfg.Latency > 0 {
		fmt.Fprintf(bw, "every message takes %v to reach its peer;\n", cfg.Latency)
	}
	if d := DefaultConfig(); cfg.Sync != d.Sync || cfg.Grace != d.Grace || cfg.Tolerance != d.Tolerance || cfg.LeaseShare != d.LeaseShare || cfg.LeaseTime != d.LeaseTime {
		fmt.Fprintf(bw, "not limiterd's defaults: sync every %v, delivery grace %g of it, tolerance %g, lease share %g, lease time %v (the bound column follows them);\n",
			sc.Sync, cfg.Grace, cfg.Tolerance, cfg.LeaseShare, cfg.LeaseTime)
	}
	fmt.Fprintf(bw, "limit %d per %v in %d slices; %d checks/s on each node, spread %s, over %d x N keys drawn Zipf(%g) (seed %d);\n",
		sc.Limit, sc.Window, sc.Slices, cfg.RatePerNode, cfg.Spread, cfg.KeysPerNode, cfg.Zipf, cfg.Seed)
	fmt.Fprintf(bw, "%v of model time; from %v for %v node %d is cut off both ways, taking no requests (fallback) or\n",
		cfg.Duration, cfg.CutAt, cfg.CutFor, cfg.CutNode)
	fmt.Fprintf(bw, "still taking its share and deciding alone (partition). Per node and model second;\n")
	fmt.Fprintf(bw, "engine: ns of engine time (Tick, Receive, asks) per check; alone: the same of node N-1 replayed on its own after the run;\n")
	fmt.Fprintf(bw, "wait: share of checks that asked another node;\n")
	fmt.Fprintf(bw, "ratio: most admitted for one judged key in a window / limit (bound: the derived worst case); false: false rejections\n")
	fmt.Fprintf(bw, "(unjudged: rejections of keys not judged, counted as false); heap and engine time depend on the machine\n\n")
	fmt.Fprintf(bw, "%-9s %5s %10s %9s %9s %9s %8s %8s %9s %9s %6s %6s %6s %6s %9s %7s %7s\n",
		"scenario", "nodes", "checks", "sync KB/s", "msgs/s", "coord KB/s", "engine", "alone", "heap MB", "pairs", "wait", "fallbk", "ratio", "bound", "false", "unjudged", "wall s")
	for _, r := range rows {
		fmt.Fprintf(bw, "%-9s %5d %10d %9.1f %9.0f %9.1f %8.0f %8.0f %9.1f %9.0f %6.3f %6.3f %6.3f %6.3f %9d %7d %7.1f\n",
			r.Scenario, r.Nodes, r.Checks, r.SyncBytesPerNodeS/1000, r.SyncMsgsPerNodeS, r.CoordBytesPerNodeS/1000,
			r.EngineNsPerCheck, r.EngineNsPerCheckAlone, r.HeapBytesPerNode/1e6, r.PairsPerNode, r.NetworkWaitShare, r.FallbackShare,
			r.WorstRatio, r.BoundRatio, r.FalseRejections, r.UnjudgedRejections, r.WallS)
	}
	if len(rows) == 0 {
		return bw.Flush()
	}
	fmt.Fprintf(bw, "\nwait by demand: the share of the checks that asked another node, by their key's checks per limit's worth of the run\n")
	fmt.Fprintf(bw, "%-9s %5s", "scenario", "nodes")
	for _, d := range rows[0].WaitByDemand {
		fmt.Fprintf(bw, " %20s", d.label())
	}
	fmt.Fprintln(bw)
	for _, r := range rows {
		fmt.Fprintf(bw, "%-9s %5d", r.Scenario, r.Nodes)
		for _, d := range r.WaitByDemand {
			fmt.Fprintf(bw, " %20s", fmt.Sprintf("%.4f%% of %d", 100*d.Share(), d.Checks))
		}
		fmt.Fprintln(bw)
	}
	return bw.Flush()
}
