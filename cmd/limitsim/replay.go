package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/replay"
	"github.com/limiterd/limiterd/internal/whatif"
	"github.com/limiterd/limiterd/limiter"
)

func runReplay(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("replay", flag.ContinueOnError)
	var (
		cfg   = replay.DefaultConfig() // what no flag sets (the delivery grace) keeps limiterd's default
		def   = cfg
		trace string
		seed  = uint64(cfg.Seed)
		rules string // what-if replay
		top   int
	)
	fs.Int64Var(&cfg.Limit, "limit", def.Limit, "the declared `N`: requests per window and key")
	fs.DurationVar(&cfg.Window, "window", def.Window, "the window `D`, a whole number of milliseconds (e.g. 60s, 1500ms)")
	fs.IntVar(&cfg.Slices, "slices", def.Slices, "the number `K` of slices per window")
	fs.BoolVar(&cfg.Decisions, "decisions", false, "also print \"TIME_MS KEY allow|deny\" (with --nodes \"TIME_MS KEY NODE allow|deny\"; with --rules \"TIME KEY [NODE] RULE VERDICT\") for every request, in input order, before the summary")
	fs.StringVar(&trace, "trace", "", "read the trace from `FILE` instead of standard input (\"-\" is standard input)")
	fs.StringVar(&rules, "rules", "", "what-if: decide with the limiterd rule file `FILE` (replaces --limit, --window and --slices) and report per rule")
	fs.IntVar(&top, "top", 10, "with --rules: list the `N` keys with the most rejections of each rule (0: none)")
	fs.IntVar(&cfg.Sim.Nodes, "nodes", 0, "replay on a simulated cluster of `N` nodes (0: one node, no cluster)")
	fs.DurationVar(&cfg.Sim.Sync, "sync", def.Sim.Sync, "with --nodes: the sync interval `D`")
	fs.DurationVar(&cfg.Sim.Latency, "latency", 0, "with --nodes: the one-way network delay `D` of every sync message")
	fs.DurationVar(&cfg.Sim.Skew, "skew", 0, "with --nodes: spread the nodes' clocks evenly over [-D, +D] (node 0 at -`D`)")
	fs.BoolVar(&cfg.Sim.Budget, "budget", def.Sim.Budget, "with --nodes: the per-node budget for the blind interval")
	fs.Float64Var(&cfg.Sim.Floor, "budget-floor", def.Sim.Floor, "with --nodes: the budget's floor `F`, in requests of the limit rate over a sync interval plus the delivery grace")
	fs.DurationVar(&cfg.Sim.Stagger, "stagger", 0, "with --nodes: node i ticks i x `D` / N after the others' common tick (0: all at once; the sync interval: evenly spread)")
	fs.BoolVar(&cfg.Sim.Dup, "dup", false, "with --nodes: deliver every sync message twice, the copy late and out of order")
	coordinate := fs.Bool("coordinate", true, "with --nodes: the key's coordinator decides past a node's blind share (limiterd's default); false: the per-node budget alone")
	fs.DurationVar(&cfg.Sim.Deadline, "deadline", decision.DefaultDeadline, "with --nodes: how long a node waits for the coordinator's answer, `D` (whole ms); a round trip of 2 x --latency above it gets none, and the budget decides")
	fs.Uint64Var(&seed, "seed", seed, "with --nodes: seed `S` of the LCG that picks the node of a line without one")
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
coord_releases and coord_release_bytes (go doc ./internal/replay
describes each).

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
	cfg.Seed = uint32(seed)
	cfg.Sim.Uncoordinated = !*coordinate
	clusterOnly := ""
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "sync", "latency", "skew", "budget", "budget-floor", "stagger", "dup", "seed", "coordinate", "deadline":
			clusterOnly = f.Name
		}
	})
	switch {
	case cfg.Sim.Nodes < 0:
		return usageError(fs, stderr, "--nodes must not be negative, got %d", cfg.Sim.Nodes)
	case cfg.Sim.Nodes == 0 && clusterOnly != "":
		return usageError(fs, stderr, "--%s needs --nodes", clusterOnly)
	}
	if code, ok := checkWhatifFlags(fs, rules, top, stderr); !ok {
		return code
	}
	var run func(io.Reader, io.Writer) error
	if rules != "" {
		if cfg.Sim.Nodes > 0 {
			if err := cfg.Validate(); err != nil {
				return usageError(fs, stderr, "%v", err)
			}
		}
		var err error
		if run, err = whatifReplay(cfg, rules, top); err != nil {
			fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
			return exitRuntime
		}
	} else if cfg.Sim.Nodes == 0 {
		rp, err := replay.New(cfg)
		if err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		run = func(r io.Reader, w io.Writer) error {
			sum, err := rp.Run(r, w)
			if err != nil {
				return err
			}
			return replay.WriteSummary(w, cfg, sum)
		}
	} else {
		// Build a throw-away cluster first so that a bad setting is a usage
		// error, not a runtime one.
		if err := cfg.Validate(); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		run = func(r io.Reader, w io.Writer) error {
			sum, err := replay.RunCluster(cfg, r, w)
			if err != nil {
				return err
			}
			return replay.WriteClusterSummary(w, cfg, sum)
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
	err := run(in, bw)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
		return exitRuntime
	}
	return exitOK
}

// checkWhatifFlags rejects flags that contradict --rules, or need it. ok
// reports whether the command should go on; otherwise code is its exit code.
func checkWhatifFlags(fs *flag.FlagSet, rules string, top int, stderr io.Writer) (code int, ok bool) {
	bad := ""
	fs.Visit(func(f *flag.Flag) {
		switch {
		case rules != "" && (f.Name == "limit" || f.Name == "window" || f.Name == "slices"):
			bad = fmt.Sprintf("--%s does not go with --rules: the rule file sets the limits", f.Name)
		case rules == "" && f.Name == "top":
			bad = "--top needs --rules"
		}
	})
	switch {
	case bad != "":
		return usageError(fs, stderr, "%s", bad), false
	case top < 0:
		return usageError(fs, stderr, "--top must not be negative, got %d", top), false
	}
	return 0, true
}

// whatifReplay loads the rule file and returns the replay that runs the
// log against it and writes the report.
func whatifReplay(rc replay.Config, rulesPath string, top int) (func(io.Reader, io.Writer) error, error) {
	rs, err := limiter.Load(rulesPath)
	if err != nil {
		return nil, err
	}
	cfg := whatif.Config{Rules: rs, Top: top, Decisions: rc.Decisions, Sim: rc.Sim, Seed: rc.Seed}
	return func(r io.Reader, w io.Writer) error {
		rep, err := whatif.Run(cfg, r, w)
		if err != nil {
			return err
		}
		return whatif.Write(w, rep)
	}, nil
}
