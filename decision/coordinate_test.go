package decision

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// peerCoordinator is a coordinator node in memory: another node's counter
// decides every ask, unless block is set, in which case no answer comes
// before ctx is done.
type peerCoordinator struct {
	c       *counter.Counter
	block   bool
	ids     uint64
	asked   int
	release int
}

func (p *peerCoordinator) Coordinate(ctx context.Context, t time.Time, ask *counter.Ask, res []counter.Result) (bool, bool, error) {
	p.asked++
	p.ids++
	if p.block {
		<-ctx.Done()
		p.release++
		return false, false, ctx.Err()
	}
	d, err := p.c.Coordinate(t, "a", p.ids, ask, res)
	return d.Allowed, false, err
}

// clusterLimiter is node name's limiter of 10 per second in a 2-node
// coordinated cluster: no blind share, so every check asks.
func clusterLimiter(t *testing.T, name string) (*counter.Counter, *limiter.Limiter) {
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
	rs, err := limiter.Parse("test.yaml", []byte("rules:\n  - name: default\n    limit: 10\n    window: 1s\n"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := limiter.New(c, rs)
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// TestDecideAtTheMargin: the coordinator's grants and denials are the
// answer, what remains is its view, and without an answer within the
// deadline the node decides alone and counts a fallback.
func TestDecideAtTheMargin(t *testing.T) {
	_, la := clusterLimiter(t, "a")
	ck, _ := clusterLimiter(t, "k")
	pc := &peerCoordinator{c: ck}
	cfg := DefaultConfig()
	cfg.Now, cfg.Coordinator, cfg.Deadline = t0, pc, time.Millisecond
	d, reg := newTestDeciderCfg(t, cfg, la, nil)
	var out Result
	for i := range 10 {
		if err := d.Decide(context.Background(), limiter.Request{Key: "x", Hits: 1}, &out); err != nil {
			t.Fatal(err)
		}
		if !out.Decision.Allowed || out.Outcome != OutcomeAllowed || out.Decision.Decided != limiter.DecidedByCoordinator || out.Decision.Limits[0].Remaining != int64(9-i) {
			t.Fatalf("check %d: %+v", i, out)
		}
	}
	if pc.asked != 10 {
		t.Fatalf("asked %d times, want 10", pc.asked)
	}
	// The 11th: node a counted the 10 grants itself, so its own view is
	// full and it denies without asking.
	if err := d.Decide(context.Background(), limiter.Request{Key: "x", Hits: 1}, &out); err != nil || out.Decision.Allowed || out.Decision.Decided != limiter.DecidedHere || pc.asked != 10 {
		t.Fatalf("11th: %+v %v, asked %d", out, err, pc.asked)
	}
	// Another key, with a coordinator that never answers: the deadline
	// passes and the budget decides (it allows: nothing is unacknowledged).
	pc.block = true
	if err := d.Decide(context.Background(), limiter.Request{Key: "y", Hits: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Decision.Allowed || out.Decision.Decided != limiter.DecidedInFallback || pc.release != 1 {
		t.Fatalf("fallback: %+v, released %d", out, pc.release)
	}
	for result, want := range map[string]float64{"granted": 10, "denied": 0, "fallback_timeout": 1, "fallback_unavailable": 0} {
		if got := value(t, reg, "limiterd_coordinated_checks_total", map[string]string{"result": result}); got != want {
			t.Errorf("limiterd_coordinated_checks_total{result=%q} = %v, want %v", result, got, want)
		}
	}
	if got := value(t, reg, "limiterd_coordinator_wait_seconds", nil); got != 11 {
		t.Errorf("limiterd_coordinator_wait_seconds count %v, want 11", got)
	}
}

// TestDecideWithoutCoordinator: a check left to the coordinator by a
// counter in coordinated mode, on a Decider without one, is decided alone
// and counted as a fallback that could not ask.
func TestDecideWithoutCoordinator(t *testing.T) {
	_, la := clusterLimiter(t, "a")
	d, reg := newTestDecider(t, la, nil)
	var out Result
	if err := d.Decide(context.Background(), limiter.Request{Key: "x", Hits: 1}, &out); err != nil {
		t.Fatal(err)
	}
	if !out.Decision.Allowed || out.Decision.Decided != limiter.DecidedInFallback {
		t.Fatalf("%+v", out)
	}
	if got := value(t, reg, "limiterd_coordinated_checks_total", map[string]string{"result": "fallback_unavailable"}); got != 1 {
		t.Errorf("fallback_unavailable = %v, want 1", got)
	}
}

// TestNewNeedsCompleter: a Coordinator is refused beside a Checker that
// cannot complete a check.
func TestNewNeedsCompleter(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Coordinator = &peerCoordinator{}
	if _, err := New(cfg, answer(allowed(), nil), prometheus.NewRegistry(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("New: %v, want ErrInvalidConfig", err)
	}
	cfg = DefaultConfig()
	cfg.Deadline = 2 * time.Second
	if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("Validate of a 2s deadline: %v", err)
	}
}
