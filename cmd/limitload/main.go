package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/limiterd/limiterd/internal/cpuprofile"
	"github.com/limiterd/limiterd/internal/loadgen"
)

// Exit codes.
const (
	exitOK          = 0
	exitRuntime     = 1   // the run could not be made: preflight failed, a file could not be written
	exitUsage       = 2   // the command line was wrong
	exitInterrupted = 130 // Ctrl-C: the partial report was printed
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is main without the process; args exclude the program name.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "serve-noop" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return serveNoop(ctx, args[1:], stderr)
	}
	if len(args) > 0 && args[0] == "flood" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		return floodMain(ctx, args[1:], stdout, stderr)
	}
	cfg, runID, code, ok := parseFlags(args, stdout, stderr, lookupHost)
	if !ok {
		return code
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		stop() // a second Ctrl-C kills at once
	}()
	return execute(ctx, cfg, runID, stdout, stderr)
}

// lookupHost resolves a target's host name.
func lookupHost(host string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return net.DefaultResolver.LookupHost(ctx, host)
}

// execute runs a validated configuration: the dry run, or the preflight,
// the run, the report and the trace. It returns the exit code.
func execute(ctx context.Context, cfg *loadgen.Config, runID string, stdout, stderr io.Writer) int {
	if cfg.DryRun {
		if err := loadgen.WriteSchedule(stdout, cfg, runID); err != nil {
			fmt.Fprintf(stderr, "limitload: %v\n", err)
			return exitRuntime
		}
		return exitOK
	}
	if cfg.Preflight {
		if err := loadgen.Preflight(cfg, runID); err != nil {
			fmt.Fprintf(stderr, "limitload: %s\n(--preflight=false skips this check)\n", plain(err))
			return exitRuntime
		}
	}
	if cfg.CPUProfile != "" {
		stop, err := cpuprofile.Start(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintf(stderr, "limitload: --cpuprofile: %v\n", err)
			return exitRuntime
		}
		defer stop()
	}
	res := loadgen.Run(ctx, cfg, runID, stderr)
	rep := res.Report()
	var err error
	if cfg.JSON {
		err = rep.WriteJSON(stdout)
	} else {
		err = rep.WriteText(stdout)
	}
	if err == nil && cfg.TraceOut != "" {
		err = writeTraceFile(cfg.TraceOut, res)
	}
	if err != nil {
		fmt.Fprintf(stderr, "limitload: %v\n", err)
		return exitRuntime
	}
	if res.Interrupted() {
		return exitInterrupted
	}
	return exitOK
}

func writeTraceFile(path string, res *loadgen.Result) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--trace-out: %w", err)
	}
	if err := res.WriteTrace(f); err != nil {
		f.Close()
		return fmt.Errorf("--trace-out: %w", err)
	}
	return f.Close()
}

// newRunID names a run from the clock, so that each run's keys are fresh.
func newRunID(now time.Time) string {
	return "r" + strconv.FormatInt(now.UnixMilli(), 36)
}

