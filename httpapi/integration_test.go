package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// The tests in this file run the API over the real limiter and counter.

const integrationRules = `
rules:
  - name: trial
    match: "trial:*"
    limit: 2
    window: 60s
    shadow: true
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s}
  - name: default
    limit: 5
    window: 60s
`

// realAPI serves rules through a real limiter; the clock is *now.
func realAPI(t testing.TB, rules string, now *time.Time) *API {
	t.Helper()
	rs, err := limiter.Parse("test.yaml", []byte(rules))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	lim := newRealLimiter(t, rs)
	a, _ := newAPIClock(t, testConfig(), func() time.Time { return *now }, lim, nil)
	return a
}

func TestIntegrationDefaultRule(t *testing.T) {
	now := t0()
	a := realAPI(t, integrationRules, &now)
	for i := range 5 {
		rec := serve(a, get("/check", "X-Forwarded-For", "203.0.113.7"))
		remaining := strconv.Itoa(4 - i)
		if rec.Code != 200 || rec.Header().Get("RateLimit") != `"default";r=`+remaining+`;t=60` {
			t.Fatalf("request %d: %d %q %s", i+1, rec.Code, rec.Header().Get("RateLimit"), rec.Body)
		}
	}
	rec := serve(a, get("/check", "X-Forwarded-For", "203.0.113.7"))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("6th request: %d, want 429", rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got != "60" {
		t.Errorf("Retry-After %q, want 60 (all five were counted at one instant)", got)
	}
	if got := rec.Header().Get("RateLimit-Policy"); got != `"default";q=5;w=60` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	want := `{"allowed":false,"limit":5,"remaining":0,"retry_after_ms":60000,"reset_ms":60000,"rule":"default"}` + "\n"
	if rec.Body.String() != want {
		t.Errorf("body %s, want %s", rec.Body, want)
	}
	// Another client is not affected.
	if rec := serve(a, get("/check?key=198.51.100.1")); rec.Code != 200 {
		t.Errorf("other client: %d", rec.Code)
	}
	// A window later the client is allowed again.
	now = now.Add(60 * time.Second)
	if rec := serve(a, get("/check", "X-Forwarded-For", "203.0.113.7")); rec.Code != 200 {
		t.Errorf("after the window: %d %s", rec.Code, rec.Body)
	}
}

func TestIntegrationBadInputCountsNothing(t *testing.T) {
	now := t0()
	a := realAPI(t, integrationRules, &now)
	for _, tc := range []struct {
		target     string
		wantReason string
	}{
		{"/check?key=k&hits=6", `limiter: invalid hits: hits 6 exceed the limit 5 of \"default\"`},
		{"/check?key=k&rule=nope", `unknown rule \"nope\"`},
		{"/check?key=k&hits=0", "hits must be at least 1"},
		{"/check?key=k&rule=api&hits=11", "exceed the limit 10"},
	} {
		rec := serve(a, get(tc.target))
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tc.wantReason) {
			t.Errorf("%s: %d %s, want 400 with %q", tc.target, rec.Code, rec.Body, tc.wantReason)
		}
	}
	// Nothing was counted: the first real check still sees a full window.
	rec := serve(a, get("/check?key=k"))
	if got := rec.Header().Get("RateLimit"); got != `"default";r=4;t=60` {
		t.Errorf("after bad requests: RateLimit %q, want r=4", got)
	}
	rec = serve(a, get("/check?key=k&rule=api"))
	if got := rec.Header().Get("RateLimit"); got != `"api/1s";r=9;t=1, "api/60s";r=599;t=60` {
		t.Errorf("after bad requests: RateLimit %q", got)
	}
}

