package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
)

// countingRLS answers every descriptor OK, or OVER_LIMIT for values
// starting with "z", and remembers the values it saw.
type countingRLS struct {
	rlsv3.UnimplementedRateLimitServiceServer
	mu     sync.Mutex
	seen   map[string]int
	domain string
}

func (s *countingRLS) ShouldRateLimit(_ context.Context, r *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.domain = r.Domain
	resp := &rlsv3.RateLimitResponse{OverallCode: rlsv3.RateLimitResponse_OK}
	for _, d := range r.Descriptors {
		v := d.Entries[0].Value
		s.seen[d.Entries[0].Key+"="+v]++
		code := rlsv3.RateLimitResponse_OK
		if strings.HasPrefix(v, "z") {
			code = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		resp.Statuses = append(resp.Statuses, &rlsv3.RateLimitResponse_DescriptorStatus{Code: code})
	}
	return resp, nil
}

func TestFloodSendsEveryKeyOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	fake := &countingRLS{seen: map[string]int{}}
	rlsv3.RegisterRateLimitServiceServer(srv, fake)
	go srv.Serve(ln)
	defer srv.Stop()

	c := DefaultFloodConfig()
	c.Target, c.Keys, c.First, c.PerCall, c.Conns, c.DescriptorKey, c.Domain = ln.Addr().String(), 1300, 36, 64, 3, "user", "d"
	r := flood(t, c)
	// 1300 keys, 64 a call: 20 full calls and one of 20.
	if r.Keys != 1300 || r.Calls != 21 || r.FailedCalls != 0 || !r.Complete || r.KeysPerSec <= 0 {
		t.Fatalf("report %+v", r)
	}
	if len(fake.seen) != 1300 || fake.domain != "d" {
		t.Fatalf("the server saw %d distinct keys (domain %q), want 1300", len(fake.seen), fake.domain)
	}
	for k, n := range fake.seen {
		if n != 1 || !strings.HasPrefix(k, "user=") {
			t.Fatalf("%s sent %d times", k, n)
		}
	}
	if _, ok := fake.seen["user=10"]; !ok { // 36 in base 36, the first
		t.Fatal("-first 36 did not start at 10 (base 36)")
	}
	// Values 36..1335 in base 36 that start with z: z0..zz (1260..1295).
	if r.OverLimit != 36 {
		t.Errorf("%d descriptors over the limit, want 36", r.OverLimit)
	}
}

func TestFloodStopsAtMaxDuration(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close() // accepts nothing: every call waits
	start := time.Now()
	c := DefaultFloodConfig()
	c.Target, c.Keys, c.MaxDuration, c.CallTimeout = ln.Addr().String(), 100, 300*time.Millisecond, 100*time.Millisecond
	r := flood(t, c)
	if r.Complete || r.Keys != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("report %+v after %v", r, time.Since(start))
	}
}

// flood validates c, floods, and returns the report as limitload flood
// prints it, read back from its JSON.
func flood(t *testing.T, c FloodConfig) FloodReport {
	t.Helper()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	r, err := Flood(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back FloodReport
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return back
}

func TestFloodConfigValidate(t *testing.T) {
	if err := DefaultFloodConfig().Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	c := DefaultFloodConfig()
	c.PerCall, c.Conns = 65, 0
	err := c.Validate()
	if !errors.Is(err, ErrFloodConfig) || !strings.Contains(err.Error(), "-per-call") || !strings.Contains(err.Error(), "-conns") {
		t.Fatalf("per-call 65 and conns 0: %v, want both problems", err)
	}
}
