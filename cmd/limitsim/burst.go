package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/limiterd/limiterd/internal/burst"
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
           peer offset the Engines observed (the cluster's offset metric);
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
	p := burst.DefaultPlan()
	br, err := p.Run()
	if err == nil {
		err = burst.Write(stdout, p, br)
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim burst: %v\n", err)
		return exitRuntime
	}
	return exitOK
}
