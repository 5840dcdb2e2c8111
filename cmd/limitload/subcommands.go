package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/limiterd/limiterd/internal/loadgen"
)

// serveNoop is "limitload serve-noop" (loadgen.ServeNoop): it parses args
// and serves until ctx ends. It returns the exit code.
func serveNoop(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitload serve-noop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`HOST:PORT[,HOST:PORT...]` to serve on, one server each (port 0: any; the addresses are printed)")
	limit := fs.Int("limit", 600, "the q= of the RateLimit-Policy answered, so that limitload's preflight passes with the same --limit")
	window := fs.Duration("window", time.Minute, "the w= of the RateLimit-Policy answered (whole seconds)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: limitload serve-noop [flags]\n\nServes /check with 200 and limiterd's headers, deciding nothing: the ceiling of a run on this machine.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if err := loadgen.ServeNoop(ctx, strings.Split(*listen, ","), *limit, *window, stderr); err != nil {
		fmt.Fprintf(stderr, "limitload serve-noop: %s\n", plain(err))
		return exitRuntime
	}
	return exitOK
}

// floodMain is "limitload flood" (loadgen.Flood): it parses args, floods,
// and prints the report as one JSON line on stdout.
func floodMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitload flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c := loadgen.DefaultFloodConfig()
	fs.StringVar(&c.Target, "target", c.Target, "`HOST:PORT` of the node's Envoy rate limit service (limiterd -grpc-addr)")
	fs.StringVar(&c.Domain, "domain", c.Domain, "the requests' `DOMAIN` (an envoyproxy/ratelimit file's domain in the node's -rules)")
	fs.StringVar(&c.DescriptorKey, "descriptor-key", c.DescriptorKey, "the descriptor entry's `KEY`; each value is a key of its own")
	fs.Int64Var(&c.Keys, "keys", c.Keys, "how many unique keys to send, `N`, each once")
	fs.Int64Var(&c.First, "first", c.First, "the first key's number `N` (values are numbers in base 36), so that a second run sends new keys")
	fs.IntVar(&c.PerCall, "per-call", c.PerCall, "descriptors per call, `N` (limiterd takes at most 64)")
	fs.IntVar(&c.Conns, "conns", c.Conns, "connections, `N`, each with one call in flight")
	fs.DurationVar(&c.MaxDuration, "max-duration", c.MaxDuration, "stop sending after `D`, sent or not (the report says whether every key was)")
	fs.DurationVar(&c.CallTimeout, "call-timeout", c.CallTimeout, "a call unanswered after `D` counts as failed")
	fs.BoolVar(&c.AllowRemote, "allow-remote", c.AllowRemote, "allow a target outside 127.0.0.0/8 and ::1")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `Usage: limitload flood [flags]

Sends -keys unique keys, each once, as fast as the node answers, over Envoy's
rate limit protocol (-per-call descriptors a call, the most keys a second
limiterd takes), and prints one JSON line: keys and calls answered, failed
calls, descriptors over the limit, seconds, keys/s, and whether every key
was sent within -max-duration. It measures what a flood of new clients
costs a node: watch its memory and limiterd_untracked_checks_total.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		return usageError(stderr, "flood takes no arguments, got %q", fs.Args())
	}
	if err := c.Validate(); err != nil {
		return usageError(stderr, "%s", plain(err))
	}
	target, err := loadgen.ResolveTarget(c.Target, c.AllowRemote, lookupHost)
	if err != nil {
		return usageError(stderr, "%s", plain(err))
	}
	c.Target = target
	r, err := loadgen.Flood(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "limitload: %s\n", plain(err))
		return exitRuntime
	}
	json.NewEncoder(stdout).Encode(r)
	return exitOK
}
