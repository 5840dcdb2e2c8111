package httpapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/ratelimitheader"
)

// twoLimits is a rule "api" of 10/1s and 600/60s.
func twoLimits(d *limiter.Decision, allow1s, allow60s bool) {
	*d = limiter.Decision{Rule: "api", N: 2, Allowed: allow1s && allow60s, WouldAllow: allow1s && allow60s}
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
}

// TestResponses renders every kind of decision and compares status, headers
// and body with testdata/<name>.golden (go test -update rewrites them). The
// facts that matter most are asserted explicitly as well, so that a careless
// -update cannot hide a regression in them.
func TestResponses(t *testing.T) {
	tests := []struct {
		name       string
		decide     func(d *limiter.Decision)
		wantStatus int
		wantHeader map[string]string // "" means absent
		wantBody   string
	}{
		{
			name:       "allowed",
			decide:     func(d *limiter.Decision) { *d = allowed() },
			wantStatus: 200,
			wantHeader: map[string]string{
				"RateLimit-Policy": `"default";q=600;w=60`, "RateLimit": `"default";r=599;t=55`,
				"Retry-After": "", "X-RateLimit-Shadow": "",
			},
			wantBody: `{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":54200,"rule":"default"}`,
		},
		{
			name:       "denied",
			decide:     func(d *limiter.Decision) { *d = denied() },
			wantStatus: 429,
			wantHeader: map[string]string{
				"RateLimit-Policy": `"default";q=600;w=60`, "RateLimit": `"default";r=0;t=59`, "Retry-After": "5",
			},
			wantBody: `{"allowed":false,"limit":600,"remaining":0,"retry_after_ms":4200,"reset_ms":59000,"rule":"default"}`,
		},
		{
			name:       "two_limits_allowed",
			decide:     func(d *limiter.Decision) { twoLimits(d, true, true) },
			wantStatus: 200,
			wantHeader: map[string]string{
				"RateLimit-Policy": `"api/1s";q=10;w=1, "api/60s";q=600;w=60`,
				"RateLimit":        `"api/1s";r=2;t=1, "api/60s";r=1;t=30`,
			},
			// The per-minute limit has the least remaining.
			wantBody: `{"allowed":true,"limit":600,"remaining":1,"retry_after_ms":0,"reset_ms":30000,"rule":"api"}`,
		},
		{
			name:       "two_limits_denied_per_second",
			decide:     func(d *limiter.Decision) { twoLimits(d, false, true) },
			wantStatus: 429,
			wantHeader: map[string]string{
				"RateLimit": `"api/1s";r=0;t=1, "api/60s";r=1;t=30`, "Retry-After": "1",
			},
			wantBody: `{"allowed":false,"limit":10,"remaining":0,"retry_after_ms":250,"reset_ms":800,"rule":"api"}`,
		},
		{
			name:       "two_limits_denied_by_both",
			decide:     func(d *limiter.Decision) { twoLimits(d, false, false) },
			wantStatus: 429,
			wantHeader: map[string]string{"Retry-After": "13"},
			// The body names the denying limit with the longest wait.
			wantBody: `{"allowed":false,"limit":600,"remaining":0,"retry_after_ms":12001,"reset_ms":30000,"rule":"api"}`,
		},
		{
			name: "shadow_would_deny",
			decide: func(d *limiter.Decision) {
				*d = denied()
				d.Rule, d.Limits[0].Policy, d.Shadow, d.Allowed = "trial", "trial", true, true
			},
			wantStatus: 200,
			wantHeader: map[string]string{
				"X-RateLimit-Shadow": "deny", "RateLimit": "", "RateLimit-Policy": "", "Retry-After": "",
			},
			wantBody: `{"allowed":true,"limit":600,"remaining":0,"retry_after_ms":4200,"reset_ms":59000,"rule":"trial","shadow":true,"would_allow":false}`,
		},
		{
			name: "shadow_allows",
			decide: func(d *limiter.Decision) {
				*d = allowed()
				d.Rule, d.Limits[0].Policy, d.Shadow = "trial", "trial", true
			},
			wantStatus: 200,
			wantHeader: map[string]string{"X-RateLimit-Shadow": "", "RateLimit": ""},
			wantBody:   `{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":54200,"rule":"trial","shadow":true,"would_allow":true}`,
		},
		{
			name:       "no_rule",
			decide:     func(d *limiter.Decision) { *d = limiter.Decision{Allowed: true, WouldAllow: true} },
			wantStatus: 200,
			wantHeader: map[string]string{"RateLimit": "", "RateLimit-Policy": "", "Retry-After": ""},
			wantBody:   `{"allowed":true,"rule":""}`,
		},
		{
			name: "untracked",
			decide: func(d *limiter.Decision) {
				*d = allowed()
				d.Untracked, d.Limits[0].Remaining = true, 600
			},
			wantStatus: 200,
			wantBody:   `{"allowed":true,"limit":600,"remaining":600,"retry_after_ms":0,"reset_ms":54200,"rule":"default","untracked":true}`,
		},
		{
			name: "sub_second_window",
			decide: func(d *limiter.Decision) {
				*d = limiter.Decision{Rule: "burst", N: 1, RetryAfter: 1 * time.Millisecond}
				d.Limits[0] = limiter.LimitResult{Policy: "burst", Limit: 5, Window: 500 * time.Millisecond,
					RetryAfter: 1 * time.Millisecond, Reset: 499 * time.Millisecond}
			},
			wantStatus: 429,
			// Whole seconds, rounded up; Retry-After at least 1.
			wantHeader: map[string]string{"RateLimit-Policy": `"burst";q=5;w=1`, "RateLimit": `"burst";r=0;t=1`, "Retry-After": "1"},
			wantBody:   `{"allowed":false,"limit":5,"remaining":0,"retry_after_ms":1,"reset_ms":499,"rule":"burst"}`,
		},
		{
			name: "names_needing_escapes",
			decide: func(d *limiter.Decision) {
				*d = allowed()
				d.Rule, d.Limits[0].Policy = "we\"ird\\né\u2028", "we\"ird\\né"
			},
			wantStatus: 200,
			wantHeader: map[string]string{"RateLimit-Policy": `"we\"ird\\n??";q=600;w=60`},
			wantBody:   `{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":54200,"rule":"we\"ird\\né\u2028"}`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAPI(t, testConfig(), checkFunc(func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
				tc.decide(d)
				return nil
			}), nil)
			rec := serve(a, get("/check?key=a"))
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			for h, want := range tc.wantHeader {
				if got := rec.Header().Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
			if got := strings.TrimSuffix(rec.Body.String(), "\n"); got != tc.wantBody {
				t.Errorf("body\n got %s\nwant %s", got, tc.wantBody)
			}
			jsonBody(t, rec) // valid JSON
			for h, want := range map[string]string{"Content-Type": "application/json", "Cache-Control": "no-store"} {
				if got := rec.Header().Get(h); got != want {
					t.Errorf("%s: %q, want %q", h, got, want)
				}
			}
			golden(t, filepath.Join("testdata", tc.name+".golden"), dumpResponse(rec))
		})
	}
}