func TestIntegrationMultiLimitAndPost(t *testing.T) {
	now := t0()
	a := realAPI(t, integrationRules, &now)
	for i := range 10 {
		if rec := serve(a, post(`{"key":"api:acme"}`, "application/json")); rec.Code != 200 {
			t.Fatalf("request %d: %d %s", i+1, rec.Code, rec.Body)
		}
	}
	rec := serve(a, post(`{"key":"api:acme"}`, "application/json"))
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("11th: %d, want 429", rec.Code)
	}
	if got := rec.Header().Get("RateLimit"); got != `"api/1s";r=0;t=1, "api/60s";r=590;t=60` {
		t.Errorf("RateLimit %q", got)
	}
	if got := rec.Header().Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	if !strings.Contains(rec.Body.String(), `"limit":10,"remaining":0`) {
		t.Errorf("body %s does not report the per-second limit", rec.Body)
	}
	now = now.Add(time.Second)
	if rec := serve(a, post(`{"key":"api:acme"}`, "application/json")); rec.Code != 200 {
		t.Errorf("a second later: %d", rec.Code)
	}
}

func TestIntegrationShadowAndNoRule(t *testing.T) {
	now := t0()
	a := realAPI(t, integrationRules, &now)
	for i := range 2 {
		if rec := serve(a, get("/check?key=trial:x")); rec.Code != 200 || rec.Header().Get("X-RateLimit-Shadow") != "" {
			t.Fatalf("request %d: %d shadow=%q", i+1, rec.Code, rec.Header().Get("X-RateLimit-Shadow"))
		}
	}
	rec := serve(a, get("/check?key=trial:x"))
	if rec.Code != 200 || rec.Header().Get("X-RateLimit-Shadow") != "deny" {
		t.Errorf("3rd: %d shadow=%q, want 200 and deny", rec.Code, rec.Header().Get("X-RateLimit-Shadow"))
	}
	if !strings.Contains(rec.Body.String(), `"allowed":true,`) || !strings.Contains(rec.Body.String(), `"shadow":true,"would_allow":false`) {
		t.Errorf("body %s", rec.Body)
	}

	b := realAPI(t, "rules:\n  - name: only-api\n    match: \"api:*\"\n    limit: 1\n    window: 1s\n", &now)
	rec = serve(b, get("/check?key=web:1"))
	if rec.Code != 200 || rec.Body.String() != "{\"allowed\":true,\"rule\":\"\"}\n" || rec.Header().Get("RateLimit") != "" {
		t.Errorf("no rule: %d %q RateLimit=%q", rec.Code, rec.Body, rec.Header().Get("RateLimit"))
	}
}

