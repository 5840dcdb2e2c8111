package scale

import (
	"bufio"
	"fmt"
	"io"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/burst"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// perNodeSec is total spread over n nodes and the measured seconds.
func (r Row) perNodeSec(total int64, n int) float64 {
	return float64(total) / float64(n) / float64(r.Seconds)
}

// msPerSec is ns spent over the measurement as ms per model second.
func (r Row) msPerSec(ns int64) float64 { return float64(ns) / 1e6 / float64(r.Seconds) }

// Write prints the tables of limitsim scale --mesh. Without cfg.Cost the
// machine-dependent columns print "-".
func Write(w io.Writer, cfg Config, rows []Row) error {
	bw := bufio.NewWriter(w)
	sc := clustersim.BudgetConfig() // the design the load runs (load.go)
	load := fmt.Sprintf("%d checks/s in total", cfg.Rate)
	if cfg.PerNode > 0 {
		load = fmt.Sprintf("%d checks/s on each node", cfg.PerNode)
	}
	fmt.Fprintf(bw, "scale: limiterd's real counter, limiter and engine.Engine on N simulated nodes; limit %d per %v in %d slices, budget on\n",
		sc.Limit, sc.Window, sc.Slices)
	fmt.Fprintf(bw, "load: %s over %d keys, request i at floor(i*1000/rate) ms on node i mod N, its key drawn by the seed's LCG (seed %d)\n",
		load, cfg.Keys, cfg.Seed)
	ec := engine.DefaultConfig("node-0") // what newLoad's engines run with
	fmt.Fprintf(bw, "sync: every %v, all nodes at the same instant, in messages of at most %d bytes to every peer, arriving at once; anti-entropy every %v\n",
		sc.Sync, ec.DatagramBytes, ec.AntiEntropyInterval)
	fmt.Fprintf(bw, "warm-up %v (only node 0 receives), then %d s measured (every node receives every message); per node and per second of model time\n",
		cfg.Warmup, cfg.Seconds)

	fmt.Fprintf(bw, "\nsync traffic: sent is the mean over the nodes, each copy to each peer (ae: anti-entropy, heartbeats); received is node 0's\n")
	fmt.Fprintf(bw, "%5s %9s %11s %8s %10s %11s %10s %10s %9s %7s %14s\n",
		"nodes", "checks/s", "sent msgs/s", "of it ae", "sent KB/s", "recv msgs/s", "recv KB/s", "entries/s", "merged/s", "B/entry", "cluster msgs/s")
	for _, r := range rows {
		t := r.Traffic
		fmt.Fprintf(bw, "%5d %9.0f %11.1f %8.1f %10.1f %11.1f %10.1f %10.0f %9.0f %7.1f %14.0f\n",
			r.N, r.perNodeSec(t.Checks, r.N),
			r.perNodeSec(t.DeltaMsgs+t.AEMsgs, r.N), r.perNodeSec(t.AEMsgs, r.N),
			r.perNodeSec(t.DeltaBytes+t.AEBytes, r.N)/1000,
			r.perNodeSec(r.RecvMsgs, 1), r.perNodeSec(r.RecvBytes, 1)/1000,
			r.perNodeSec(r.RecvEntries, 1), r.perNodeSec(r.Merged, 1),
			float64(r.RecvBytes)/float64(max(r.RecvEntries, 1)),
			r.perNodeSec(t.DeltaMsgs+t.AEMsgs, 1))
	}

	fmt.Fprintf(bw, "\nnode 0: state at the end, and time inside its Engine on this machine, CPU time of the calling thread: Tick (collect,\n")
	fmt.Fprintf(bw, "encode), Hot (anti-entropy: scan for hot keys, encode), Receive (decode, merge); wall: the wall-clock time of the same calls;\n")
	fmt.Fprintf(bw, "us per entry Tick sent (once, not per peer) and per entry received\n")
	fmt.Fprintf(bw, "%5s %9s %11s %8s %7s %10s %9s %10s %11s %9s %8s %8s\n",
		"nodes", "pairs", "slices/pair", "heap MB", "B/pair", "tick ms/s", "hot ms/s", "recv ms/s", "Engine ms/s", "wall ms/s", "us/sent", "us/recv")
	for _, r := range rows {
		fmt.Fprintf(bw, "%5d %9d %11.2f", r.N, r.Pairs, float64(r.Slices)/float64(max(r.Pairs, 1)))
		if !cfg.Cost {
			fmt.Fprintf(bw, " %8s %7s %10s %9s %10s %11s %9s %8s %8s\n", "-", "-", "-", "-", "-", "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(bw, " %8.1f %7.0f", float64(r.Heap)/1e6, float64(r.Heap)/float64(max(r.Pairs, 1)))
		tick, hot, recv := r.Times.Tick.CPU, r.Times.Hot.CPU, r.Times.Receive.CPU
		if !r.Times.Tick.CPUOK || !r.Times.Hot.CPUOK || !r.Times.Receive.CPUOK {
			fmt.Fprintf(bw, " %10s %9s %10s %11s", "-", "-", "-", "-")
		} else {
			fmt.Fprintf(bw, " %10.1f %9.1f %10.1f %11.1f", r.msPerSec(tick), r.msPerSec(hot), r.msPerSec(recv), r.msPerSec(tick+hot+recv))
		}
		fmt.Fprintf(bw, " %9.1f", r.msPerSec(r.Times.Tick.Wall+r.Times.Hot.Wall+r.Times.Receive.Wall))
		if !r.Times.Tick.CPUOK || !r.Times.Receive.CPUOK {
			// Without CPU time, the per-entry costs come from the wall clock.
			tick, recv = r.Times.Tick.Wall, r.Times.Receive.Wall
		}
		fmt.Fprintf(bw, " %8.2f %8.2f\n", float64(tick)/1000/max(r.SentEntries, 1), float64(recv)/1000/float64(max(r.RecvEntries, 1)))
	}

	if len(rows) > 0 {
		r := rows[0]
		fmt.Fprintf(bw, "\naccuracy: one client alone for %d s on a fresh cluster of N nodes, each request on the node the seed's LCG draws\n", r.AccMs/1000)
		fmt.Fprintf(bw, "(NFR1: at most %.0f in any %d s interval; NFR2: no false rejection); bound: the most any client can get into\n",
			seedstudy.NFR1Ratio*seedstudy.Limit, seedstudy.WindowMs/1000)
		fmt.Fprintf(bw, "a window, L + N x f + N x T (docs/blind-interval.md); burst: every node hides its tail T in a slice, and one\n")
		fmt.Fprintf(bw, "window later a whole limit reaches every node at one instant (the bound's worst case); background: the load's rejections\n")
		fmt.Fprintf(bw, "%5s %11s %9s %11s %6s %11s %9s %16s %11s %11s %11s\n",
			"nodes", fmt.Sprintf("%dx: reqs", r.HotRate*seedstudy.WindowMs/1000/seedstudy.Limit), "accepted", "max in 60 s", "ratio",
			fmt.Sprintf("%.1fx: reqs", float64(r.CompliantRate)*seedstudy.WindowMs/1000/seedstudy.Limit), "rejected", "false rejections",
			"burst", "bound", "background")
	}
	for _, r := range rows {
		sc.Nodes = r.N
		b := int(burst.ClusterBound(sc))
		fmt.Fprintf(bw, "%5d %11d %9d %11d %6.3f %11d %9d %16d %11s %11s %11d\n",
			r.N, r.Hot.Requests, r.Hot.Accepted, r.Hot.MaxInWindow, seedstudy.Ratio(r.Hot.MaxInWindow, seedstudy.Limit),
			r.Compliant.Requests, r.Compliant.Rejected, r.Compliant.FalseRejections,
			fmt.Sprintf("%d %.3f", r.Burst.MaxInWindow, seedstudy.Ratio(r.Burst.MaxInWindow, seedstudy.Limit)),
			fmt.Sprintf("%d %.3f", b, seedstudy.Ratio(b, seedstudy.Limit)), r.Traffic.BgRejected)
	}
	return bw.Flush()
}
