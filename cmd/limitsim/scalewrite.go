package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
)

func runScaleCmd(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	cfg := defaultScaleConfig()
	nodes := nodeList(cfg.nodes)
	seed := uint64(cfg.seed)
	fs.Var(&nodes, "nodes", "comma-separated cluster `SIZES`, each between 2 and 256")
	fs.IntVar(&cfg.keys, "keys", cfg.keys, "distinct keys `K` of the background load")
	fs.Int64Var(&cfg.rate, "rate", cfg.rate, "background checks per second `R`, all nodes together")
	fs.Int64Var(&cfg.perNode, "rate-per-node", 0, "background checks per second `R` on each node (replaces --rate with R x N)")
	fs.Int64Var(&cfg.seconds, "seconds", cfg.seconds, "measured model seconds `S`, after the warm-up")
	fs.DurationVar(&cfg.warmup, "warmup", cfg.warmup, "model time `D` before the measurement, a multiple of the sync interval")
	fs.Uint64Var(&seed, "seed", seed, "seed `S` of the LCG that draws the keys and the accuracy clients' nodes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim scale [--nodes 8,16,32,64,128] [--keys K] [--rate R | --rate-per-node R]
                     [--seconds S] [--warmup D] [--seed S]

Measures what keeping the cluster in sync costs one node as the cluster
grows, on limiterd's real counter (counter.DefaultClusterConfig: budget on),
limiter and cluster.Syncer, with messages cut at limiterd's datagram size
(1,394 bytes) and counted in their real encoded bytes.

For each cluster size N: a background load of R checks a second in total
(HS2: 40,000), request i at floor(i*1000/R) ms on node i mod N, its key
drawn uniformly among K keys (HS1: 200,000) by the seed's LCG; every 200 ms
every node ticks and its changes reach every peer at once; every second
every node sends its hot keys, or a heartbeat. During the warm-up (one
window by default, so node 0 holds a full window of state) only node 0
receives; during the S measured seconds every node receives every message.
It prints, per node and per second of model time:

  sync traffic  messages and bytes sent (each copy to each peer), received
                by node 0, entries decoded and merged by node 0, bytes per
                entry on the wire, and the messages of the whole cluster
  node 0        the (limit, key) pairs and slices it holds at the end, its
                live heap (what a GC frees when it is dropped), and the
                time inside its Syncer: Tick (collect, encode), Hot
                (anti-entropy), Receive (decode, merge), as CPU time of the
                calling thread (Linux) and as wall-clock time, and per entry
                sent and received. Heap and times depend on the machine and
                its load; the rest is deterministic.
  accuracy      a client at 9x its limit (90/s) and one at 0.9x (9/s), each
                alone for 180 s on a fresh cluster of N nodes, each request
                on the node the seed's LCG draws: the most admitted in any
                60 s interval (NFR1 allows 660) and false rejections (NFR2
                allows none); the adversarial burst of docs/blind-interval.md
                and the bound it approaches, L + N x f + N x T

The default run takes about five minutes on two cores and up to 9 GB of
memory (at 128 nodes the other 127 hold 10 s of their peers' counts each).
docs/scaling.md explains the figures.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q", fs.Arg(0))
	}
	if seed > math.MaxUint32 {
		return usageError(fs, stderr, "--seed must be at most %d, got %d", uint32(math.MaxUint32), seed)
	}
	cfg.nodes, cfg.seed = nodes, uint32(seed)
	both := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "rate" || f.Name == "rate-per-node" {
			both++
		}
	})
	if both == 2 {
		return usageError(fs, stderr, "give --rate or --rate-per-node, not both")
	}
	if err := cfg.validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	// Progress goes to standard error: the default run takes minutes.
	rows, err := runScale(cfg, func(n int, took time.Duration) {
		fmt.Fprintf(stderr, "limitsim scale: %d nodes done in %v\n", n, took.Round(100*time.Millisecond))
	})
	if err == nil {
		err = writeScale(stdout, cfg, rows)
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim scale: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// nodeList is the --nodes flag: cluster sizes separated by commas.
type nodeList []int

func (l *nodeList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, n := range *l {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

func (l *nodeList) Set(v string) error {
	var out []int
	for f := range strings.SplitSeq(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("%q is not a cluster size", f)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// perNodeSec is total spread over n nodes and the measured seconds.
func (r scaleRow) perNodeSec(total int64, n int) float64 {
	return float64(total) / float64(n) / float64(r.seconds)
}

// msPerSec is ns spent over the measurement as ms per model second.
func (r scaleRow) msPerSec(ns int64) float64 { return float64(ns) / 1e6 / float64(r.seconds) }

// writeScale prints the tables of limitsim scale. Without cfg.cost the
// machine-dependent columns print "-".
func writeScale(w io.Writer, cfg scaleConfig, rows []scaleRow) error {
	bw := bufio.NewWriter(w)
	sc := budgetSimConfig() // the design scale runs (scalesim.go)
	load := fmt.Sprintf("%d checks/s in total", cfg.rate)
	if cfg.perNode > 0 {
		load = fmt.Sprintf("%d checks/s on each node", cfg.perNode)
	}
	fmt.Fprintf(bw, "scale: limiterd's real counter, limiter and cluster.Syncer on N simulated nodes; limit %d per %v in %d slices, budget on\n",
		sc.limit, sc.window, sc.slices)
	fmt.Fprintf(bw, "load: %s over %d keys, request i at floor(i*1000/rate) ms on node i mod N, its key drawn by the seed's LCG (seed %d)\n",
		load, cfg.keys, cfg.seed)
	ec := engine.DefaultConfig("node-0") // what newScaleRun's engines run with
	fmt.Fprintf(bw, "sync: every %v, all nodes at the same instant, in messages of at most %d bytes to every peer, arriving at once; anti-entropy every %v\n",
		sc.sync, ec.DatagramBytes, ec.AntiEntropyInterval)
	fmt.Fprintf(bw, "warm-up %v (only node 0 receives), then %d s measured (every node receives every message); per node and per second of model time\n",
		cfg.warmup, cfg.seconds)

	fmt.Fprintf(bw, "\nsync traffic: sent is the mean over the nodes, each copy to each peer (ae: anti-entropy, heartbeats); received is node 0's\n")
	fmt.Fprintf(bw, "%5s %9s %11s %8s %10s %11s %10s %10s %9s %7s %14s\n",
		"nodes", "checks/s", "sent msgs/s", "of it ae", "sent KB/s", "recv msgs/s", "recv KB/s", "entries/s", "merged/s", "B/entry", "cluster msgs/s")
	for _, r := range rows {
		t := r.traffic
		fmt.Fprintf(bw, "%5d %9.0f %11.1f %8.1f %10.1f %11.1f %10.1f %10.0f %9.0f %7.1f %14.0f\n",
			r.n, r.perNodeSec(t.checks, r.n),
			r.perNodeSec(t.deltaMsgs+t.aeMsgs, r.n), r.perNodeSec(t.aeMsgs, r.n),
			r.perNodeSec(t.deltaBytes+t.aeBytes, r.n)/1000,
			r.perNodeSec(r.recvMsgs, 1), r.perNodeSec(r.recvBytes, 1)/1000,
			r.perNodeSec(r.recvEntries, 1), r.perNodeSec(r.merged, 1),
			float64(r.recvBytes)/float64(max(r.recvEntries, 1)),
			r.perNodeSec(t.deltaMsgs+t.aeMsgs, 1))
	}

	fmt.Fprintf(bw, "\nnode 0: state at the end, and time inside its Syncer on this machine, CPU time of the calling thread: Tick (collect,\n")
	fmt.Fprintf(bw, "encode), Hot (anti-entropy: scan for hot keys, encode), Receive (decode, merge); wall: the wall-clock time of the same calls;\n")
	fmt.Fprintf(bw, "us per entry Tick sent (once, not per peer) and per entry received\n")
	fmt.Fprintf(bw, "%5s %9s %11s %8s %7s %10s %9s %10s %11s %9s %8s %8s\n",
		"nodes", "pairs", "slices/pair", "heap MB", "B/pair", "tick ms/s", "hot ms/s", "recv ms/s", "Syncer ms/s", "wall ms/s", "us/sent", "us/recv")
	for _, r := range rows {
		fmt.Fprintf(bw, "%5d %9d %11.2f", r.n, r.pairs, float64(r.slices)/float64(max(r.pairs, 1)))
		if !cfg.cost {
			fmt.Fprintf(bw, " %8s %7s %10s %9s %10s %11s %9s %8s %8s\n", "-", "-", "-", "-", "-", "-", "-", "-", "-")
			continue
		}
		fmt.Fprintf(bw, " %8.1f %7.0f", float64(r.heap)/1e6, float64(r.heap)/float64(max(r.pairs, 1)))
		tick, hot, recv := r.syncTick.cpu, r.syncHot.cpu, r.syncRecv.cpu
		if !r.syncTick.cpuOK || !r.syncHot.cpuOK || !r.syncRecv.cpuOK {
			fmt.Fprintf(bw, " %10s %9s %10s %11s", "-", "-", "-", "-")
		} else {
			fmt.Fprintf(bw, " %10.1f %9.1f %10.1f %11.1f", r.msPerSec(tick), r.msPerSec(hot), r.msPerSec(recv), r.msPerSec(tick+hot+recv))
		}
		fmt.Fprintf(bw, " %9.1f", r.msPerSec(r.syncTick.wall+r.syncHot.wall+r.syncRecv.wall))
		if !r.syncTick.cpuOK || !r.syncRecv.cpuOK {
			// Without CPU time, the per-entry costs come from the wall clock.
			tick, recv = r.syncTick.wall, r.syncRecv.wall
		}
		fmt.Fprintf(bw, " %8.2f %8.2f\n", float64(tick)/1000/max(r.sentEntries, 1), float64(recv)/1000/float64(max(r.recvEntries, 1)))
	}

	if len(rows) > 0 {
		r := rows[0]
		fmt.Fprintf(bw, "\naccuracy: one client alone for %d s on a fresh cluster of N nodes, each request on the node the seed's LCG draws\n", r.accMs/1000)
		fmt.Fprintf(bw, "(NFR1: at most %.0f in any %d s interval; NFR2: no false rejection); bound: the most any client can get into\n",
			nfr1Ratio*seedLimit, seedWindowMs/1000)
		fmt.Fprintf(bw, "a window, L + N x f + N x T (docs/blind-interval.md); burst: every node hides its tail T in a slice, and one\n")
		fmt.Fprintf(bw, "window later a whole limit reaches every node at one instant (the bound's worst case); background: the load's rejections\n")
		fmt.Fprintf(bw, "%5s %11s %9s %11s %6s %11s %9s %16s %11s %11s %11s\n",
			"nodes", fmt.Sprintf("%dx: reqs", r.hotRate*seedWindowMs/1000/seedLimit), "accepted", "max in 60 s", "ratio",
			fmt.Sprintf("%.1fx: reqs", float64(r.compliantRate)*seedWindowMs/1000/seedLimit), "rejected", "false rejections",
			"burst", "bound", "background")
	}
	for _, r := range rows {
		sc.nodes = r.n
		b := int(clusterBound(sc))
		fmt.Fprintf(bw, "%5d %11d %9d %11d %6.3f %11d %9d %16d %11s %11s %11d\n",
			r.n, r.hot.requests, r.hot.accepted, r.hot.maxInWindow, ratio(r.hot.maxInWindow, seedLimit),
			r.compliant.requests, r.compliant.rejected, r.compliant.falseRejections,
			fmt.Sprintf("%d %.3f", r.burst.maxInWindow, ratio(r.burst.maxInWindow, seedLimit)),
			fmt.Sprintf("%d %.3f", b, ratio(b, seedLimit)), r.traffic.bgRejected)
	}
	return bw.Flush()
}
