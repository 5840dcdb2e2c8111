package httpapi

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

// TestMetricsExposure drives one request of every outcome and scrapes
// /metrics, checking names, types, labels and values as a Prometheus server
// would see them.
func TestMetricsExposure(t *testing.T) {
	a, _ := newAPI(t, testConfig(), &recorder{decide: func(req limiter.Request, d *limiter.Decision) error {
		switch req.Key {
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
		case "fail":
			return errors.New("broken")
		case "panic":
			panic("boom")
		default:
			return limiterLike(req, d)
		}
		return nil
	}}, nil)
	for _, target := range []string{
		"/check?key=allow", "/check?key=allow", "/check?key=deny", "/check?key=shadow",
		"/check?key=norule", "/check?key=untracked", "/check?key=fail", "/check?key=panic",
		"/check", "/check?key=a&rule=nope", "/check?key=a&hits=x", "/nope",
	} {
		serve(a, get(target))
	}
	rec := serve(a, get("/metrics"))
	if rec.Code != 200 {
		t.Fatalf("/metrics status %d", rec.Code)
	}
	text := rec.Body.String()
	for _, want := range []string{
		"# TYPE limiterd_decisions_total counter",
		`limiterd_decisions_total{outcome="allowed",rule="default"} 2`,
		`limiterd_decisions_total{outcome="denied",rule="default"} 1`,
		`limiterd_decisions_total{outcome="shadow_denied",rule="trial"} 1`,
		`limiterd_decisions_total{outcome="untracked",rule="default"} 1`,
		`limiterd_decisions_total{outcome="unlimited",rule=""} 1`,
		`limiterd_decisions_total{outcome="error",rule=""} 2`,
		"# TYPE limiterd_check_errors_total counter",
		"limiterd_check_errors_total 2",
		"# TYPE limiterd_check_duration_seconds histogram",
		// Every Checker call is timed, including the failed ones and the
		// ones the limiter rejected as bad input.
		"limiterd_check_duration_seconds_count 9",
		`limiterd_check_duration_seconds_bucket{le="1e-06"}`,
		`limiterd_check_duration_seconds_bucket{le="+Inf"} 9`,
		"# TYPE limiterd_bad_requests_total counter",
		`limiterd_bad_requests_total{reason="missing_key"} 1`,
		`limiterd_bad_requests_total{reason="unknown_rule"} 1`,
		`limiterd_bad_requests_total{reason="invalid_hits"} 1`,
		`limiterd_bad_requests_total{reason="not_found"} 1`,
		// Reasons not seen yet are exported at 0 so rate() works from the start.
		`limiterd_bad_requests_total{reason="body_too_large"} 0`,
	} {
		if !strings.Contains(text, want+"\n") && !strings.Contains(text, want+" ") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	// Nothing a client sent (keys, unknown rule names) became a label value.
	for _, leak := range []string{`"allow"`, `"deny"`, `"nope"`, `"fail"`, "rule=\"x\""} {
		if strings.Contains(text, leak) {
			t.Errorf("/metrics contains client input %s", leak)
		}
	}
	// The API and its Decider register only their own metrics: Go and
	// process collectors are main's.
	for _, line := range strings.Split(text, "\n") {
		if line != "" && !strings.HasPrefix(line, "# ") && !strings.HasPrefix(line, "limiterd_") {
			t.Errorf("unexpected series %q", line)
		}
	}
}

// TestRuleLabelCardinality sends many distinct keys and rule names: the
// decisions series stay one per (configured rule, outcome).
func TestRuleLabelCardinality(t *testing.T) {
	a, reg := newAPI(t, testConfig(), &recorder{decide: limiterLike}, nil)
	for i := range 500 {
		serve(a, get(fmt.Sprintf("/check?key=client-%d", i)))
		serve(a, get(fmt.Sprintf("/check?key=client-%d&rule=made-up-%d", i, i)))
	}
	rules, err := promtest.LabelValues(reg, "limiterd_decisions_total", "rule")
	if err != nil {
		t.Fatal(err)
	}
	if len(rules) != 2 || !rules[""] || !rules["default"] {
		t.Errorf("rule label values %v, want exactly \"\" and \"default\"", rules)
	}
	if got := counterValue(t, reg, "limiterd_decisions_total", map[string]string{"rule": "default", "outcome": "allowed"}); got != 500 {
		t.Errorf("allowed = %v, want 500", got)
	}
	if got := counterValue(t, reg, "limiterd_bad_requests_total", map[string]string{"reason": "unknown_rule"}); got != 500 {
		t.Errorf("unknown_rule = %v, want 500", got)
	}
}

func TestReasonNames(t *testing.T) {
	seen := map[string]bool{}
	for r := range numReasons {
		seen[r.String()] = true
	}
	if len(seen) != int(numReasons) || seen["unknown"] {
		t.Errorf("reason label values are not distinct or some are missing: %v", seen)
	}
}
