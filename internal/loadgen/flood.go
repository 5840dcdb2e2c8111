package loadgen

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// FloodConfig is a flood (limitload flood): unique keys, each asked once,
// as fast as a node takes them, over Envoy's rate limit protocol.
type FloodConfig struct {
	Target        string // HOST:PORT of limiterd's -grpc-addr (see ResolveTarget)
	Domain        string // the requests' domain
	DescriptorKey string // the descriptor entry's key; each value is a key of its own
	Keys          int64  // how many unique keys, values First… in base 36
	First         int64  // the first value, so that runs do not repeat keys
	PerCall       int    // descriptors per ShouldRateLimit call (limiterd takes at most 64)
	Conns         int    // connections, one call in flight each
	MaxDuration   time.Duration
	CallTimeout   time.Duration
	AllowRemote   bool // a Target outside 127.0.0.0/8 and ::1 (ResolveTarget's guard)
}

// DefaultFloodConfig is limitload flood's defaults: 10 million keys at
// 127.0.0.1:8081, 64 a call over 4 connections, for at most 10 minutes.
func DefaultFloodConfig() FloodConfig {
	return FloodConfig{
		Target: "127.0.0.1:8081", Domain: "flood", DescriptorKey: "k", Keys: 10_000_000,
		PerCall: 64, Conns: 4, MaxDuration: 10 * time.Minute, CallTimeout: 10 * time.Second,
	}
}

// ErrFloodConfig marks an invalid FloodConfig.
var ErrFloodConfig = errors.New("loadgen: invalid flood configuration")

// Validate returns every problem of c, each wrapping ErrFloodConfig.
func (c FloodConfig) Validate() error {
	var errs []error
	bad := func(format string, a ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrFloodConfig, fmt.Sprintf(format, a...)))
	}
	if c.Keys < 1 || c.First < 0 {
		bad("-keys must be at least 1 and -first at least 0")
	}
	if c.PerCall < 1 || c.PerCall > 64 {
		bad("-per-call must be between 1 and 64, got %d", c.PerCall)
	}
	if c.Conns < 1 || c.Conns > 256 {
		bad("-conns must be between 1 and 256, got %d", c.Conns)
	}
	if c.MaxDuration <= 0 || c.CallTimeout <= 0 {
		bad("-max-duration and -call-timeout must be positive")
	}
	return errors.Join(errs...)
}

// FloodReport is what a flood measured.
type FloodReport struct {
	Keys        int64   `json:"keys"`         // sent and answered
	Calls       int64   `json:"calls"`        // answered
	FailedCalls int64   `json:"failed_calls"` // errors, timeouts
	OverLimit   int64   `json:"over_limit"`   // descriptors answered OVER_LIMIT
	Seconds     float64 `json:"seconds"`
	KeysPerSec  float64 `json:"keys_per_second"`
	Complete    bool    `json:"complete"` // every key sent before MaxDuration
}

// Flood sends c.Keys unique keys, c.PerCall a call, over c.Conns
// connections, until all are sent, ctx ends or c.MaxDuration passes. c
// must have passed Validate and its Target ResolveTarget.
func Flood(ctx context.Context, c FloodConfig) (FloodReport, error) {
	ctx, cancel := context.WithTimeout(ctx, c.MaxDuration)
	defer cancel()
	var next, keys, calls, failed, over atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c.Conns {
		conn, err := grpc.NewClient(c.Target, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return FloodReport{}, fmt.Errorf("loadgen: flood: %w", err)
		}
		defer conn.Close()
		rls := rlsv3.NewRateLimitServiceClient(conn)
		wg.Add(1)
		go func() {
			defer wg.Done()
			ds := make([]*commonv3.RateLimitDescriptor, c.PerCall)
			for ctx.Err() == nil {
				i := next.Add(int64(c.PerCall)) - int64(c.PerCall)
				if i >= c.Keys {
					return
				}
				n := min(int64(c.PerCall), c.Keys-i)
				for j := range n {
					ds[j] = &commonv3.RateLimitDescriptor{Entries: []*commonv3.RateLimitDescriptor_Entry{
						{Key: c.DescriptorKey, Value: strconv.FormatInt(c.First+i+j, 36)},
					}}
				}
				cctx, ccancel := context.WithTimeout(ctx, c.CallTimeout)
				resp, err := rls.ShouldRateLimit(cctx, &rlsv3.RateLimitRequest{Domain: c.Domain, Descriptors: ds[:n]})
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
	return FloodReport{
		Keys: keys.Load(), Calls: calls.Load(), FailedCalls: failed.Load(), OverLimit: over.Load(),
		Seconds: took.Seconds(), KeysPerSec: float64(keys.Load()) / took.Seconds(), Complete: keys.Load() == c.Keys,
	}, nil
}
