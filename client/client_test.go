package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" for valid
	}{
		{"host:port", Config{Addrs: []string{"127.0.0.1:8080"}}, ""},
		{"URLs", Config{Addrs: []string{"http://a:1", "https://b/prefix/"}}, ""},
		{"all set", Config{Addrs: []string{"a:1"}, Timeout: time.Second, AttemptTimeout: time.Second, Backoff: time.Minute}, ""},
		{"no addrs", Config{}, "Addrs is empty"},
		{"bad scheme", Config{Addrs: []string{"ftp://a:1"}}, "scheme must be http or https"},
		{"no host", Config{Addrs: []string{"http://"}}, "no host"},
		{"query", Config{Addrs: []string{"http://a:1/?x=1"}}, "no query"},
		{"credentials", Config{Addrs: []string{"http://u:p@a:1"}}, "credentials"},
		{"duplicate after normalizing", Config{Addrs: []string{"a:1", "http://a:1/"}}, "given twice"},
		{"negative timeout", Config{Addrs: []string{"a:1"}, Timeout: -1}, "Timeout must be"},
		{"timeout too long", Config{Addrs: []string{"a:1"}, Timeout: time.Minute}, "Timeout must be"},
		{"attempt over timeout", Config{Addrs: []string{"a:1"}, Timeout: 10 * time.Millisecond, AttemptTimeout: 11 * time.Millisecond}, "AttemptTimeout must be"},
		{"attempt over default timeout", Config{Addrs: []string{"a:1"}, AttemptTimeout: time.Second}, "AttemptTimeout must be"},
		{"negative backoff", Config{Addrs: []string{"a:1"}, Backoff: -time.Second}, "Backoff must be"},
		{"every problem: the addresses", Config{Timeout: -1, Backoff: -time.Second}, "Addrs is empty"},
		{"every problem: the timeout", Config{Timeout: -1, Backoff: -time.Second}, "Timeout must be"},
		{"every problem: the backoff", Config{Timeout: -1, Backoff: -time.Second}, "Backoff must be"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.cfg.Validate()
			_, newErr := New(tt.cfg)
			if tt.wantErr == "" {
				if err != nil || newErr != nil {
					t.Fatalf("Validate() = %v, New: %v; want both nil", err, newErr)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Validate() = %v; want ErrInvalidConfig saying %q", err, tt.wantErr)
			}
			if !errors.Is(newErr, ErrInvalidConfig) {
				t.Fatalf("New: %v; want ErrInvalidConfig", newErr)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	c := newClient(t, Config{}, "127.0.0.1:1", "https://b.example/prefix/")
	if c.cfg.Timeout != DefaultTimeout || c.cfg.AttemptTimeout != DefaultAttemptTimeout || c.cfg.Backoff != DefaultBackoff || c.cfg.FailClosed {
		t.Errorf("defaults = %v, %v, %v, FailClosed %v", c.cfg.Timeout, c.cfg.AttemptTimeout, c.cfg.Backoff, c.cfg.FailClosed)
	}
	tr, ok := c.cfg.HTTPClient.Transport.(*http.Transport)
	if !ok || tr.MaxIdleConnsPerHost != DefaultMaxIdleConnsPerHost || tr.Proxy != nil {
		t.Errorf("default transport = %#v", c.cfg.HTTPClient.Transport)
	}
	if got := []string{c.nodes[0].check, c.nodes[1].check}; got[0] != "http://127.0.0.1:1/check?key=" || got[1] != "https://b.example/prefix/check?key=" {
		t.Errorf("check URLs = %q", got)
	}
	// A short Timeout caps the default AttemptTimeout.
	c = newClient(t, Config{Timeout: 5 * time.Millisecond}, "a:1")
	if c.cfg.AttemptTimeout != 5*time.Millisecond {
		t.Errorf("AttemptTimeout = %v, want Timeout (5ms)", c.cfg.AttemptTimeout)
	}
}

// TestRequestEncoding checks what a node is asked: the key always, even
// empty (so that the node never falls back to a header), rule and hits only
// when set, everything escaped.
func TestRequestEncoding(t *testing.T) {
	tests := []struct {
		req  Request
		want url.Values
	}{
		{Request{Key: "203.0.113.7"}, url.Values{"key": {"203.0.113.7"}}},
		{Request{Key: "a b&c=d/é+%", Rule: "api/1s", Hits: 3}, url.Values{"key": {"a b&c=d/é+%"}, "rule": {"api/1s"}, "hits": {"3"}}},
		{Request{Key: "", Hits: -2}, url.Values{"key": {""}, "hits": {"-2"}}},
	}
	s := newStub(t, "a")
	c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, s.srv.URL)
	for _, tt := range tests {
		if _, err := c.Check(context.Background(), tt.req); err != nil {
			t.Fatalf("Check(%+v): %v", tt.req, err)
		}
		u, err := url.Parse(s.lastURL())
		if err != nil {
			t.Fatal(err)
		}
		if u.Path != "/check" || !reflect.DeepEqual(u.Query(), tt.want) {
			t.Errorf("Check(%+v) asked %s, want /check?%s", tt.req, u, tt.want.Encode())
		}
	}
}

func TestDecode(t *testing.T) {
	rl := http.Header{"Ratelimit-Policy": {`"default";q=5;w=60`}, "Ratelimit": {`"default";r=4;t=55`}}
	tests := []struct {
		name    string
		status  int
		header  http.Header
		body    string
		want    Decision
		wantErr error  // nil, ErrBadRequest or ErrUnavailable
		wantMsg string // in the error
		backoff bool   // the node is backed off afterwards
	}{
		{
			name: "allowed", status: 200, header: rl,
			body: `{"allowed":true,"limit":5,"remaining":4,"retry_after_ms":0,"reset_ms":54321,"rule":"default"}`,
			want: Decision{Allowed: true, WouldAllow: true, Limit: 5, Remaining: 4, Reset: 54321 * time.Millisecond, Rule: "default", Headers: rl},
		},
		{
			name: "denied", status: 429, header: http.Header{"Ratelimit": {`"default";r=0;t=60`}, "Retry-After": {"60"}},
			body: `{"allowed":false,"limit":5,"remaining":0,"retry_after_ms":59001,"reset_ms":60000,"rule":"default"}`,
			want: Decision{Limit: 5, RetryAfter: 59001 * time.Millisecond, Reset: time.Minute, Rule: "default",
				Headers: http.Header{"Ratelimit": {`"default";r=0;t=60`}}},
		},
		{
			name: "shadow would deny", status: 200, header: http.Header{"X-Ratelimit-Shadow": {"deny"}},
			body: `{"allowed":true,"limit":1,"remaining":0,"retry_after_ms":1000,"reset_ms":1000,"rule":"dry","shadow":true,"would_allow":false}`,
			want: Decision{Allowed: true, Limit: 1, RetryAfter: time.Second, Reset: time.Second, Rule: "dry", Shadow: true},
		},
		{
			name: "untracked", status: 200, header: rl,
			body: `{"allowed":true,"limit":5,"remaining":5,"retry_after_ms":0,"reset_ms":0,"rule":"default","untracked":true}`,
			want: Decision{Allowed: true, WouldAllow: true, Limit: 5, Remaining: 5, Rule: "default", Untracked: true, Headers: rl},
		},
		{
			name: "no rule", status: 200, body: `{"allowed":true,"rule":""}`,
			want: Decision{Allowed: true, WouldAllow: true},
		},
		{
			name: "internal error on the node", status: 200, header: http.Header{"X-Ratelimit-Error": {"internal"}},
			body: `{"allowed":true,"rule":""}`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "could not decide (X-RateLimit-Error: internal)",
		},
		{
			name: "bad request", status: 400, body: `{"error":"key is empty"}`,
			wantErr: ErrBadRequest, wantMsg: "client: bad request: key is empty",
		},
		{
			name: "bad request without JSON", status: 400, body: `nope`,
			wantErr: ErrBadRequest, wantMsg: "400 Bad Request",
		},
		{
			name: "header too large", status: 431, body: ``,
			wantErr: ErrBadRequest, wantMsg: "431",
		},
		{
			name: "5xx", status: 503, body: `{"error":"down"}`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "unexpected status 503 Service Unavailable", backoff: true,
		},
		{
			name: "not limiterd", status: 404, body: `not found`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "unexpected status 404", backoff: true,
		},
		{
			name: "malformed JSON", status: 200, body: `{"allowed":tru`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "malformed 200 answer", backoff: true,
		},
		{
			name: "no allowed", status: 200, body: `{"rule":"x"}`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: `no "allowed"`, backoff: true,
		},
		{
			name: "status and body disagree", status: 200, body: `{"allowed":false,"rule":"x"}`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "status 200 with \"allowed\":false", backoff: true,
		},
		{
			name: "negative count", status: 200, body: `{"allowed":true,"limit":-1,"rule":"x"}`, want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			wantErr: ErrUnavailable, wantMsg: "out of range", backoff: true,
		},
		{
			name: "huge answer", status: 200, body: `{"allowed":true,"rule":"` + strings.Repeat("x", maxBody) + `"}`,
			want: Decision{Allowed: true, WouldAllow: true, FailedOpen: true}, wantErr: ErrUnavailable, wantMsg: "larger than", backoff: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newStub(t, "a")
			s.answer(tt.status, tt.header, tt.body)
			c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, s.srv.URL)
			got, err := c.Check(context.Background(), Request{Key: "k"})
			if tt.wantErr == nil && err != nil {
				t.Fatalf("Check: %v", err)
			}
			if tt.wantErr != nil && (!errors.Is(err, tt.wantErr) || !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Fatalf("Check error = %v; want %v saying %q", err, tt.wantErr, tt.wantMsg)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Decision =\n %+v\nwant\n %+v", got, tt.want)
			}
			if backingOff(c, 0) != tt.backoff {
				t.Errorf("backing off = %v, want %v", !tt.backoff, tt.backoff)
			}
		})
	}
}