// parseFlags parses and validates the command line. ok false means stop
// with code (help printed, or a usage error reported on stderr).
func parseFlags(args []string, stdout, stderr io.Writer, resolve func(string) ([]string, error)) (cfg *loadgen.Config, runID string, code int, ok bool) {
	c := loadgen.DefaultConfig()
	fs := flag.NewFlagSet("limitload", flag.ContinueOnError)
	targets := strings.Join(c.Targets, ",")
	fs.StringVar(&targets, "targets", targets, "comma-separated `HOST:PORT` list of limiterd nodes (loopback only without --allow-remote)")
	fs.BoolVar(&c.AllowRemote, "allow-remote", c.AllowRemote, "allow targets outside 127.0.0.0/8 and ::1")
	fs.StringVar(&c.Spread, "spread", c.Spread, "how requests are spread over the targets: random, round-robin, key-round-robin (each key through the targets in turn, from its own), or lcg (the seed study's generator; with the default --seed its node choices)")
	fs.StringVar(&c.Pattern, "pattern", c.Pattern, "arrival `PATTERN`: steady, edge-burst, intermittent, random or keys (see below)")
	fs.IntVar(&c.Limit, "limit", c.Limit, "the server's limit `N` for the keys driven (requests per --window)")
	fs.DurationVar(&c.Window, "window", c.Window, "the server's window `D` for the keys driven; the seed's 60 s patterns are scaled to it")
	fs.Float64Var(&c.Factor, "factor", c.Factor, "steady (and random without --rate): the rate as a multiple `K` of the limit rate N/D")
	fs.Float64Var(&c.Rate, "rate", c.Rate, "random and keys: total requests per second `R` (Poisson arrivals)")
	fs.IntVar(&c.Keys, "keys", c.Keys, "keys: the number of distinct keys")
	fs.Float64Var(&c.ZipfS, "zipf-s", c.ZipfS, "keys: Zipf exponent `S` of the key popularity (key k drawn with weight 1/(k+1)^S); 0 draws uniformly")
	fs.DurationVar(&c.Duration, "duration", c.Duration, "length `D` of the schedule; 0: the pattern's (3 windows, the seed's 180 s scaled; keys: 60s)")
	fs.Uint64Var(&c.Seed, "seed", c.Seed, "`S` seeds the arrivals, the keys and the spread (the default is the seed study's LCG seed)")
	fs.StringVar(&c.Key, "key", c.Key, "the key of a single-key pattern (default: --key-prefix, the pattern and the run id: fresh counts every run)")
	fs.StringVar(&c.KeyPrefix, "key-prefix", c.KeyPrefix, "`PREFIX` of generated keys; keys are PREFIX+RUNID+\"-k\"+index")
	fs.StringVar(&runID, "run-id", "", "`ID` in the generated keys (default: from the clock)")
	fs.StringVar(&c.Rule, "rule", c.Rule, "send rule=`NAME` with every check")
	fs.StringVar(&c.Client, "client", c.Client, "HTTP client: raw (limitload's own keep-alive HTTP/1.1, cheapest) or http (net/http)")
	fs.IntVar(&c.Conns, "conns", c.Conns, "keep-alive connections (requests in flight) per target")
	fs.DurationVar(&c.Timeout, "timeout", c.Timeout, "bound on each request")
	fs.DurationVar(&c.Align, "align", c.Align, "start at the next multiple `D` of the wall clock (0: 100 ms from now)")
	fs.DurationVar(&c.Phase, "phase", c.Phase, "also report latency by the send instant's phase in wall-clock multiples of `D`, in 10 bins (e.g. the nodes' -sync-interval: their ticks are aligned to it)")
	fs.BoolVar(&c.Preflight, "preflight", c.Preflight, "check first that every target answers /check with the policy --limit per --window")
	fs.DurationVar(&c.Progress, "progress", c.Progress, "interval of the progress line on stderr (0: none)")
	fs.BoolVar(&c.JSON, "json", c.JSON, "print the report as JSON (fields documented in \"go doc ./cmd/limitload\")")
	fs.IntVar(&c.Worst, "worst", c.Worst, "how many keys the report lists, the worst first")
	fs.IntVar(&c.MaxLog, "max-log", c.MaxLog, "most requests kept for the accuracy analysis (24 bytes each)")
	fs.StringVar(&c.TraceOut, "trace-out", c.TraceOut, "write the answered requests to `FILE` as a limitsim trace (TIME_MS KEY NODE, by send instant)")
	fs.StringVar(&c.CPUProfile, "cpuprofile", c.CPUProfile, "write limitload's own CPU profile to `FILE` (go tool pprof)")
	fs.BoolVar(&c.DryRun, "dry-run", c.DryRun, "print the schedule as a limitsim trace (TIME_MS KEY [NODE]) and send nothing")
	fs.Usage = func() { usage(fs) }

	var help bytes.Buffer
	fs.SetOutput(&help)
	err := fs.Parse(args)
	fs.SetOutput(stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
		stdout.Write(help.Bytes())
		return nil, "", exitOK, false
	case err != nil:
		return nil, "", usageError(stderr, "%v", err), false
	case fs.NArg() > 0:
		return nil, "", usageError(stderr, "unexpected argument %q", fs.Arg(0)), false
	}
	c.Targets = nil
	for _, t := range strings.Split(targets, ",") {
		if t = strings.TrimSpace(t); t != "" {
			c.Targets = append(c.Targets, t)
		}
	}
	if runID == "" {
		runID = newRunID(time.Now())
	} else if err := loadgen.CheckRunID(runID); err != nil {
		return nil, "", usageError(stderr, "%s", plain(err)), false
	}
	if err := c.Validate(resolve); err != nil {
		return nil, "", usageError(stderr, "%s", plain(err)), false
	}
	return &c, runID, exitOK, true
}

