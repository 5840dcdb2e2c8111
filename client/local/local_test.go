package local_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/internal/limiterdtest"
	"github.com/limiterd/limiterd/client/local"
	"github.com/limiterd/limiterd/limiter"
)

// rules has a rule of each kind the answer depends on: one limit, several
// limits, shadow, a window that is no whole number of seconds, and keys
// that no rule governs (there is no default rule).
const rules = `
rules:
  - name: user
    match: "user:*"
    limit: 3
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 2, window: 1s}
      - {limit: 10, window: 60s}
  - name: dry
    match: "dry:*"
    limit: 1
    window: 90s
    shadow: true
  - name: half
    match: "half:*"
    limit: 2
    window: 1500ms
`

// TestHeadersMatchDaemon puts the same requests at the same instants to a
// real limiterd node (through client.Client) and to a local.Checker, each
// with its own limiter over the same rules, and requires the same answers:
// Decision, RateLimit fields and error class.
func TestHeadersMatchDaemon(t *testing.T) {
	clk := limiterdtest.NewClock()
	srv, err := limiterdtest.Server(rules, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	remote, err := client.New(client.Config{Addrs: []string{srv.URL}, Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := limiterdtest.Decider(rules, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		t.Fatal(err)
	}

	var reqs []client.Request
	repeat := func(n int, r client.Request) {
		for range n {
			reqs = append(reqs, r)
		}
	}
	repeat(5, client.Request{Key: "user:1"})               // 3 allowed, then denied
	repeat(4, client.Request{Key: "api:1"})                // the 1s limit denies
	repeat(2, client.Request{Key: "api:2", Hits: 2})       // hits above one
	repeat(3, client.Request{Key: "dry:1"})                // shadow: allowed, would deny
	repeat(4, client.Request{Key: "half:1"})               // w and t rounded up
	repeat(2, client.Request{Key: "other"})                // no rule
	repeat(4, client.Request{Key: "anyone", Rule: "user"}) // a rule by name
	repeat(1, client.Request{Key: "x", Rule: "premium"})   // unknown rule
	repeat(1, client.Request{Key: "api:3", Hits: 3})       // hits above a limit
	repeat(1, client.Request{Key: "x", Hits: -1})          // hits below 1
	repeat(1, client.Request{Key: ""})                     // empty key
	repeat(1, client.Request{Key: strings.Repeat("k", limiter.MaxKeyBytes+1)})
	repeat(1, client.Request{Key: "bad\xffutf8"})

	sawFields, sawDeny := false, false
	for i, r := range reqs {
		// A step that is no whole number of milliseconds, so that the
		// rounding of every duration shows.
		clk.Advance(137*time.Millisecond + 300*time.Microsecond)
		want, werr := remote.Check(context.Background(), r)
		got, gerr := lc.Check(context.Background(), r)
		if errors.Is(werr, client.ErrBadRequest) != errors.Is(gerr, client.ErrBadRequest) || (werr == nil) != (gerr == nil) {
			t.Fatalf("request %d (%.40v): daemon error %v, local error %v", i, r, werr, gerr)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("request %d (%.40v):\n local  %+v\n daemon %+v", i, r, got, want)
		}
		sawFields = sawFields || want.Headers != nil
		sawDeny = sawDeny || (werr == nil && !want.Allowed)
	}
	if !sawFields || !sawDeny {
		t.Errorf("the sequence showed RateLimit fields %v and denials %v; want both", sawFields, sawDeny)
	}
}

// failing is a decision.Checker that fails or panics.
type failing struct{ panics bool }

func (f failing) Check(time.Time, limiter.Request, *limiter.Decision) error {
	if f.panics {
		panic("limiter bug")
	}
	return errors.New("disk on fire")
}

func TestFailsOpen(t *testing.T) {
	for _, f := range []failing{{}, {panics: true}} {
		dec, err := limiterdtest.OnChecker(f, limiterdtest.FixedClock(), prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		lc, err := local.New(dec)
		if err != nil {
			t.Fatal(err)
		}
		d, err := lc.Check(context.Background(), client.Request{Key: "k"})
		want := client.Decision{Allowed: true, WouldAllow: true, FailedOpen: true}
		if !errors.Is(err, client.ErrUnavailable) || !reflect.DeepEqual(d, want) {
			t.Errorf("panics=%v: Check = %+v, %v; want %+v and ErrUnavailable", f.panics, d, err, want)
		}
	}
}

func TestBadInput(t *testing.T) {
	dec, err := limiterdtest.Decider(rules, limiterdtest.FixedClock())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		req  client.Request
		kind error
		msg  string
	}{
		{client.Request{Key: ""}, limiter.ErrInvalidKey, "client: bad request: key is empty"},
		{client.Request{Key: "x", Rule: "premium"}, limiter.ErrUnknownRule, `unknown rule "premium"`},
		{client.Request{Key: "api:1", Hits: 3}, limiter.ErrInvalidHits, "exceed the limit 2"},
	}
	for _, tt := range tests {
		d, err := lc.Check(context.Background(), tt.req)
		if !errors.Is(err, client.ErrBadRequest) || !errors.Is(err, tt.kind) || !strings.Contains(err.Error(), tt.msg) {
			t.Errorf("Check(%+v) error = %v; want ErrBadRequest and %v saying %q", tt.req, err, tt.kind, tt.msg)
		}
		if !reflect.DeepEqual(d, client.Decision{}) {
			t.Errorf("Check(%+v) = %+v; want the zero Decision", tt.req, d)
		}
	}
}

func TestNewNil(t *testing.T) {
	if _, err := local.New(nil); !errors.Is(err, local.ErrInvalidConfig) {
		t.Errorf("New(nil) error = %v, want ErrInvalidConfig", err)
	}
}

// TestConcurrent checks from many goroutines (under -race): exactly the
// limit is allowed.
func TestConcurrent(t *testing.T) {
	dec, err := limiterdtest.Decider(rules, limiterdtest.FixedClock())
	if err != nil {
		t.Fatal(err)
	}
	lc, err := local.New(dec)
	if err != nil {
		t.Fatal(err)
	}
	results := make(chan bool, 20)
	for range 20 {
		go func() {
			d, err := lc.Check(context.Background(), client.Request{Key: "user:shared"})
			results <- err == nil && d.Allowed
		}()
	}
	allowed := 0
	for range 20 {
		if <-results {
			allowed++
		}
	}
	if allowed != 3 {
		t.Errorf("%d of 20 allowed, want 3", allowed)
	}
}
