package decision

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

const allRules = `rules:
  - name: small
    match: "small:*"
    limit: 2
    window: 60s
  - name: big
    match: "big:*"
    limit: 100
    window: 60s
  - name: dry
    match: "dry:*"
    limit: 1
    window: 60s
    shadow: true
`

// remainingOf peeks the remaining room of key.
func remainingOf(t *testing.T, d *Decider, key string) int64 {
	t.Helper()
	var r Result
	if err := d.Decide(context.Background(), limiter.Request{Key: key, Hits: 0, Peek: true}, &r); err != nil {
		t.Fatal(err)
	}
	return r.Limits()[0].Remaining
}

// TestDecideAllCountsAllOrNothing: several keys decided together are
// counted only when every one has room, and a denial counts none; shadow
// rules never deny the others; metrics count each request once.
func TestDecideAllCountsAllOrNothing(t *testing.T) {
	d, reg := newTestDecider(t, newRealLimiter(t, allRules), nil)
	reqs := []limiter.Request{{Key: "small:a", Hits: 1}, {Key: "big:a", Hits: 1}, {Key: "dry:a", Hits: 1}}
	out := make([]Result, len(reqs))
	for i := range 3 {
		if bad, err := d.DecideAll(context.Background(), reqs, out); err != nil || bad != -1 {
			t.Fatalf("call %d: %d %v", i+1, bad, err)
		}
		allowed := out[0].Decision.Allowed && out[1].Decision.Allowed && out[2].Decision.Allowed
		if want := i < 2; allowed != want {
			t.Fatalf("call %d: allowed %v, want %v (%+v)", i+1, allowed, want, out)
		}
	}
	if !out[1].Decision.Allowed || out[0].Decision.Allowed {
		t.Fatalf("the denied call's results: %+v", out)
	}
	if n := decisions(t, reg, "big", "allowed"); n != 3 {
		t.Fatalf("big's allowed decisions %v, want 3 (two counted, one answered)", n)
	}
	if n := decisions(t, reg, "small", "denied"); n != 1 {
		t.Fatalf("small's denials %v, want 1", n)
	}
	if got := remainingOf(t, d, "big:a"); got != 98 {
		t.Fatalf("big:a has %d left after two counted calls and a denied one, want 98", got)
	}
	// A check (Peek, hits 0) among them counts nothing.
	reqs = []limiter.Request{{Key: "big:b", Hits: 5}, {Key: "big:c", Peek: true}}
	if _, err := d.DecideAll(context.Background(), reqs, out); err != nil {
		t.Fatal(err)
	}
	if b, c := remainingOf(t, d, "big:b"), remainingOf(t, d, "big:c"); b != 95 || c != 100 {
		t.Fatalf("after 5 hits and a check: %d and %d left, want 95 and 100", b, c)
	}
}

// TestDecideAllBadInput: bad input in any request is returned with its
// index and nothing is counted.
func TestDecideAllBadInput(t *testing.T) {
	d, _ := newTestDecider(t, newRealLimiter(t, allRules), nil)
	out := make([]Result, 2)
	for _, tc := range []struct {
		reqs []limiter.Request
		idx  int
		is   error
	}{
		{[]limiter.Request{{Key: "big:a", Hits: 1}, {Key: "", Hits: 1}}, 1, limiter.ErrInvalidKey},
		{[]limiter.Request{{Key: "big:a", Hits: 1}, {Key: "small:a", Hits: 3}}, 1, limiter.ErrInvalidHits},
		{[]limiter.Request{{Key: "big:a", Rule: "nope", Hits: 1}}, 0, limiter.ErrUnknownRule},
	} {
		idx, err := d.DecideAll(context.Background(), tc.reqs, out)
		if idx != tc.idx || !errors.Is(err, tc.is) {
			t.Errorf("%+v: %d %v, want %d and %v", tc.reqs, idx, err, tc.idx, tc.is)
		}
	}
	if got := remainingOf(t, d, "big:a"); got != 100 {
		t.Fatalf("big:a has %d left after refused calls, want 100", got)
	}
	if _, err := d.DecideAll(context.Background(), make([]limiter.Request, 3), out); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("3 requests, 2 results: %v", err)
	}
}

// TestDecideAllFailsOpen: a Checker failing on one request lets it
// through, counted once as an internal error, and the others are decided.
func TestDecideAllFailsOpen(t *testing.T) {
	lim := newRealLimiter(t, allRules)
	c := checkFunc(func(t time.Time, req limiter.Request, dst *limiter.Decision) error {
		if req.Key == "big:broken" {
			return errors.New("disk on fire")
		}
		return lim.Check(t, req, dst)
	})
	d, reg := newTestDecider(t, c, nil)
	out := make([]Result, 2)
	if _, err := d.DecideAll(context.Background(), []limiter.Request{{Key: "big:broken", Hits: 1}, {Key: "big:x", Hits: 1}}, out); err != nil {
		t.Fatal(err)
	}
	if !out[0].Internal || !out[0].Decision.Allowed || !out[1].Decision.Allowed || out[1].Internal {
		t.Fatalf("%+v", out)
	}
	if n := value(t, reg, "limiterd_check_errors_total", nil); n != 1 {
		t.Fatalf("limiterd_check_errors_total = %v, want 1", n)
	}
	if got := remainingOf(t, d, "big:x"); got != 99 {
		t.Fatalf("big:x has %d left, want 99", got)
	}
}
