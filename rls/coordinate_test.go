package rls

import (
	"context"
	"sync"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// peerCoordinator is another node's counter as the key's coordinator of
// every check at the margin, reached in memory; it keeps the asks.
type peerCoordinator struct {
	from string
	c    *counter.Counter
	mu   sync.Mutex
	asks []counter.Ask
	id   uint64
}

func (p *peerCoordinator) Coordinate(_ context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (bool, bool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.id++
	p.asks = append(p.asks, counter.Ask{Key: ask.Key, Limits: append([]string(nil), ask.Limits...), Max: append([]int64(nil), ask.Max...)})
	d, err := p.c.Coordinate(t, p.from, p.id, ask, results)
	return d.Allowed, false, err
}

// clusterCounter is a coordinated counter, one of two nodes.
func clusterCounter(t *testing.T, name string) *counter.Counter {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Nodes = 2
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestLimitOverrideGoesToTheCoordinator: in a coordinated cluster, a
// descriptor's own limit is decided at the margin by the key's
// coordinator, like a limit of the file: the ask states the override's
// limit, and the coordinator decides with it. k, the coordinator, counted
// one call of its own; a, which does not know of it, has its first call
// granted and its second denied by k: two a minute, counted cluster-wide.
func TestLimitOverrideGoesToTheCoordinator(t *testing.T) {
	rs, err := limiter.Parse("example1.yaml", []byte(readme(t, "example1.yaml")))
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	override := &limiter.LimitSpec{Limit: 2, Window: time.Minute}
	k := clusterCounter(t, "k")
	klim, err := limiter.New(k, rs)
	if err != nil {
		t.Fatal(err)
	}
	// k's own call, decided by k as the key's coordinator.
	key := envoyrules.CountKey("mongo_cps", []envoyrules.Entry{{Key: "database", Value: "users"}})
	var kd limiter.Decision
	kreq := limiter.Request{Key: key, Hits: 1, Limit: override}
	if err := klim.Check(now, kreq, &kd); err != nil || !kd.Coordinate {
		t.Fatalf("k's check: %+v %v, want Coordinate", kd, err)
	}
	var kask counter.Ask
	if err := klim.PrepareAsk(now, kreq, &kask); err != nil {
		t.Fatal(err)
	}
	if d, err := k.Coordinate(now, "k", 0, &kask, make([]counter.Result, 1)); err != nil || !d.Allowed {
		t.Fatalf("k's own check: %+v %v", d, err)
	}

	a := clusterCounter(t, "a")
	lim, err := limiter.New(a, rs)
	if err != nil {
		t.Fatal(err)
	}
	coord := &peerCoordinator{from: "a", c: k}
	dec, err := decision.New(decision.Config{Now: func() time.Time { return now }, Coordinator: coord, Deadline: time.Second}, lim, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := New(Config{}, dec, lim, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	d := desc("database", "users")
	d.Limit = &commonv3.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: 2, Unit: typev3.RateLimitUnit_MINUTE}
	for i := range 2 {
		resp, err := svc.ShouldRateLimit(context.Background(), &rlsv3.RateLimitRequest{Domain: "mongo_cps", Descriptors: []*commonv3.RateLimitDescriptor{d}})
		if err != nil {
			t.Fatal(err)
		}
		st := resp.Statuses[0]
		if want := i == 0; (st.Code == rlsv3.RateLimitResponse_OK) != want || st.CurrentLimit.GetRequestsPerUnit() != 2 {
			t.Fatalf("call %d: %v, want OK %v", i+1, st, want)
		}
	}
	if len(coord.asks) != 2 {
		t.Fatalf("%d asks reached the coordinator, want both calls", len(coord.asks))
	}
	for i, ask := range coord.asks {
		if ask.Key != key || len(ask.Limits) != 1 || len(ask.Max) != 1 || ask.Max[0] != 2 {
			t.Errorf("ask %d: key %q, limits %v, maxes %v; want %q with one limit stated at 2", i, ask.Key, ask.Limits, ask.Max, key)
		}
	}
}
