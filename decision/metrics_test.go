package decision

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

// TestMetricValues decides one request of every outcome, plus bad input,
// and checks every decision series.
func TestMetricValues(t *testing.T) {
	dec, reg := newTestDecider(t, checkFunc(func(_ time.Time, req limiter.Request, d *limiter.Decision) error {
		switch req.Key {
		case "allow":
			*d = allowed()
		case "deny":
			*d = denied()
		case "shadow":
			*d = denied()
			d.Rule, d.Shadow, d.Allowed = "trial", true, true
		case "norule":
			*d = limiter.Decision{Allowed: true, WouldAllow: true}
		case "untracked":
			*d = allowed()
			d.Untracked = true
		case "unknown-rule":
			return limiter.ErrUnknownRule
		case "too-many-hits":
			return limiter.ErrInvalidHits
		case "fail":
			return errors.New("broken")
		case "panic":
			panic("boom")
		}
		return nil
	}), nil)
	var res Result
	for _, key := range []string{
		"allow", "allow", "deny", "shadow", "norule", "untracked", "fail", "panic",
		"unknown-rule", "too-many-hits", "", "bad\xff",
	} {
		_ = dec.Decide(t.Context(), limiter.Request{Key: key, Hits: 1}, &res)
	}
	for _, tc := range []struct {
		rule, outcome string
		want          float64
	}{
		{"default", "allowed", 2},
		{"default", "denied", 1},
		{"default", "untracked", 1},
		{"default", "shadow_denied", 0},
		{"trial", "shadow_denied", 1},
		{"trial", "allowed", 0},
		{"", "unlimited", 1},
		{"", "error", 2},
		{"", "allowed", 0},
	} {
		if got := decisions(t, reg, tc.rule, tc.outcome); got != tc.want {
			t.Errorf("limiterd_decisions_total{rule=%q,outcome=%q} = %v, want %v", tc.rule, tc.outcome, got, tc.want)
		}
	}
	if got := value(t, reg, "limiterd_check_errors_total", nil); got != 2 {
		t.Errorf("limiterd_check_errors_total = %v, want 2", got)
	}
	// Every Checker call is timed, failures and the Checker's bad input
	// included; the keys Decide refused itself never reached it.
	if got := value(t, reg, "limiterd_check_duration_seconds", nil); got != 10 {
		t.Errorf("limiterd_check_duration_seconds count %v, want 10", got)
	}
	// The series of a rule appear with all their outcomes at its first decision.
	for o := range numOutcomes {
		if _, ok := series(t, reg, "limiterd_decisions_total", map[string]string{"rule": "trial", "outcome": o.String()}); !ok {
			t.Errorf("no series for rule trial, outcome %s", o)
		}
	}
}

// TestMetricsBeforeAnyDecision: the names, types and help dashboards depend
// on (unchanged from when httpapi registered them), and the series that
// exist from the start so that rate() works before the first failure.
func TestMetricsBeforeAnyDecision(t *testing.T) {
	_, reg := newTestDecider(t, answer(allowed(), nil), nil)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"limiterd_decisions_total":          "COUNTER Checks answered, by deciding rule (\"\" when none) and outcome.",
		"limiterd_check_duration_seconds":   "HISTOGRAM Time spent deciding one check (the limiter call, without HTTP parsing and writing).",
		"limiterd_check_errors_total":       "COUNTER Checks that failed inside the limiter (error or panic) and were allowed (NFR3).",
		"limiterd_coordinated_checks_total": "COUNTER Checks at the margin put to the key's coordinator, by result: granted, denied, or decided alone with the budget because no answer came in time (fallback_timeout) or none could come (fallback_unavailable).",
		"limiterd_coordinator_wait_seconds": "HISTOGRAM Time a check at the margin waited for the key's coordinator (the round trip, or the deadline).",
	}
	for _, mf := range mfs {
		w, ok := want[mf.GetName()]
		if !ok {
			t.Errorf("unexpected metric %s", mf.GetName())
			continue
		}
		if got := mf.GetType().String() + " " + mf.GetHelp(); got != w {
			t.Errorf("%s: %q, want %q", mf.GetName(), got, w)
		}
		delete(want, mf.GetName())
	}
	for name := range want {
		t.Errorf("%s is not exported before the first decision", name)
	}
	for o := range numOutcomes {
		if v, ok := series(t, reg, "limiterd_decisions_total", map[string]string{"rule": "", "outcome": o.String()}); !ok || v != 0 {
			t.Errorf(`limiterd_decisions_total{rule="",outcome=%q}: %v, exists %v; want 0 from the start`, o, v, ok)
		}
	}
	if _, ok := series(t, reg, "limiterd_check_errors_total", nil); !ok {
		t.Error("limiterd_check_errors_total is not exported at 0")
	}
}

// TestRuleLabelCardinality: the rule label takes only the names the Checker
// decided under, whatever keys and rule names clients send.
func TestRuleLabelCardinality(t *testing.T) {
	dec, reg := newTestDecider(t, checkFunc(func(_ time.Time, req limiter.Request, d *limiter.Decision) error {
		if req.Rule != "" {
			return fmt.Errorf("%w: %q", limiter.ErrUnknownRule, req.Rule)
		}
		*d = allowed()
		return nil
	}), nil)
	var res Result
	for i := range 500 {
		_ = dec.Decide(t.Context(), limiter.Request{Key: fmt.Sprintf("client-%d", i), Hits: 1}, &res)
		_ = dec.Decide(t.Context(), limiter.Request{Key: fmt.Sprintf("client-%d", i), Rule: fmt.Sprintf("made-up-%d", i), Hits: 1}, &res)
	}
	rules, err := promtest.LabelValues(reg, "limiterd_decisions_total", "rule")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || !rules[""] || !rules["default"] {
		t.Errorf("rule label values %v, want exactly \"\" and \"default\"", rules)
	}
	if got := decisions(t, reg, "default", "allowed"); got != 500 {
		t.Errorf("allowed = %v, want 500", got)
	}
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	if _, err := New(DefaultConfig(), nil, prometheus.NewRegistry(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Checker: %v", err)
	}
	if _, err := New(DefaultConfig(), answer(allowed(), nil), nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Registerer: %v", err)
	}
	// Metrics registered twice on one registry is a wiring mistake, reported.
	reg := prometheus.NewRegistry()
	if _, err := New(DefaultConfig(), answer(allowed(), nil), reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig(), answer(allowed(), nil), reg, nil); err == nil || !strings.Contains(err.Error(), "decision: registering metrics") {
		t.Errorf("second New on one registry: %v", err)
	}
	// A failed New leaves the registry as it found it: the metrics
	// registered before the clash are taken back.
	reg = prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "limiterd_check_errors_total", Help: "clash"}))
	if _, err := New(DefaultConfig(), answer(allowed(), nil), reg, nil); err == nil {
		t.Fatal("New succeeded despite a clashing metric")
	}
	mfs, _ := reg.Gather()
	if len(mfs) != 1 || mfs[0].GetName() != "limiterd_check_errors_total" {
		t.Errorf("registry after a failed New holds %d families", len(mfs))
	}
}
