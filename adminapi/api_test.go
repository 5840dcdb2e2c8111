package adminapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/limiter"
)

var t0 = time.Date(2026, 7, 30, 12, 0, 0, 0, time.UTC)

const testRules = `
rules:
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s}
  - name: default
    limit: 100
    window: 60s
`

// fixture is an admin API on one node, with a limiter to count through
// and the clock at t0 plus now.
type fixture struct {
	t   *testing.T
	lim *limiter.Limiter
	api *API
	reg *prometheus.Registry
	log *bytes.Buffer
	now time.Duration
}

func newFixture(t *testing.T, rules string, keys func(*counter.Counter, func() time.Time) Keys) *fixture {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := limiter.Parse("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{t: t, reg: prometheus.NewRegistry(), log: new(bytes.Buffer)}
	if f.lim, err = limiter.New(c, rs); err != nil {
		t.Fatal(err)
	}
	clock := func() time.Time { return t0.Add(f.now) }
	if keys == nil {
		keys = Alone
	}
	if f.api, err = New(DefaultConfig(), f.lim, keys(c, clock), f.reg, slog.New(slog.NewTextHandler(f.log, nil))); err != nil {
		t.Fatal(err)
	}
	return f
}

// check counts one request of key now through the limiter.
func (f *fixture) check(key string) limiter.Decision {
	f.t.Helper()
	var d limiter.Decision
	if err := f.lim.Check(t0.Add(f.now), limiter.Request{Key: key, Hits: 1}, &d); err != nil {
		f.t.Fatal(err)
	}
	return d
}

// do sends method target to the API and returns the status, the Allow
// header and the decoded body.
func (f *fixture) do(method, target string) (int, string, map[string]any) {
	f.t.Helper()
	rec := httptest.NewRecorder()
	f.api.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		f.t.Fatalf("%s %s: %d %q: %v", method, target, rec.Code, rec.Body, err)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		f.t.Errorf("%s %s: Content-Type %q", method, target, ct)
	}
	return rec.Code, rec.Header().Get("Allow"), body
}

