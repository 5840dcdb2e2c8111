package decision

import (
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

// t0 is the fixed instant the tests decide at.
func t0() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }

// checkFunc adapts a function to Checker.
type checkFunc func(t time.Time, req limiter.Request, d *limiter.Decision) error

func (f checkFunc) Check(t time.Time, req limiter.Request, d *limiter.Decision) error {
	return f(t, req, d)
}

// answer is a Checker that always writes d and returns err.
func answer(d limiter.Decision, err error) Checker {
	return checkFunc(func(_ time.Time, _ limiter.Request, dst *limiter.Decision) error {
		*dst = d
		return err
	})
}

// allowed is the decision of a default rule of 600/60s with room left.
func allowed() limiter.Decision {
	d := limiter.Decision{Allowed: true, WouldAllow: true, Rule: "default", N: 1}
	d.Limits[0] = limiter.LimitResult{Policy: "default", Limit: 600, Window: time.Minute,
		Allowed: true, Remaining: 599, Reset: 54*time.Second + 200*time.Millisecond}
	return d
}

// denied is the decision of the same rule without room.
func denied() limiter.Decision {
	d := limiter.Decision{Rule: "default", N: 1, RetryAfter: 4200 * time.Millisecond}
	d.Limits[0] = limiter.LimitResult{Policy: "default", Limit: 600, Window: time.Minute,
		Remaining: 0, RetryAfter: 4200 * time.Millisecond, Reset: 59 * time.Second}
	return d
}

// twoLimits is a rule "api" of 10/1s (2 left) and 600/60s (1 left), each
// limit out of room when told so.
func twoLimits(allow1s, allow60s bool) limiter.Decision {
	d := limiter.Decision{Rule: "api", N: 2, Allowed: allow1s && allow60s, WouldAllow: allow1s && allow60s}
	d.Limits[0] = limiter.LimitResult{Policy: "api/1s", Limit: 10, Window: time.Second, Allowed: allow1s,
		Remaining: 2, Reset: 800 * time.Millisecond}
	d.Limits[1] = limiter.LimitResult{Policy: "api/60s", Limit: 600, Window: time.Minute, Allowed: allow60s,
		Remaining: 1, Reset: 30 * time.Second}
	if !allow1s {
		d.Limits[0].Remaining, d.Limits[0].RetryAfter = 0, 250*time.Millisecond
		d.RetryAfter = 250 * time.Millisecond
	}
	if !allow60s {
		d.Limits[1].Remaining, d.Limits[1].RetryAfter = 0, 12001*time.Millisecond
		d.RetryAfter = 12001 * time.Millisecond
	}
	return d
}

// newTestDecider builds a Decider over c at the fixed instant t0, on a fresh
// registry; log may be nil.
func newTestDecider(t testing.TB, c Checker, log *slog.Logger) (*Decider, *prometheus.Registry) {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Now = t0
	return newTestDeciderCfg(t, cfg, c, log)
}

// newRealLimiter is a limiter with rules over a fresh counter.
func newRealLimiter(tb testing.TB, rules string) *limiter.Limiter {
	tb.Helper()
	rs, err := limiter.Parse("test.yaml", []byte(rules))
	if err != nil {
		tb.Fatal(err)
	}
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		tb.Fatal(err)
	}
	lim, err := limiter.New(c, rs)
	if err != nil {
		tb.Fatal(err)
	}
	return lim
}

// series returns the value of the counter or the sample count of the
// histogram name{labels} in reg, and whether that series exists.
func series(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	v, ok, err := promtest.Series(reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v, ok
}

// value is series without the existence flag: 0 for an absent series.
func value(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	v, _ := series(t, reg, name, labels)
	return v
}

// decisions returns limiterd_decisions_total{rule,outcome}.
func decisions(t testing.TB, reg *prometheus.Registry, rule, outcome string) float64 {
	t.Helper()
	return value(t, reg, "limiterd_decisions_total", map[string]string{"rule": rule, "outcome": outcome})
}

// newTestDeciderCfg is newTestDecider with a Config of its own.
func newTestDeciderCfg(t testing.TB, cfg Config, c Checker, log *slog.Logger) (*Decider, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	d, err := New(cfg, c, reg, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d, reg
}
