package httpapi

import (
	"bytes"
	"encoding/json"
	"flag"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// t0 is the fixed instant every test checks at.
func t0() time.Time { return time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC) }

// checkFunc adapts a function to decision.Checker.
type checkFunc func(t time.Time, req limiter.Request, d *limiter.Decision) error

func (f checkFunc) Check(t time.Time, req limiter.Request, d *limiter.Decision) error {
	return f(t, req, d)
}

// recorder is a decision.Checker that records what it is asked and answers with
// decide (an allowed "default" decision when decide is nil).
type recorder struct {
	decide func(req limiter.Request, d *limiter.Decision) error
	mu     sync.Mutex
	reqs   []limiter.Request
	times  []time.Time
}

func (r *recorder) Check(t time.Time, req limiter.Request, d *limiter.Decision) error {
	r.mu.Lock()
	r.reqs = append(r.reqs, req)
	r.times = append(r.times, t)
	r.mu.Unlock()
	*d = limiter.Decision{}
	if r.decide == nil {
		*d = allowed()
		return nil
	}
	return r.decide(req, d)
}

func (r *recorder) calls() []limiter.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]limiter.Request(nil), r.reqs...)
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

// testConfig is the API configuration of the tests: the defaults.
func testConfig() Config { return DefaultConfig() }

// newAPI builds an API over a Decider that asks c at the fixed instant t0,
// both on one fresh registry, as limiterd wires them; log may be nil.
func newAPI(t testing.TB, cfg Config, c decision.Checker, log *slog.Logger) (*API, *prometheus.Registry) {
	t.Helper()
	return newAPIClock(t, cfg, t0, c, log)
}

// newAPIClock is newAPI with the Decider's clock now (nil for its default).
func newAPIClock(t testing.TB, cfg Config, now func() time.Time, c decision.Checker, log *slog.Logger) (*API, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	a, err := New(cfg, newDecider(t, now, c, reg, log), reg, log)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return a, reg
}

// newDecider builds a Decider that asks c at now (nil for its default) and
// registers its metrics on reg.
func newDecider(t testing.TB, now func() time.Time, c decision.Checker, reg prometheus.Registerer, log *slog.Logger) *decision.Decider {
	t.Helper()
	dcfg := decision.DefaultConfig()
	if now != nil {
		dcfg.Now = now
	}
	d, err := decision.New(dcfg, c, reg, log)
	if err != nil {
		t.Fatalf("decision.New: %v", err)
	}
	return d
}

func serve(h http.Handler, r *http.Request) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, r)
	return rec
}

// get builds a GET for target with header pairs ("Name", "value", ...).
func get(target string, header ...string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, target, nil)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	return r
}

// post builds a POST /check with body and, when not empty, a Content-Type.
func post(body, contentType string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/check", strings.NewReader(body))
	if contentType != "" {
		r.Header.Set("Content-Type", contentType)
	}
	return r
}

// jsonBody decodes a response body into a map, failing the test when it is
// not exactly one JSON object.
func jsonBody(t testing.TB, rec *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("body %q is not a JSON object: %v", rec.Body.String(), err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("body %q has data after the object", rec.Body.String())
	}
	return m
}

// counterValue returns the value of a counter series in reg, 0 if absent.
func counterValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) float64 {
	t.Helper()
	v, _, err := promtest.Series(reg, name, labels)
	if err != nil {
		t.Fatal(err)
	}
	return v
}
