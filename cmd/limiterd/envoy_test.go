package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const envoyV1 = `domain: t
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 3
`

// TestServeEnvoyRulesBesideOurs: -rules twice, limiterd's YAML and an
// envoyproxy/ratelimit file side by side; /check decides by the one and
// -grpc-addr by the other, and a change of the Envoy file reloads both
// together, an invalid one keeping the rules in force.
func TestServeEnvoyRulesBesideOurs(t *testing.T) {
	dir := t.TempDir()
	ours, envoy := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "envoy.yaml")
	for p, s := range map[string]string{ours: rulesV1, envoy: envoyV1} {
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	grpcAddr := ln.Addr().String()
	ln.Close()
	base, stop := startDaemon(t, ours, "-rules", envoy, "-grpc-addr", grpcAddr)
	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rl := rlsv3.NewRateLimitServiceClient(conn)
	ask := func(user string) rlsv3.RateLimitResponse_Code {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		resp, err := rl.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "t", Descriptors: []*commonv3.RateLimitDescriptor{
			{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		return resp.OverallCode
	}
	for i, want := range []rlsv3.RateLimitResponse_Code{rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OK, rlsv3.RateLimitResponse_OVER_LIMIT} {
		if got := ask("u1"); got != want {
			t.Fatalf("gRPC call %d: %v, want %v", i+1, got, want)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if code, body := get(t, base+"/check?key=a"); code != want {
			t.Fatalf("check %d: %d %s, want %d", i+1, code, body, want)
		}
	}

	if err := os.WriteFile(envoy, []byte(strings.Replace(envoyV1, "requests_per_unit: 3", "requests_per_unit: 1", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the Envoy file reloaded", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 1`)
	})
	if a, b := ask("u2"), ask("u2"); a != rlsv3.RateLimitResponse_OK || b != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("after the reload to 1 a minute: %v, %v", a, b)
	}
	if code, _ := get(t, base+"/check?key=a"); code != 429 {
		t.Fatalf("our rules after the Envoy file's reload: %d, want 429 (counts kept)", code)
	}

	if err := os.WriteFile(envoy, []byte("domain: t\ndescriptors:\n  - key: user\n    rate_limit: {unit: fortnight, requests_per_unit: 1}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the invalid Envoy file refused", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="failure"} 1`)
	})
	if a := ask("u3"); a != rlsv3.RateLimitResponse_OK {
		t.Fatalf("the rules in force after an invalid file: %v", a)
	}
	if a := ask("u3"); a != rlsv3.RateLimitResponse_OVER_LIMIT {
		t.Fatalf("the rules in force after an invalid file: second call %v, want over 1 a minute", a)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestReloadIgnoresOtherFiles: a file written again and again beside the
// rules (a log, an editor's swap file) does not hold reloads back, and
// what is written to it is not taken for a change of the rules.
func TestReloadIgnoresOtherFiles(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(rulesV1), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startDaemon(t, path)
	noise := filepath.Join(dir, "noise.log")
	done := make(chan struct{})
	defer close(done)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // far inside the 100 ms settle time
			}
			_ = os.WriteFile(noise, []byte(strings.Repeat("x", i%100)), 0o644)
		}
	}()
	time.Sleep(200 * time.Millisecond)
	if err := os.WriteFile(path, []byte(rulesV2), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reload despite the noise", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 1`)
	})
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}
