package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/limiterd/limiterd/internal/seedplot"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

func runSeed(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("seed", flag.ContinueOnError)
	plotDir := fs.String("plot", "", "also write the tables as SVG charts into `DIR` (created if missing)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim seed [--plot DIR]

Prints the window-algorithm table of the seed design study (hiz/pencere.mjs):
one client, 180 s of model time, limit 600 per 60 s, for each arrival pattern
the requests accepted and rejected by
  fixed window             one counter per epoch-aligned 60 s window
  12-slice sliding         the seed's window: epoch-aligned 5 s slices, a
                           request in slice d counts slices d-11..d
  token bucket (60, 10/s)  60 tokens, refilled at 10/s, in float64
  limiterd                 the real counter package, counter.DefaultConfig()
and the most accepted in any interval [t, t+60 s) ("max 60 s") over the limit
("ratio"; NFR1 allows 1.1). The first three rows of the seed's three patterns
reproduce the seed's numbers exactly. A fourth pattern, requests crowded at
the end of a slice, is not in the seed: it lets 2x through the seed's window.

Then the seed's distributed tables (hiz/dagitik.mjs): 8 nodes, one 60 s
window, the client at 10/s and 90/s, each request on a node drawn by the
seed's LCG, counted by a central counter, a quota split 600/8 per node and a
delayed sync every 0.2 s; then the delayed sync at 90/s every 0.2, 1, 2 and
5 s. Those rows reproduce the seed's numbers exactly. The rows "limiterd"
run limiterd's real counter, limiter and engine.Engine on 8 simulated nodes
with the same requests and node choices, with and without the per-node
budget (see "limitsim burst" for the budget's evaluation).

With --plot DIR it also writes SVG charts into DIR (the tables on standard
output are unchanged): for each pattern, window-*.svg, the requests each
algorithm accepted in the last 60 s against time, with the limit and the
NFR1 ceiling (1.1x) drawn; cluster-sync-interval.svg, the most accepted in
60 s over the limit against the sync interval (the seed's delayed sync and
limiterd with and without the budget, 90/s); cluster-client-rate.svg, the
same against the client's rate from 10/s to 10,000/s (the NFR1 table of
"limitsim burst", without the budget and with floor 1). The charts are
deterministic and take a few seconds.

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
	blocks, err := seedstudy.Table()
	if err != nil {
		fmt.Fprintf(stderr, "limitsim seed: %v\n", err)
		return exitRuntime
	}
	byRate, byInterval, err := seedstudy.DistTables()
	if err == nil {
		err = seedstudy.WriteTable(stdout, blocks)
	}
	if err == nil {
		err = seedstudy.WriteDistTables(stdout, byRate, byInterval)
	}
	if err == nil && *plotDir != "" {
		err = seedplot.Plot(*plotDir, seedplot.DefaultPlan())
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim seed: %v\n", err)
		return exitRuntime
	}
	return exitOK
}
