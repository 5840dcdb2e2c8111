package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"
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
		{"seed", "print the seed's window-algorithm table, with limiterd's counter added", runSeed},
		{"replay", "replay a request trace through limiterd's counter on a simulated clock", runReplay},
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
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim seed

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

The command takes no flags besides -h.
`)
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
	if err := writeSeedTable(stdout, blocks); err != nil {
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
	)
	fs.Int64Var(&cfg.limit, "limit", seedLimit, "the declared `N`: requests per window and key")
	fs.DurationVar(&cfg.window, "window", seedWindowMs*time.Millisecond, "the window `D`, a whole number of milliseconds (e.g. 60s, 1500ms)")
	fs.IntVar(&cfg.slices, "slices", seedSlices, "the number `K` of slices per window")
	fs.BoolVar(&cfg.decisions, "decisions", false, "also print \"TIME_MS KEY allow|deny\" for every request, in input order, before the summary")
	fs.StringVar(&trace, "trace", "", "read the trace from `FILE` instead of standard input (\"-\" is standard input)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: limitsim replay [--limit N] [--window D] [--slices K] [--decisions] [--trace FILE]

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
	rp, err := newReplayer(cfg)
	if err != nil {
		return usageError(fs, stderr, "%v", err)
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
	sum, err := rp.run(in, bw)
	if err == nil {
		err = writeReplaySummary(bw, cfg, sum)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitsim replay: %v\n", err)
		return exitRuntime
	}
	return exitOK
}