// TestHeadersAreTheCallers checks that the Headers a Check returns can be
// added to without touching another Check's.
func TestHeadersAreTheCallers(t *testing.T) {
	srv := daemon(t, rules5)
	// Deadlines far from the defaults' 50 ms: this is not about timing,
	// and a race build beside the e2e packages once took longer.
	c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, srv.URL)
	d1, err1 := c.Check(context.Background(), Request{Key: "a"})
	d2, err2 := c.Check(context.Background(), Request{Key: "b"})
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	d1.Headers.Add("Ratelimit", "x")
	if got := d2.Headers.Values("Ratelimit"); len(got) != 1 {
		t.Errorf("another Decision's Headers changed: %q", got)
	}
}

// TestAgainstDaemon checks the client against a real limiterd node: five
// requests a minute pass, the sixth is denied with the wait and the
// RateLimit fields, and bad input is an error that never fails open.
func TestAgainstDaemon(t *testing.T) {
	srv := daemon(t, rules5)
	// Not the defaults' 50 ms: a race build beside the e2e packages took
	// longer than that for the first check in a CI run of 3a905c6.
	c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, srv.URL)
	ctx := context.Background()
	for i := range 5 {
		d, err := c.Check(ctx, Request{Key: "203.0.113.7"})
		if err != nil || !d.Allowed || d.Remaining != int64(4-i) || d.Limit != 5 || d.Rule != "default" {
			t.Fatalf("check %d = %+v, %v; want allowed with %d remaining", i+1, d, err, 4-i)
		}
		if got := d.Headers.Get("RateLimit-Policy"); got != `"default";q=5;w=60` {
			t.Errorf("check %d RateLimit-Policy = %q", i+1, got)
		}
	}
	d, err := c.Check(ctx, Request{Key: "203.0.113.7"})
	want := Decision{Limit: 5, RetryAfter: time.Minute, Reset: time.Minute, Rule: "default", Headers: http.Header{
		"Ratelimit-Policy": {`"default";q=5;w=60`}, "Ratelimit": {`"default";r=0;t=60`}}}
	if err != nil || !reflect.DeepEqual(d, want) {
		t.Fatalf("sixth check = %+v, %v; want %+v", d, err, want)
	}

	bad := []struct {
		req Request
		msg string
	}{
		{Request{Key: ""}, "key is empty"},
		{Request{Key: "x", Rule: "premium"}, `unknown rule "premium"`},
		{Request{Key: "x", Hits: 6}, "exceed the limit"},
		{Request{Key: "x", Hits: -1}, "hits must be at least 1"},
		{Request{Key: strings.Repeat("k", 1025)}, "longer than 1024 bytes"},
	}
	for _, b := range bad {
		d, err := c.Check(ctx, b.req)
		if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), b.msg) || d.Allowed || d.FailedOpen {
			t.Errorf("Check(%.40v) = %+v, %v; want a denying Decision and ErrBadRequest saying %q", b.req, d, err, b.msg)
		}
	}
	if backingOff(c, 0) {
		t.Error("bad input backed the node off")
	}
}

// TestConcurrentChecks runs checks from many goroutines (under -race):
// exactly the limit is allowed.
func TestConcurrentChecks(t *testing.T) {
	srv := daemon(t, rules5)
	c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, srv.URL)
	var mu sync.Mutex
	allowed, denied := 0, 0
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			d, err := c.Check(context.Background(), Request{Key: "shared"})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil:
				t.Error(err)
			case d.Allowed:
				allowed++
			default:
				denied++
			}
		})
	}
	wg.Wait()
	if allowed != 5 || denied != 15 {
		t.Errorf("allowed %d, denied %d; want 5 and 15", allowed, denied)
	}
}