// plain is err's text without package loadgen's prefixes: limitload
// prints its own.
func plain(err error) string {
	lines := strings.Split(err.Error(), "\n") // errors.Join's
	for i, l := range lines {
		for _, prefix := range []string{loadgen.ErrConfig.Error() + ": ", loadgen.ErrFloodConfig.Error() + ": ", "loadgen: "} {
			l = strings.TrimPrefix(l, prefix)
		}
		lines[i] = l
	}
	return strings.Join(lines, "\n")
}

func usageError(stderr io.Writer, format string, a ...any) int {
	fmt.Fprintf(stderr, "limitload: %s\nRun \"limitload -h\" for usage.\n", fmt.Sprintf(format, a...))
	return exitUsage
}

func usage(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprint(w, `Usage: limitload [flags]
       limitload serve-noop [-listen HOST:PORT,...]   (no-op /check servers: the machine's ceiling)
       limitload flood [-target HOST:PORT] [-keys N]  (unique keys as fast as a node takes them, over gRPC)

limitload drives limiterd nodes over HTTP (GET /check on keep-alive
connections, many in flight) and measures what a client sees: rate,
latency, status codes, and per key the most requests accepted in any
window-long interval and the false rejections, from its own log of answers.
Requests are sent open loop, each at its scheduled instant whatever the
answers; the report says if the generator fell behind.

Patterns (--pattern), on one fresh key unless "keys":
  steady        one request every D/(K*N): K x the limit rate, 3 windows
  edge-burst    the seed's burst on both sides of a window edge: at 1 and 2
                windows, N requests spread over the twelfth of a window
                before the edge and N over the twelfth after
  intermittent  the seed's intermittent client at its limit: N requests
                spread over the first twelfth of each of 3 windows
  random        Poisson arrivals at --rate (default K x N/D) for --duration
  keys          Poisson arrivals at --rate in total over --keys keys with
                Zipf(--zipf-s) popularity, for --duration (default 60s)
The seed study's patterns use a 60 s window; with another --window every
instant is scaled by window/60s, and the report says so.

While running, a progress line goes to stderr every --progress; the report
goes to stdout (text, or JSON with --json). Ctrl-C stops sending and prints
the report of what was answered (exit status 130). Sending stops at
--duration + --timeout whatever happens: a generator still behind schedule
then leaves the rest unsent, and the report says how many.

Exit status: 0 done, 1 preflight or output failed, 2 usage error,
130 interrupted. Flags may be written with one dash or two.

Examples:
  limitload --targets 127.0.0.1:8081,127.0.0.1:8082 --pattern edge-burst --limit 600 --window 10s
  limitload --targets 127.0.0.1:8081 --pattern keys --keys 200000 --rate 40000 --duration 60s --limit 600 --window 60s --json

Flags:
`)
	fs.PrintDefaults()
}
