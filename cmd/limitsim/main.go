package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/limiterd/limiterd/decision"
)

// Exit codes.
const (
	exitOK      = 0
	exitRuntime = 1 // the command ran and failed: unreadable or malformed trace, write error
	exitUsage   = 2 // the command line was wrong
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(args []string, stdin io.Reader, stdout, stderr io.Writer) int
}

func commands() []command {
	return []command{
		{"seed", "print the seed's window and distributed tables, with limiterd's rows added", runSeed},
		{"replay", "replay a request trace through limiterd's counter on a simulated clock", runReplay},
		{"burst", "evaluate the cross-node burst, the per-node budget and clock skew on a simulated cluster", runBurst},
		{"scale", "measure what the sync costs one node on clusters of 8 to 128 simulated nodes", runScaleCmd},
	}
}

// run is main without the process: args exclude the program name. It
// returns the exit code.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitsim", flag.ContinueOnError)
	fs.Usage = func() { topUsage(fs.Output()) }
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() == 0 {
		fmt.Fprintln(stderr, "limitsim: no command given")
		topUsage(stderr)
		return exitUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" {
		return runHelp(rest, stdout, stderr)
	}
	for _, c := range commands() {
		if c.name == name {
			return c.run(rest, stdin, stdout, stderr)
		}
	}
	fmt.Fprintf(stderr, "limitsim: unknown command %q\n", name)
	topUsage(stderr)
	return exitUsage
}

// runHelp is "limitsim help [COMMAND]": the same text as -h.
func runHelp(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		topUsage(stdout)
		return exitOK
	}
	return run([]string{args[0], "-h"}, bytes.NewReader(nil), stdout, stderr)
}

func topUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: limitsim COMMAND [flags]

limitsim runs the seed design study's experiments on limiterd's own code,
on a simulated clock: deterministic, no network, no real time.

Commands:
`)
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-8s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `  help     show help for a command