func (f *fixture) resets(result string) float64 {
	f.t.Helper()
	v, _, err := promtest.Series(f.reg, "limiterd_admin_resets_total", map[string]string{"result": result})
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// limits returns the "limits" of an answer as JSON text, for comparing
// with norm's.
func limits(body map[string]any) string {
	b, _ := json.Marshal(body["limits"])
	return string(b)
}

// norm is JSON text as limits writes it (objects' keys sorted).
func norm(s string) string {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		panic(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// TestInspect: GET reports each limit's window as Peek sees it and counts
// nothing, however often it is asked.
func TestInspect(t *testing.T) {
	f := newFixture(t, testRules, nil)
	for range 3 {
		f.check("api:k")
	}
	f.now = 200 * time.Millisecond
	want := norm(`[{"policy":"api/1s","limit":10,"window_ms":1000,"count":3,"remaining":7,"reset_ms":800},` +
		`{"policy":"api/60s","limit":600,"window_ms":60000,"count":3,"remaining":597,"reset_ms":59800}]`)
	for range 3 {
		code, _, body := f.do("GET", "/v1/keys?key=api:k")
		if code != 200 || body["key"] != "api:k" || body["rule"] != "api" || limits(body) != want || body["coordinator"] != nil {
			t.Fatalf("GET = %d %v\nlimits %s\n  want %s", code, body, limits(body), want)
		}
	}
	if d := f.check("api:k"); d.Limits[0].Remaining != 6 {
		t.Fatalf("the check after three inspections leaves %d, want 6: an inspection counted", d.Limits[0].Remaining)
	}
	// The rule named, as /check names it.
	if code, _, body := f.do("GET", "/v1/keys?key=api:k&rule=default"); code != 200 || body["rule"] != "default" ||
		limits(body) != norm(`[{"policy":"default","limit":100,"window_ms":60000,"count":0,"remaining":100,"reset_ms":0}]`) {
		t.Fatalf("GET with rule = %d %v", code, body)
	}
	// No rule governs the key.
	g := newFixture(t, "rules:\n  - {name: api, match: \"api:*\", limit: 1, window: 1s}\n", nil)
	if code, _, body := g.do("GET", "/v1/keys?key=client-1"); code != 200 || body["rule"] != "" || limits(body) != "[]" {
		t.Fatalf("GET of a key no rule governs = %d %v", code, body)
	}
	if code, _, body := g.do("DELETE", "/v1/keys?key=client-1"); code != 404 || body["error"] != `no rule governs key "client-1": it is never counted, so there is nothing to reset` {
		t.Fatalf("DELETE of a key no rule governs = %d %v", code, body)
	}
	if f.log.Len() != 0 {
		t.Errorf("inspection logged: %s", f.log)
	}
}

// TestBadInput: every bad request is a 400, 404 or 405 that says what is
// wrong, in /check's words where /check has the same case, and resets
// nothing.
func TestBadInput(t *testing.T) {
	f := newFixture(t, testRules, nil)
	f.check("client-1")
	for _, tc := range []struct {
		method, target string
		status         int
		msg            string
	}{
		{"GET", "/v1/keys", 400, "missing key: no key parameter"},
		{"DELETE", "/v1/keys?rule=default", 400, "missing key: no key parameter"},
		{"GET", "/v1/keys?key=", 400, "key is empty"},
		{"DELETE", "/v1/keys?key=%ff", 400, "key is not valid UTF-8"},
		{"GET", "/v1/keys?key=" + strings.Repeat("k", 1025), 400, "key is longer than 1024 bytes"},
		{"DELETE", "/v1/keys?key=client-1&rule=nope", 400, `unknown rule "nope"`},
		{"GET", "/v1/keys?key=client-1&hits=2", 400, `unknown query parameter "hits"; the parameters are key and rule`},
		{"DELETE", "/v1/keys?key=client-1&key=client-2", 400, "query parameter key is given more than once"},
		{"GET", "/v1/keys?key=client-1;rule=x", 400, "invalid query: invalid semicolon separator in query"},
		{"GET", "/v1/keys?key=%zz", 400, `invalid query: invalid URL escape "%zz"`},
		{"POST", "/v1/keys?key=client-1", 405, `method "POST" not allowed; use GET or DELETE`},
		{"GET", "/check?key=client-1", 404, "no such path; the admin API is /v1/keys?key=K[&rule=R], GET to inspect and DELETE to reset"},
	} {
		code, allow, body := f.do(tc.method, tc.target)
		msg, _ := body["error"].(string)
		if code != tc.status || tc.msg != "" && msg != tc.msg || msg == "" {
			t.Errorf("%s %.40s = %d %q, want %d %q", tc.method, tc.target, code, msg, tc.status, tc.msg)
		}
		if (code == 405) != (allow == "GET, DELETE") {
			t.Errorf("%s %.40s: Allow %q", tc.method, tc.target, allow)
		}
	}
	if d := f.check("client-1"); d.Limits[0].Remaining != 98 {
		t.Errorf("bad requests reset the key: %d remaining, want 98", d.Limits[0].Remaining)
	}
	if n := f.resets(resultApplied) + f.resets(resultFailed) + f.resets(resultPartial); n != 0 {
		t.Errorf("bad requests counted %v resets", n)
	}
}

// TestResetAlone: on a single node DELETE resets the key under every
// limit of its rule at once, counts the reset and logs it without the key.
func TestResetAlone(t *testing.T) {
	f := newFixture(t, testRules, nil)
	for range 10 {
		f.check("api:secret-token")
	}
	if d := f.check("api:secret-token"); d.Allowed {
		t.Fatal("the 11th request in a second was allowed")
	}
	f.now = 300 * time.Millisecond
	code, _, body := f.do("DELETE", "/v1/keys?key=api:secret-token")
	if code != 200 || body["rule"] != "api" || body["reset_at"] != "2026-07-30T12:00:00.301Z" || body["applied"] != nil ||
		limits(body) != norm(`[{"policy":"api/1s","limit":10,"window_ms":1000},{"policy":"api/60s","limit":600,"window_ms":60000}]`) {
		t.Fatalf("DELETE = %d %v", code, body)
	}
	if d := f.check("api:secret-token"); !d.Allowed || d.Limits[0].Remaining != 9 || d.Limits[1].Remaining != 599 {
		t.Fatalf("after the reset: %+v, want allowed with 9 and 599 left", d)
	}
	if f.resets(resultApplied) != 1 {
		t.Errorf("applied resets %v, want 1", f.resets(resultApplied))
	}
	line := f.log.String()
	if !strings.Contains(line, "level=INFO") || !strings.Contains(line, `msg="key reset"`) || !strings.Contains(line, "rule=api") ||
		!strings.Contains(line, "key_sha256="+keyHash("api:secret-token")) || strings.Contains(line, "secret") {
		t.Errorf("log %q: want an INFO line with the rule and the key's hash, not the key", line)
	}
}

// fakeKeys is a cluster's Keys whose resets answer what a test says.
type fakeKeys struct {
	rep cluster.ResetReport
	err error
}

func (k fakeKeys) Inspect(_ context.Context, _ string, _ []counter.Limit, res []counter.Result) (string, error) {
	for i := range res {
		res[i] = counter.Result{Count: 4, Remaining: 96, Reset: time.Second}
	}
	return "n2", nil
}

func (k fakeKeys) Reset(ctx context.Context, _ string, _ []counter.Limit) (cluster.ResetReport, error) {
	if _, ok := ctx.Deadline(); !ok {
		return cluster.ResetReport{}, errors.New("no deadline")
	}
	return k.rep, k.err
}

// TestResetInCluster: the answer lists the nodes; a reset not confirmed
// by every node told is partial, one without the coordinator's answer a
// 503 that claims nothing.
func TestResetInCluster(t *testing.T) {
	at := t0.Add(1500 * time.Millisecond)
	for _, tc := range []struct {
		name   string
		keys   fakeKeys
		status int
		body   string // the answer but for key, rule, limits
		result string
	}{
		{"applied", fakeKeys{rep: cluster.ResetReport{Coordinator: "n2", At: at, Applied: []string{"n1", "n2", "n3"}}}, 200,
			`{"applied":["n1","n2","n3"],"coordinator":"n2","refused":{},"reset_at":"2026-07-30T12:00:01.500Z","unconfirmed":[]}`, resultApplied},
		{"partial", fakeKeys{rep: cluster.ResetReport{Coordinator: "n2", At: at, Applied: []string{"n2"}, Refused: map[string]string{"n3": "why"}, Unconfirmed: []string{"n1"}}}, 200,
			`{"applied":["n2"],"coordinator":"n2","refused":{"n3":"why"},"reset_at":"2026-07-30T12:00:01.500Z","unconfirmed":["n1"]}`, resultPartial},
		{"unanswered", fakeKeys{err: fmt.Errorf("%w: n2: %w", cluster.ErrResetUnanswered, context.DeadlineExceeded)}, 503,
			`{"error":"reset failed, nothing is claimed (it may have been applied on some nodes or none; asking again is safe): cluster: the key's coordinator did not answer the reset: n2: context deadline exceeded"}`, resultFailed},
		{"internal", fakeKeys{err: errors.New("disk on fire")}, 500, "", resultFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, testRules, func(*counter.Counter, func() time.Time) Keys { return tc.keys })
			code, _, body := f.do("DELETE", "/v1/keys?key=client-1")
			delete(body, "key")
			delete(body, "rule")
			delete(body, "limits")
			got, _ := json.Marshal(body)
			if code != tc.status || tc.body != "" && string(got) != tc.body {
				t.Errorf("DELETE = %d %s\nwant %d %s", code, got, tc.status, tc.body)
			}
			if f.resets(tc.result) != 1 {
				t.Errorf("%s resets: %v, want 1", tc.result, f.resets(tc.result))
			}
		})
	}
	f := newFixture(t, testRules, func(*counter.Counter, func() time.Time) Keys { return fakeKeys{} })
	f.api.cfg.Node = "n1"
	if code, _, body := f.do("GET", "/v1/keys?key=client-1"); code != 200 || body["node"] != "n1" || body["coordinator"] != "n2" {
		t.Errorf("GET in a cluster = %d %v, want node n1, coordinator n2", code, body)
	}
}

func TestConfig(t *testing.T) {
	for _, tc := range []struct {
		cfg Config
		ok  bool
	}{
		{DefaultConfig(), true},
		{Config{ResetTimeout: time.Minute}, true},
		{Config{}, false},
		{Config{ResetTimeout: time.Minute + 1}, false},
	} {
		if err := tc.cfg.Validate(); (err == nil) != tc.ok || err != nil && !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Validate(%+v) = %v", tc.cfg, err)
		}
	}
	if _, err := New(DefaultConfig(), nil, nil, prometheus.NewRegistry(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("New without dependencies: %v", err)
	}
}

var _ http.Handler = (*API)(nil)
