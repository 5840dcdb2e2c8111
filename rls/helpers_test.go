package rls

import (
	"context"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

// clock is the tests' time: it moves only when told.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// fixture is a Service on a real gRPC server on 127.0.0.1, with the
// client Envoy's generated types give.
type fixture struct {
	client rlsv3.RateLimitServiceClient
	reg    *prometheus.Registry
	clock  *clock
	lim    *limiter.Limiter
}

type fixtureOpts struct {
	cfg     Config
	checker decision.Checker // nil: the limiter
}

// built is a Service and what it decides with.
type built struct {
	svc *Service
	lim *limiter.Limiter
	reg *prometheus.Registry
}

// build makes a Service over a fresh counter with the rule files given as
// (name, content) pairs, merged, deciding at now (nil: the real clock)
// through checker (nil: the limiter).
func build(tb testing.TB, cfg Config, now func() time.Time, checker decision.Checker, files ...string) built {
	tb.Helper()
	ctr, err := counter.New(counter.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	var sets []*limiter.RuleSet
	for i := 0; i+1 < len(files); i += 2 {
		rs, err := limiter.Parse(files[i], []byte(files[i+1]))
		if err != nil {
			tb.Fatal(err)
		}
		sets = append(sets, rs)
	}
	rs := sets[0]
	if len(sets) > 1 {
		if rs, err = limiter.Merge(sets...); err != nil {
			tb.Fatal(err)
		}
	}
	lim, err := limiter.New(ctr, rs)
	if err != nil {
		tb.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	if checker == nil {
		checker = lim
	}
	dec, err := decision.New(decision.Config{Now: now}, checker, reg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	svc, err := New(cfg, dec, lim, reg, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return built{svc, lim, reg}
}

// serve serves svc over gRPC on 127.0.0.1 until the test ends and returns
// its address.
func serve(tb testing.TB, svc *Service) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	g := NewServer(svc)
	go g.Serve(ln)
	tb.Cleanup(g.Stop)
	return ln.Addr().String()
}

// dial returns a client of Envoy's generated types for addr.
func dial(tb testing.TB, addr string) rlsv3.RateLimitServiceClient {
	tb.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// newFixture serves the rule files given as (name, content) pairs.
func newFixture(t *testing.T, o fixtureOpts, files ...string) *fixture {
	t.Helper()
	clk := &clock{t: time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)}
	b := build(t, o.cfg, clk.now, o.checker, files...)
	return &fixture{client: dial(t, serve(t, b.svc)), reg: b.reg, clock: clk, lim: b.lim}
}

// desc builds a descriptor from key, value pairs.
func desc(kv ...string) *commonv3.RateLimitDescriptor {
	d := &commonv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &commonv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func (f *fixture) call(t *testing.T, domain string, ds ...*commonv3.RateLimitDescriptor) *rlsv3.RateLimitResponse {
	t.Helper()
	resp, err := f.client.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Statuses) != len(ds) {
		t.Fatalf("%d statuses for %d descriptors", len(resp.Statuses), len(ds))
	}
	return resp
}

func (f *fixture) metric(t *testing.T, name string, labels map[string]string) float64 {
	t.Helper()
	v, _, err := promtest.Series(f.reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// header returns the value of a response header, "" if absent.
func header(resp *rlsv3.RateLimitResponse, key string) string {
	for _, h := range resp.ResponseHeadersToAdd {
		if h.Key == key {
			return h.Value
		}
	}
	return ""
}

func readme(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("../limiter/envoyrules/testdata/readme/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func mustRead(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// newFuzzService is a Service without a network, for the fuzz target.
func newFuzzService(tb testing.TB, rules string) *Service {
	tb.Helper()
	return build(tb, DefaultConfig(), nil, nil, "rules.yaml", rules).svc
}
