package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/limiterd/limiterd/internal/scale"
)

// runMeshCmd is "limitsim scale --mesh": the full mesh's cost on 8 to 128
// nodes (issue 4, docs/scaling.md), the budget's design.
func runMeshCmd(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("scale --mesh", flag.ContinueOnError)
	cfg := scale.DefaultConfig()
	nodes := nodeList(cfg.Nodes)
	seed := uint64(cfg.Seed)
	fs.Var(&nodes, "nodes", "comma-separated cluster `SIZES`, each between 2 and 256")
	fs.IntVar(&cfg.Keys, "keys", cfg.Keys, "distinct keys `K` of the background load")
	fs.Int64Var(&cfg.Rate, "rate", cfg.Rate, "background checks per second `R`, all nodes together")
	fs.Int64Var(&cfg.PerNode, "rate-per-node", 0, "background checks per second `R` on each node (replaces --rate with R x N)")
	fs.Int64Var(&cfg.Seconds, "seconds", cfg.Seconds, "measured model seconds `S`, after the warm-up")
	fs.DurationVar(&cfg.Warmup, "warmup", cfg.Warmup, "model time `D` before the measurement, a multiple of the sync interval")
	fs.Uint64Var(&seed, "seed", seed, "seed `S` of the LCG that draws the keys and the accuracy clients' nodes")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim scale --mesh [--nodes 8,16,32,64,128] [--keys K] [--rate R | --rate-per-node R]
                            [--seconds S] [--warmup D] [--seed S]

Measures what keeping the cluster in sync costs one node as the cluster
grows, on limiterd's real counter (counter.DefaultClusterConfig: budget on),
limiter and engine.Engine, with messages cut at limiterd's datagram size
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
                time inside its Engine: Tick (collect, encode), Hot
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
	cfg.Nodes, cfg.Seed = nodes, uint32(seed)
	both := 0
	fs.Visit(func(f *flag.Flag) {
		if f.Name == "rate" || f.Name == "rate-per-node" {
			both++
		}
	})
	if both == 2 {
		return usageError(fs, stderr, "give --rate or --rate-per-node, not both")
	}
	if err := cfg.Validate(); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	// Progress goes to standard error: the default run takes minutes.
	rows, err := scale.Run(cfg, func(n int, took time.Duration) {
		fmt.Fprintf(stderr, "limitsim scale: %d nodes done in %v\n", n, took.Round(100*time.Millisecond))
	})
	if err == nil {
		err = scale.Write(stdout, cfg, rows)
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim scale: %v\n", err)
		return exitRuntime
	}
	return exitOK
}