// TestIntegrationConcurrentExact: 8 goroutines share one client's limit; at
// one instant exactly the limit is allowed, however the requests interleave.
func TestIntegrationConcurrentExact(t *testing.T) {
	now := t0()
	a := realAPI(t, "rules:\n  - name: default\n    limit: 600\n    window: 60s\n", &now)
	var allowed, deniedN atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				switch rec := serve(a, get("/check?key=shared")); rec.Code {
				case 200:
					allowed.Add(1)
				case 429:
					deniedN.Add(1)
				default:
					t.Errorf("status %d", rec.Code)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 600 || deniedN.Load() != 200 {
		t.Errorf("allowed %d denied %d, want 600 and 200", allowed.Load(), deniedN.Load())
	}
}

// newRealLimiter is a limiter over a fresh counter with default settings.
func newRealLimiter(tb testing.TB, rs *limiter.RuleSet) *limiter.Limiter {
	tb.Helper()
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

// TestOverLoopback runs the API behind a real net/http server on
// 127.0.0.1, to see the responses as a proxy does, wire format included.
func TestOverLoopback(t *testing.T) {
	now := t0()
	srv := httptest.NewServer(realAPI(t, integrationRules, &now)) // listens on 127.0.0.1:0
	defer srv.Close()

	do := func(method, path, body string, header ...string) (*http.Response, string) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp, string(b)
	}

	resp, body := do("GET", "/check?rule=api", "", "X-Forwarded-For", "203.0.113.7, 10.0.0.1")
	if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != `"api/1s";q=10;w=1, "api/60s";q=600;w=60` {
		t.Errorf("GET: %d %q %s", resp.StatusCode, resp.Header.Get("RateLimit-Policy"), body)
	}
	if resp.ContentLength != int64(len(body)) || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("GET: Content-Length %d for %d bytes, Cache-Control %q", resp.ContentLength, len(body), resp.Header.Get("Cache-Control"))
	}

	resp, body = do("POST", "/check", `{"key":"k","hits":5}`, "Content-Type", "application/json")
	if resp.StatusCode != 200 || !strings.Contains(body, `"remaining":0`) {
		t.Errorf("POST: %d %s", resp.StatusCode, body)
	}
	resp, body = do("POST", "/check", `{"key":"k"}`, "Content-Type", "application/json")
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "60" {
		t.Errorf("POST over the limit: %d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}

	resp, body = do("POST", "/check", `{"key":"`+strings.Repeat("a", 10000)+`"}`, "Content-Type", "application/json")
	if resp.StatusCode != 413 || !strings.Contains(body, "larger than 4096 bytes") {
		t.Errorf("large body: %d %s", resp.StatusCode, body)
	}
	resp, _ = do("PATCH", "/check?key=k", "")
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, POST" {
		t.Errorf("PATCH: %d Allow %q", resp.StatusCode, resp.Header.Get("Allow"))
	}
	resp, body = do("GET", "/metrics", "")
	if resp.StatusCode != 200 || !strings.Contains(body, `limiterd_decisions_total{outcome="denied",rule="default"} 1`) {
		t.Errorf("metrics: %d\n%s", resp.StatusCode, body)
	}
}

// TestIntegrationStatedLimit: a request that states its limit (limit and
// window) is decided against it through the real limiter, GET and POST
// sharing the key's counts for that window, apart from the rule's; a
// stated limit out of range is a 400 that counts nothing.
func TestIntegrationStatedLimit(t *testing.T) {
	now := t0()
	a := realAPI(t, integrationRules, &now)
	for _, target := range []string{"/check?key=k&limit=1000h&window=60s", "/check?key=k&limit=3&window=1000h", "/check?key=k&limit=0&window=60s"} {
		if rec := serve(a, get(target)); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "limiter: invalid limit") && !strings.Contains(rec.Body.String(), "limit is not an integer") {
			t.Errorf("%s: %d %s, want 400", target, rec.Code, rec.Body)
		}
	}
	for i := range 3 {
		var rec *httptest.ResponseRecorder
		if i%2 == 0 {
			rec = serve(a, get("/check?key=k&limit=3&window=60s"))
		} else {
			rec = serve(a, post(`{"key":"k","limit":3,"window":"1m"}`, "application/json"))
		}
		if rec.Code != 200 || rec.Header().Get("RateLimit-Policy") != `"override";q=3;w=60` || !strings.Contains(rec.Body.String(), `"rule":"override"`) {
			t.Fatalf("request %d: %d %q %s", i+1, rec.Code, rec.Header().Get("RateLimit-Policy"), rec.Body)
		}
	}
	if rec := serve(a, get("/check?key=k&limit=3&window=60s")); rec.Code != http.StatusTooManyRequests || rec.Header().Get("RateLimit") != `"override";r=0;t=60` {
		t.Fatalf("4th: %d %q, want 429 with nothing remaining", rec.Code, rec.Header().Get("RateLimit"))
	}
	// A larger stated limit on the same window shares the count.
	if rec := serve(a, get("/check?key=k&limit=10&window=60s")); rec.Code != 200 || rec.Header().Get("RateLimit") != `"override";r=6;t=60` {
		t.Fatalf("limit 10: %d %q, want 200 with 6 remaining", rec.Code, rec.Header().Get("RateLimit"))
	}
	// The rule's counts of the key are its own.
	if rec := serve(a, get("/check?key=k")); rec.Code != 200 || rec.Header().Get("RateLimit") != `"default";r=4;t=60` {
		t.Errorf("the rule: %d %q, want r=4", rec.Code, rec.Header().Get("RateLimit"))
	}
}
