package main

import (
	"bytes"
	"context"
	"encoding/json"
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

	var out, errb bytes.Buffer
	code := floodMain(context.Background(), []string{"-target", ln.Addr().String(), "-keys", "1300", "-first", "36", "-per-call", "64", "-conns", "3", "-descriptor-key", "user", "-domain", "d"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r floodReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
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
	var out, errb bytes.Buffer
	start := time.Now()
	code := floodMain(context.Background(), []string{"-target", ln.Addr().String(), "-keys", "100", "-max-duration", "300ms", "-call-timeout", "100ms"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r floodReport
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if r.Complete || r.Keys != 0 || time.Since(start) > 5*time.Second {
		t.Fatalf("report %+v after %v", r, time.Since(start))
	}
}

func TestFloodUsage(t *testing.T) {
	for _, args := range [][]string{{"-per-call", "65"}, {"-keys", "0"}, {"-conns", "0"}, {"extra"}, {"-max-duration", "0s"}, {"-target", "192.0.2.1:8081"}} {
		var out, errb bytes.Buffer
		if code := floodMain(context.Background(), args, &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errb.String())
		}
	}
}
