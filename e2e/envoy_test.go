package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// envoyRules is an envoyproxy/ratelimit file as Envoy users have them.
const envoyRules = `domain: e2e
descriptors:
  - key: user
    rate_limit:
      unit: minute
      requests_per_unit: 30
`

func userCall(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
	}}
}

// TestEnvoyRateLimitServiceCluster: three nodes decide one key asked over
// gRPC on all three, as Envoy's rate limit filter asks, round robin: the
// first 30 calls of the minute are OK (a compliant client is never
// denied), and the cluster admits at most 1.1 × 30.
func TestEnvoyRateLimitServiceCluster(t *testing.T) {
	// A deadline no loaded CI box misses: this test is about the frontend.
	c := nodetest.Start(t, nodetest.Config{Nodes: 3, Rules: []string{envoyRules}, Args: []string{"-coordinator-deadline", "200ms"}})
	nodetest.Eventually(t, "three members everywhere", 20*time.Second, func() bool {
		for _, p := range c.Procs {
			m, err := p.Members()
			if err != nil || nodetest.CountState(m, "alive") != 3 {
				return false
			}
		}
		return true
	})
	clients := []rlsv3.RateLimitServiceClient{c.Procs[0].RLS(t), c.Procs[1].RLS(t), c.Procs[2].RLS(t)}
	okCount, firstDenied := 0, -1
	for i := range 45 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		resp, err := clients[i%3].ShouldRateLimit(ctx, userCall("alice"))
		cancel()
		if err != nil {
			t.Fatalf("call %d on %s: %v", i+1, c.Procs[i%3].Name, err)
		}
		if resp.OverallCode == rlsv3.RateLimitResponse_OK {
			okCount++
		} else if firstDenied < 0 {
			firstDenied = i
		}
		if st := resp.Statuses[0]; st.CurrentLimit.GetRequestsPerUnit() != 30 {
			t.Fatalf("call %d: %v", i+1, st)
		}
	}
	if firstDenied >= 0 && firstDenied < 30 {
		t.Fatalf("call %d denied with fewer than 30 admitted before it", firstDenied+1)
	}
	if okCount < 30 || okCount > 33 {
		t.Fatalf("%d of 45 calls OK over three nodes; want between 30 and 33 (1.1 × 30)", okCount)
	}
	// Every node counts them: alice's calls went to all three.
	for _, p := range c.Procs {
		if got, ok := p.Metrics(t).Value("limiterd_grpc_requests_total", "result", "ok"); !ok || got == 0 {
			t.Errorf(`%s: limiterd_grpc_requests_total{result="ok"} %v (exported: %v)`, p.Name, got, ok)
		}
	}
	t.Logf("%d of 45 calls OK, first denial at call %d", okCount, firstDenied+1)
}

// grpcurl is installed once per test binary run from its Go module (the
// module proxy serves it), into the user's cache so later runs reuse it.
var grpcurlOnce = struct {
	sync.Once
	path string
	err  error
}{}

const grpcurlModule = "github.com/fullstorydev/grpcurl/cmd/grpcurl@v1.9.4"

func grpcurlBinary(t *testing.T) string {
	t.Helper()
	grpcurlOnce.Do(func() {
		dir, err := os.UserCacheDir()
		if err != nil {
			dir = os.TempDir()
		}
		bin := filepath.Join(dir, "limiterd-tests", "grpcurl-v1.9.4")
		if _, err := os.Stat(filepath.Join(bin, "grpcurl")); err == nil {
			grpcurlOnce.path = filepath.Join(bin, "grpcurl")
			return
		}
		cmd := exec.Command("go", "install", grpcurlModule)
		cmd.Env = append(os.Environ(), "GOBIN="+bin, "GOFLAGS=")
		cmd.Dir = os.TempDir() // outside this module: its own go.mod would not do
		if out, err := cmd.CombinedOutput(); err != nil {
			grpcurlOnce.err = err
			grpcurlOnce.path = string(out)
			return
		}
		grpcurlOnce.path = filepath.Join(bin, "grpcurl")
	})
	if grpcurlOnce.err != nil {
		// Only the module proxy can give it; without it the generated
		// client's tests (package rls and the test above) still cover every
		// field, as Envoy itself sends them.
		t.Skipf("grpcurl could not be installed with go install %s (%v): %s", grpcurlModule, grpcurlOnce.err, grpcurlOnce.path)
	}
	return grpcurlOnce.path
}

// TestGrpcurl: the real grpcurl, through the server's reflection, lists
// the service, checks health and asks ShouldRateLimit as a user would.
func TestGrpcurl(t *testing.T) {
	grpcurl := grpcurlBinary(t)
	c := nodetest.Start(t, nodetest.Config{Nodes: 1, Rules: []string{envoyRules}})
	p := c.Procs[0]
	run := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(grpcurl, append([]string{"-plaintext", "-max-time", "10"}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("grpcurl %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	if out := run(p.GRPC, "list"); !strings.Contains(out, "envoy.service.ratelimit.v3.RateLimitService") || !strings.Contains(out, "grpc.health.v1.Health") {
		t.Fatalf("grpcurl list:\n%s", out)
	}
	if out := run(p.GRPC, "grpc.health.v1.Health/Check"); !strings.Contains(out, "SERVING") {
		t.Fatalf("health:\n%s", out)
	}
	req := `{"domain":"e2e","descriptors":[{"entries":[{"key":"user","value":"bob"}]}],"hits_addend":29}`
	var resp struct {
		OverallCode string `json:"overallCode"`
		Statuses    []struct {
			Code         string `json:"code"`
			CurrentLimit struct {
				RequestsPerUnit int    `json:"requestsPerUnit"`
				Unit            string `json:"unit"`
			} `json:"currentLimit"`
			LimitRemaining int `json:"limitRemaining"`
		} `json:"statuses"`
		ResponseHeadersToAdd []struct{ Key, Value string } `json:"responseHeadersToAdd"`
	}
	out := run("-d", req, p.GRPC, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
	if err := json.Unmarshal([]byte(out), &resp); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if resp.OverallCode != "OK" || len(resp.Statuses) != 1 || resp.Statuses[0].CurrentLimit.RequestsPerUnit != 30 ||
		resp.Statuses[0].CurrentLimit.Unit != "MINUTE" || resp.Statuses[0].LimitRemaining != 1 {
		t.Fatalf("29 hits of 30:\n%s", out)
	}
	out = run("-d", strings.Replace(req, `"hits_addend":29`, `"hits_addend":2`, 1), p.GRPC, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit")
	if !strings.Contains(out, `"overallCode": "OVER_LIMIT"`) || !strings.Contains(out, "Retry-After") {
		t.Fatalf("2 more hits:\n%s", out)
	}
	// A malformed call: InvalidArgument, as grpcurl shows it.
	bad, err := exec.Command(grpcurl, "-plaintext", "-max-time", "10", "-d", `{"domain":"","descriptors":[]}`, p.GRPC, "envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit").CombinedOutput()
	if err == nil || !strings.Contains(string(bad), "InvalidArgument") || !strings.Contains(string(bad), "domain must not be empty") {
		t.Fatalf("an empty domain: %v\n%s", err, bad)
	}
}