// dumpResponse renders a response as status line, sorted headers, blank
// line and body.
func dumpResponse(rec *httptest.ResponseRecorder) []byte {
	var b strings.Builder
	b.WriteString("HTTP " + strconv.Itoa(rec.Code) + " " + http.StatusText(rec.Code) + "\n")
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range rec.Header() {
			if !yield(k) {
				return
			}
		}
	})
	for _, k := range names {
		for _, v := range rec.Header()[k] {
			b.WriteString(k + ": " + v + "\n")
		}
	}
	b.WriteString("\n")
	b.Write(rec.Body.Bytes())
	return []byte(b.String())
}

func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update rewrites it)\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

func TestHeaderFields(t *testing.T) {
	t.Run("faulty N", func(t *testing.T) {
		// A Checker reporting an impossible N must not crash the handler.
		for _, n := range []int{-1, 0, 9, 1 << 30} {
			res := decision.Result{Decision: allowed()}
			res.Decision.N = n
			b := ratelimitheader.AppendRateLimit(nil, res.Limits())
			if n <= 0 && len(b) != 0 {
				t.Errorf("N=%d: %q, want empty", n, b)
			}
			ratelimitheader.AppendPolicy(nil, res.Limits())
			appendDecisionJSON(nil, &res)
		}
	})
}

// TestFastPathHeadersAreIndependent checks that the shared backing array of
// the header values cannot leak one header into another when a wrapping
// handler appends to one of them.
func TestFastPathHeadersAreIndependent(t *testing.T) {
	a, _ := newAPI(t, testConfig(), checkFunc(func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
		*d = denied()
		return nil
	}), nil)
	rec := httptest.NewRecorder()
	a.ServeHTTP(rec, get("/check?key=a"))
	h := rec.Header()
	h.Add("Content-Type", "extra")
	h.Add("Cache-Control", "extra")
	h.Add("Ratelimit-Policy", "extra")
	if got := h.Get("Cache-Control"); got != "no-store" {
		t.Errorf("Cache-Control %q after Add to Content-Type", got)
	}
	if got := h.Get("Ratelimit"); got != `"default";r=0;t=59` {
		t.Errorf("RateLimit %q after Add to RateLimit-Policy", got)
	}
	if got := h.Get("Retry-After"); got != "5" {
		t.Errorf("Retry-After %q", got)
	}
}
