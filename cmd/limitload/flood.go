package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// floodConfig is "limitload flood": unique keys, each asked once, as fast
// as a node takes them.
type floodConfig struct {
	target      string // HOST:PORT of limiterd's -grpc-addr
	domain, key string // the request's domain and the descriptor's key
	keys        int64  // how many unique keys, values 0… in base 36
	first       int64  // the first value, so that runs do not repeat keys
	perCall     int    // descriptors per ShouldRateLimit call
	conns       int    // connections, one sender each
	maxDuration time.Duration
	callTimeout time.Duration
	allowRemote bool
}

// floodReport is what a flood measured.
type floodReport struct {
	Keys        int64   `json:"keys"`         // sent and answered
	Calls       int64   `json:"calls"`        // answered
	FailedCalls int64   `json:"failed_calls"` // errors, timeouts
	OverLimit   int64   `json:"over_limit"`   // descriptors answered OVER_LIMIT
	Seconds     float64 `json:"seconds"`
	KeysPerSec  float64 `json:"keys_per_second"`
	Complete    bool    `json:"complete"` // every key sent before -max-duration
}

// floodMain is "limitload flood": it parses args, floods, and prints the
// report as one JSON line on stdout.
func floodMain(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitload flood", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var c floodConfig
	fs.StringVar(&c.target, "target", "127.0.0.1:8081", "`HOST:PORT` of the node's Envoy rate limit service (limiterd -grpc-addr)")
	fs.StringVar(&c.domain, "domain", "flood", "the requests' `DOMAIN` (an envoyproxy/ratelimit file's domain in the node's -rules)")
	fs.StringVar(&c.key, "descriptor-key", "k", "the descriptor entry's `KEY`; each value is a key of its own")
	fs.Int64Var(&c.keys, "keys", 10_000_000, "how many unique keys to send, `N`, each once")
	fs.Int64Var(&c.first, "first", 0, "the first key's number `N` (values are numbers in base 36), so that a second run sends new keys")
	fs.IntVar(&c.perCall, "per-call", 64, "descriptors per call, `N` (limiterd takes at most 64)")
	fs.IntVar(&c.conns, "conns", 4, "connections, `N`, each with one call in flight")
	fs.DurationVar(&c.maxDuration, "max-duration", 10*time.Minute, "stop sending after `D`, sent or not (the report says whether every key was)")
	fs.DurationVar(&c.callTimeout, "call-timeout", 10*time.Second, "a call unanswered after `D` counts as failed")
	fs.BoolVar(&c.allowRemote, "allow-remote", false, "allow a target outside 127.0.0.0/8 and ::1")
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
	switch {
	case fs.NArg() > 0:
		return usageError(stderr, "flood takes no arguments, got %q", fs.Args())
	case c.keys < 1 || c.first < 0:
		return usageError(stderr, "-keys must be at least 1 and -first at least 0")
	case c.perCall < 1 || c.perCall > 64:
		return usageError(stderr, "-per-call must be between 1 and 64, got %d", c.perCall)
	case c.conns < 1 || c.conns > 256:
		return usageError(stderr, "-conns must be between 1 and 256, got %d", c.conns)
	case c.maxDuration <= 0 || c.callTimeout <= 0:
		return usageError(stderr, "-max-duration and -call-timeout must be positive")
	}
	target, err := resolveTarget(c.target, c.allowRemote, lookupHost)
	if err != nil {
		return usageError(stderr, "%s", plain(err))
	}
	c.target = target
	r, err := flood(ctx, c)
	if err != nil {
		fmt.Fprintf(stderr, "limitload: %v\n", err)
		return exitRuntime
	}
	json.NewEncoder(stdout).Encode(r)
	return exitOK
}

// flood sends c.keys unique keys, c.perCall a call, over c.conns
// connections, until all are sent, ctx ends or c.maxDuration passes.
func flood(ctx context.Context, c floodConfig) (floodReport, error) {
	ctx, cancel := context.WithTimeout(ctx, c.maxDuration)
	defer cancel()
	var next, keys, calls, failed, over atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.conns {
		conn, err := grpc.NewClient(c.target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return floodReport{}, fmt.Errorf("flood: %w", err)
		}
		defer conn.Close()
		rls := rlsv3.NewRateLimitServiceClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]*commonv3.RateLimitDescriptor, c.perCall)
			for ctx.Err() == nil {
				i := next.Add(int64(c.perCall)) - int64(c.perCall)
				if i >= c.keys {
					return
				}
				n := min(int64(c.perCall), c.keys-i)
				for j := range n {
					ds[j] = &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{
						{Key: c.key, Value: strconv.FormatInt(c.first+i+j, 36)},
					}}
				}
				cctx, ccancel := context.WithTimeout(ctx, c.callTimeout)
				resp, err := rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: c.domain, Descriptors: ds[:n]})
				ccancel()
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
					}
					continue
				}
				calls.Add(1)
				keys.Add(n)
				for _, st := range resp.Statuses {
					if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
						over.Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	took := time.Since(start)
	return floodReport{
		Keys: keys.Load(), Calls: calls.Load(), FailedCalls: failed.Load(), OverLimit: over.Load(),
		Seconds: took.Seconds(), KeysPerSec: float64(keys.Load()) / took.Seconds(), Complete: keys.Load() == c.keys,
	}, nil
}