Run "limitsim COMMAND -h" for a command's flags. Exit status: 0 success,
1 runtime error (e.g. a malformed trace), 2 usage error.
`)
}

// parse parses args into fs. Help asked for with -h goes to stdout and ends
// the command successfully; a usage error goes to stderr as one line and a
// pointer to -h, not the whole help. ok reports whether the command should
// go on; otherwise code is its exit code.
func parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (code int, ok bool) {
	var help bytes.Buffer
	fs.SetOutput(&help)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(help.Bytes())
		return exitOK, false
	case err != nil:
		return usageError(fs, stderr, "%v", err), false
	}
	return 0, true
}

// usageError reports a bad command line and returns exitUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) int {
	name := "limitsim"
	if fs.Name() != name {
		name += " " + fs.Name()
	}
	fmt.Fprintf(stderr, "%s: %s\nRun \"%s -h\" for usage.\n", name, fmt.Sprintf(format, a...), name)
	return exitUsage
}

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
run limiterd's real counter, limiter and cluster.Syncer on 8 simulated nodes
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
	blocks, err := seedTable()
	if err != nil {
		fmt.Fprintf(stderr, "limitsim seed: %v\n", err)
		return exitRuntime
	}
	byRate, byInterval, err := distTables()
	if err == nil {
		err = writeSeedTable(stdout, blocks)
	}
	if err == nil {
		err = writeDistTables(stdout, byRate, byInterval)
	}
	if err == nil && *plotDir != "" {
		err = plotSeed(*plotDir, defaultPlotPlan())
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim seed: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

func runReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var (
		cfg   replayConfig
		trace string
		seed  uint64
		rules string // what-if replay (whatif.go)
		top   int
	)
	def := defaultSimConfig()
	cfg.sim = def // what no flag sets (the delivery grace) keeps limiterd's default
	fs.Int64Var(&cfg.limit, "limit", seedLimit, "the declared `N`: requests per window and key")
	fs.DurationVar(&cfg.window, "window", seedWindowMs*time.Millisecond, "the window `D`, a whole number of milliseconds (e.g. 60s, 1500ms)")
	fs.IntVar(&cfg.slices, "slices", seedSlices, "the number `K` of slices per window")
	fs.BoolVar(&cfg.decisions, "decisions", false, "also print \"TIME_MS KEY allow|deny\" (with --nodes \"TIME_MS KEY NODE allow|deny\"; with --rules \"TIME KEY [NODE] RULE VERDICT\") for every request, in input order, before the summary")
	fs.StringVar(&trace, "trace", "", "read the trace from `FILE` instead of standard input (\"-\" is standard input)")
	fs.StringVar(&rules, "rules", "", "what-if: decide with the limiterd rule file `FILE` (replaces --limit, --window and --slices) and report per rule")
	fs.IntVar(&top, "top", 10, "with --rules: list the `N` keys with the most rejections of each rule (0: none)")
	fs.IntVar(&cfg.sim.nodes, "nodes", 0, "replay on a simulated cluster of `N` nodes (0: one node, no cluster)")
	fs.DurationVar(&cfg.sim.sync, "sync", def.sync, "with --nodes: the sync interval `D`")
	fs.DurationVar(&cfg.sim.latency, "latency", 0, "with --nodes: the one-way network delay `D` of every sync message")
	fs.DurationVar(&cfg.sim.skew, "skew", 0, "with --nodes: spread the nodes' clocks evenly over [-D, +D] (node 0 at -`D`)")
	fs.BoolVar(&cfg.sim.budget, "budget", def.budget, "with --nodes: the per-node budget for the blind interval")
	fs.Float64Var(&cfg.sim.floor, "budget-floor", def.floor, "with --nodes: the budget's floor `F`, in requests of the limit rate over a sync interval plus the delivery grace")
	fs.DurationVar(&cfg.sim.stagger, "stagger", 0, "with --nodes: node i ticks i x `D` / N after the others' common tick (0: all at once; the sync interval: evenly spread)")
	fs.BoolVar(&cfg.sim.dup, "dup", false, "with --nodes: deliver every sync message twice, the copy late and out of order")
	coordinate := fs.Bool("coordinate", true, "with --nodes: the key's coordinator decides past a node's blind share (limiterd's default); false: the per-node budget alone")
	fs.DurationVar(&cfg.sim.deadline, "deadline", decision.DefaultDeadline, "with --nodes: how long a node waits for the coordinator's answer, `D` (whole ms); a round trip of 2 x --latency above it gets none, and the budget decides")
	fs.Uint64Var(&seed, "seed", seedLCGSeed, "with --nodes: seed `S` of the LCG that picks the node of a line without one")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim replay [--limit N] [--window D] [--slices K] [--decisions] [--trace FILE]
                      [--nodes N [--sync D] [--latency D] [--skew D] [--stagger D]
                       [--seed S] [--budget=true|false] [--budget-floor F] [--dup]
                       [--coordinate=true|false] [--deadline D]]
       limitsim replay --rules FILE [--top N] [--decisions] [--trace FILE] [--nodes N ...]

Replays a request trace through limiterd's counter (counter.DefaultConfig(),
one limit of N per D in K slices) on a simulated clock and prints a summary.

The trace has one request per line, "TIME_MS KEY": TIME_MS a decimal integer
of milliseconds in [0, 2^53-1], never smaller than the line before; KEY any
valid UTF-8 without whitespace. Blank lines and lines starting with # are
skipped. A malformed line is an error naming its line number (exit 1).

Output, all on standard output: with --decisions, first one line per request,
"TIME_MS KEY allow" or "TIME_MS KEY deny"; then the summary, one "# NAME VALUE"
line each in this order:
  requests             requests in the trace
  accepted             requests allowed (untracked ones included)
  rejected             requests denied
  untracked            requests allowed uncounted because the counter was full
  keys                 distinct keys
  limit, window_ms, slices   the limit replayed
  max_in_window        most requests of one key accepted in any [t, t+D)
  max_in_window_key    that key (the smallest on a tie; "-" if none)
  max_in_window_ratio  max_in_window / N, three decimals (NFR1: at most 1.100)
so that "grep -v '^#'" keeps only the decisions.

With --nodes the trace runs on that many simulated nodes, each with
limiterd's real counter (cluster mode), limiter, decision layer and
engine.Engine: every --sync interval each node that counted something sends
its changes to every peer, delivered after --latency; a check past the
node's blind share goes to the key's coordinator (unless --coordinate=false),
decided at the check's instant and answered if the round trip, 2 x
--latency, is within --deadline, else decided by the budget. A line may then carry a third field,
"TIME_MS KEY NODE" (a node index from 0); without it the seed's LCG picks the
node. Decision lines become "TIME_MS KEY NODE allow|deny", and the summary
goes on with nodes, sync_ms, latency_ms, skew_ms, budget, budget_floor, seed,
false_rejections (rejections while fewer than N of the key were accepted in
the window before: NFR2), sync_deltas, sync_messages, sync_bytes,
sync_duration_ms, sync_messages_per_node_s, sync_bytes_per_node_s,
max_peer_offset_ms, coordinate, deadline_ms, decided_here,
decided_coordinator, decided_fallback, decided_on_lease, false_rejections_fallback,
coord_asks, coord_ask_bytes, coord_answers, coord_answer_bytes,
coord_releases and coord_release_bytes (go doc ./cmd/limitsim describes
each).

With --rules FILE it is a what-if replay of an access log against a limiterd
rule file (the real rule matching, several limits per rule, shadow mode):
each line is "TIME KEY [NODE]", TIME either milliseconds as above or an RFC
3339 timestamp (2026-07-28T09:00:00.250Z; made relative to the first line,
1 ms resolution), one format per log, never earlier than the line before.
It prints per rule the requests, allowed, rejected (for a shadow rule: would
reject), keys and keys rejected, with a row for keys no rule governs
("unlimited") and a total, then for each rule that rejected anything its
--top keys by rejections. With --decisions, first "TIME KEY [NODE] RULE
allow|deny|shadow-deny|unlimited" per request. An invalid rule file is a
runtime error (exit 1), like a malformed line.

Flags:
`)
		fs.PrintDefaults()
	}
	if code, ok := parse(fs, args, stdout, stderr); !ok {
		return code
	}
	if fs.NArg() > 0 {
		return usageError(fs, stderr, "unexpected argument %q (give the trace with --trace)", fs.Arg(0))
	}
	if seed > math.MaxUint32 {
		return usageError(fs, stderr, "--seed must be at most %d, got %d", uint32(math.MaxUint32), seed)
	}
	cfg.seed = uint32(seed)
	cfg.sim.uncoordinated = !*coordinate
	clusterOnly := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "sync", "latency", "skew", "budget", "budget-floor", "stagger", "dup", "seed", "coordinate", "deadline":
			clusterOnly = f.Name
		}
	})
	switch {
	case cfg.sim.nodes < 0:
		return usageError(fs, stderr, "--nodes must not be negative, got %d", cfg.sim.nodes)
	case cfg.sim.nodes == 0 && clusterOnly != "":
		return usageError(fs, stderr, "--%s needs --nodes", clusterOnly)
	}
	if code, ok := checkWhatifFlags(fs, rules, top, stderr); !ok {
		return code
	}
	var replay func(io.Reader, io.Writer) error
	if rules != "" {
		if cfg.sim.nodes > 0 {
			if err := checkClusterConfig(cfg); err != nil {
				return usageError(fs, stderr, "%v", err)
			}
		}
		var err error
		if replay, err = whatifReplay(cfg, rules, top); err != nil {
			fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
			return exitRuntime
		}
	} else if cfg.sim.nodes == 0 {
		rp, err := newReplayer(cfg)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		replay = func(r io.Reader, w io.Writer) error {
			sum, err := rp.run(r, w)
			if err != nil {
				return err
			}
			return writeReplaySummary(w, cfg, sum)
		}
	} else {
		// Build a throw-away cluster first so that a bad setting is a usage
		// error, not a runtime one.
		if err := checkClusterConfig(cfg); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		replay = func(r io.Reader, w io.Writer) error {
			sum, err := runClusterReplay(cfg, r, w)
			if err != nil {
				return err
			}
			return writeClusterSummary(w, cfg, sum)
		}
	}
	in := stdin
	if trace != "" && trace != "-" {
		f, err := os.Open(trace)
		if err != nil {
			fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
			return exitRuntime
		}
		defer f.Close()
		in = f
	}
	bw := bufio.NewWriter(stdout)
	err := replay(in, bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// checkClusterConfig builds the cluster cfg describes and drops it: the
// counter, limiter and simulator validate every setting.
func checkClusterConfig(cfg replayConfig) error {
	sc := cfg.sim
	sc.limit, sc.window, sc.slices = cfg.limit, cfg.window, cfg.slices
	_, err := newSimCluster(sc)
	return err
}
