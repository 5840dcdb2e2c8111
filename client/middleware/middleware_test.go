package middleware_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/middleware"
)

// TestLimitsAfterN: with either backend, over a real limiter of 5 a
// minute, five requests of a client pass with the RateLimit fields, the
// sixth is answered 429 by the middleware with Retry-After, the fields and
// a JSON body, and another client still passes. Both backends answer
// alike.
func TestLimitsAfterN(t *testing.T) {
	const client1, client2 = "203.0.113.7:40000", "198.51.100.1:40000"
	headers := map[string][]http.Header{}
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			next := &app{}
			h := middleware.New(b.new(t, rules5), middleware.Options{})(next)
			for i := range 5 {
				w := get(h, "/items/1", client1, nil)
				wantRL := `"default";r=` + strconv.Itoa(4-i) + `;t=60`
				if w.Code != http.StatusOK || w.Header().Get("RateLimit") != wantRL ||
					w.Header().Get("RateLimit-Policy") != `"default";q=5;w=60` || w.Header().Get("Retry-After") != "" {
					t.Fatalf("request %d: %d %v; want 200 with RateLimit %s", i+1, w.Code, w.Header(), wantRL)
				}
				headers[b.name] = append(headers[b.name], w.Header())
			}
			w := get(h, "/items/1", client1, nil)
			want := map[string]string{
				"Retry-After":      "60",
				"Ratelimit":        `"default";r=0;t=60`,
				"Ratelimit-Policy": `"default";q=5;w=60`,
				"Content-Type":     "application/json",
			}
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("sixth request: %d, want 429", w.Code)
			}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("sixth request %s = %q, want %q", k, got, v)
				}
			}
			var body struct {
				Error        string `json:"error"`
				RetryAfterMs int64  `json:"retry_after_ms"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil || body.Error != "too many requests" || body.RetryAfterMs != 60000 {
				t.Errorf("sixth request body %q (%v)", w.Body, err)
			}
			headers[b.name] = append(headers[b.name], w.Header())
			if got := next.calls.Load(); got != 5 {
				t.Errorf("the handler saw %d requests, want 5", got)
			}
			if w := get(h, "/items/1", client2, nil); w.Code != http.StatusOK {
				t.Errorf("another client: %d, want 200", w.Code)
			}
		})
	}
	if !reflect.DeepEqual(headers["local"], headers["daemon"]) {
		t.Errorf("the backends' headers differ:\n local  %v\n daemon %v", headers["local"], headers["daemon"])
	}
}

// TestSpoofedForwardedFor: X-Forwarded-For from a peer that is not a
// trusted proxy does not change the key, so it cannot escape the limit;
// through a trusted proxy the client's address is the key, whatever it
// prepended.
func TestSpoofedForwardedFor(t *testing.T) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) {
			kf := middleware.ClientIP(netip.MustParsePrefix("10.0.0.0/8"))
			h := middleware.New(b.new(t, rules5), middleware.Options{KeyFunc: kf})(&app{})
			// A client cycling X-Forwarded-For is still itself.
			for i := range 6 {
				xff := http.Header{"X-Forwarded-For": {"192.0.2." + strconv.Itoa(i+1)}}
				w := get(h, "/", "203.0.113.7:1", xff)
				if want := map[bool]int{true: 200, false: 429}[i < 5]; w.Code != want {
					t.Fatalf("direct request %d with X-Forwarded-For %s: %d, want %d", i+1, xff, w.Code, want)
				}
			}
			// Through the trusted proxy, one client whose spoofed prefix
			// varies...
			for i := range 6 {
				xff := http.Header{"X-Forwarded-For": {"192.0.2." + strconv.Itoa(i+1) + ", 198.51.100.1"}}
				w := get(h, "/", "10.0.0.1:1", xff)
				if want := map[bool]int{true: 200, false: 429}[i < 5]; w.Code != want {
					t.Fatalf("proxied request %d with X-Forwarded-For %s: %d, want %d", i+1, xff, w.Code, want)
				}
			}
			// ...and another client behind the same proxy.
			if w := get(h, "/", "10.0.0.1:1", http.Header{"X-Forwarded-For": {"198.51.100.2"}}); w.Code != 200 {
				t.Errorf("another proxied client: %d, want 200", w.Code)
			}
		})
	}
}

// TestFailOpenAndClosed: with the daemon down the request is passed on
// (and OnError told) or, failing closed, refused with 503.
func TestFailOpenAndClosed(t *testing.T) {
	for _, failClosed := range []bool{false, true} {
		t.Run("FailClosed="+strconv.FormatBool(failClosed), func(t *testing.T) {
			c := newClient(t, client.Config{Addrs: []string{deadAddr(t)}, FailClosed: failClosed})
			next, log := &app{}, &errLog{}
			h := middleware.New(c, middleware.Options{OnError: log.onError})(next)
			w := get(h, "/", "203.0.113.7:1", nil)
			if errs := log.all(); len(errs) != 1 || !errors.Is(errs[0], client.ErrUnavailable) {
				t.Errorf("OnError got %v, want one ErrUnavailable", errs)
			}
			if w.Header().Get("RateLimit") != "" {
				t.Errorf("RateLimit = %q without a decision", w.Header().Get("RateLimit"))
			}
			if !failClosed {
				if w.Code != 200 || next.calls.Load() != 1 {
					t.Errorf("fail open: %d, handler called %d times; want 200, once", w.Code, next.calls.Load())
				}
				return
			}
			if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" || next.calls.Load() != 0 {
				t.Errorf("fail closed: %d Retry-After %q, handler called %d times; want 503, 1, never",
					w.Code, w.Header().Get("Retry-After"), next.calls.Load())
			}
		})
	}
}

// TestBadKeys: a request with no key or a key the limiter refuses is
// answered 400 and never reaches the handler: it does not fail open.
func TestBadKeys(t *testing.T) {
	tests := []struct {
		name   string
		opts   middleware.Options
		header http.Header
		want   int
		err    error // what OnError is told, nil for nothing
	}{
		{"API key present", middleware.Options{KeyFunc: middleware.Header("X-Api-Key")}, http.Header{"X-Api-Key": {"k-1"}}, 200, nil},
		{"API key missing", middleware.Options{KeyFunc: middleware.Header("X-Api-Key")}, nil, 400, middleware.ErrNoKey},
		{"API key too long", middleware.Options{KeyFunc: middleware.Header("X-Api-Key")}, http.Header{"X-Api-Key": {strings.Repeat("k", 1025)}}, 400, client.ErrBadRequest},
		{"unknown rule", middleware.Options{Rule: "premium"}, nil, 400, client.ErrBadRequest},
		{"named rule", middleware.Options{Rule: "default"}, nil, 200, nil},
	}
	for _, b := range backends() {
		for _, tt := range tests {
			t.Run(b.name+"/"+tt.name, func(t *testing.T) {
				next, log := &app{}, &errLog{}
				tt.opts.OnError = log.onError
				w := get(middleware.New(b.new(t, rules5), tt.opts)(next), "/", "203.0.113.7:1", tt.header)
				if w.Code != tt.want {
					t.Errorf("status %d, want %d", w.Code, tt.want)
				}
				if calls := next.calls.Load(); (calls == 1) != (tt.want == 200) {
					t.Errorf("handler called %d times for a %d", calls, tt.want)
				}
				errs := log.all()
				if tt.err == nil && len(errs) != 0 || tt.err != nil && (len(errs) != 1 || !errors.Is(errs[0], tt.err)) {
					t.Errorf("OnError got %v, want %v", errs, tt.err)
				}
			})
		}
	}
}

// TestOnDenied: a custom OnDenied finds Retry-After, the RateLimit fields
// and the decision ready.
func TestOnDenied(t *testing.T) {
	var seen client.Decision
	var seenOK bool
	onDenied := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, seenOK = middleware.DecisionFrom(r.Context())
		w.WriteHeader(http.StatusTeapot)
	})
	h := middleware.New(newLocal(t, rules5), middleware.Options{OnDenied: onDenied})(&app{})
	for range 5 {
		get(h, "/", "203.0.113.7:1", nil)
	}
	w := get(h, "/", "203.0.113.7:1", nil)
	if w.Code != http.StatusTeapot || w.Header().Get("Retry-After") != "60" || w.Header().Get("RateLimit") != `"default";r=0;t=60` {
		t.Errorf("denied: %d %v; want OnDenied's 418 with Retry-After and RateLimit", w.Code, w.Header())
	}
	if !seenOK || seen.Allowed || seen.RetryAfter != time.Minute || seen.Rule != "default" {
		t.Errorf("DecisionFrom = %+v, %v", seen, seenOK)
	}
	if _, ok := middleware.DecisionFrom(context.Background()); ok {
		t.Error("DecisionFrom found a decision in a plain context")
	}
}

// TestRetryAfterRounding: Retry-After is whole seconds, rounded up, at
// least 1, whatever the wait.
func TestRetryAfterRounding(t *testing.T) {
	tests := []struct {
		wait time.Duration
		want string
	}{
		{0, "1"}, {time.Millisecond, "1"}, {time.Second, "1"}, {1001 * time.Millisecond, "2"}, {59*time.Second + 1, "60"},
	}
	for _, tt := range tests {
		c := fixed{client.Decision{RetryAfter: tt.wait, Rule: "r"}}
		w := get(middleware.New(c, middleware.Options{})(&app{}), "/", "203.0.113.7:1", nil)
		if got := w.Header().Get("Retry-After"); w.Code != 429 || got != tt.want {
			t.Errorf("wait %v: %d Retry-After %q, want 429 %q", tt.wait, w.Code, got, tt.want)
		}
	}
}

// fixed is a Checker that always answers d.
type fixed struct{ d client.Decision }

func (f fixed) Check(context.Context, client.Request) (client.Decision, error) { return f.d, nil }

func TestPanics(t *testing.T) {
	tests := map[string]func(){
		"nil Checker":  func() { middleware.New(nil, middleware.Options{}) },
		"nil handler":  func() { middleware.New(fixed{}, middleware.Options{})(nil) },
		"invalid CIDR": func() { middleware.ClientIP(netip.Prefix{}) },
	}
	for name, f := range tests {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
}
