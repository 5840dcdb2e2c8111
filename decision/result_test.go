package decision

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// TestPrimary checks the choice of the most constrained limit, the one a
// frontend reports when it reports one.
func TestPrimary(t *testing.T) {
	threeLimits := func(mod func(d *limiter.Decision)) limiter.Decision {
		d := limiter.Decision{Rule: "r", N: 3, Allowed: true, WouldAllow: true}
		for i := range 3 {
			d.Limits[i] = limiter.LimitResult{Limit: 100, Allowed: true, Remaining: 50}
		}
		mod(&d)
		return d
	}
	tests := []struct {
		name       string
		d          limiter.Decision
		want       int
		wantDenied bool
	}{
		{"one limit", allowed(), 0, false},
		{"allowed: least remaining", twoLimits(true, true), 1, false},
		{"denied by the first: the denying one, though the other has less left", twoLimits(false, true), 0, true},
		{"denied by both: the longest wait", twoLimits(false, false), 1, true},
		{"denied by the second", twoLimits(true, false), 1, true},
		{"ties: the first in rule order", threeLimits(func(*limiter.Decision) {}), 0, false},
		{"tie on least remaining after the first", threeLimits(func(d *limiter.Decision) {
			d.Limits[1].Remaining, d.Limits[2].Remaining = 10, 10
		}), 1, false},
		{"tie on the longest wait", threeLimits(func(d *limiter.Decision) {
			d.Allowed, d.WouldAllow, d.RetryAfter = false, false, time.Second
			for _, i := range []int{1, 2} {
				d.Limits[i].Allowed, d.Limits[i].Remaining, d.Limits[i].RetryAfter = false, 0, time.Second
			}
		}), 1, true},
		{"denied but no limit says so: least remaining", threeLimits(func(d *limiter.Decision) {
			d.Allowed, d.WouldAllow = false, false
			d.Limits[2].Remaining = 3
		}), 2, true},
		{"shadow would deny: the denying limit", func() limiter.Decision {
			d := twoLimits(false, true)
			d.Shadow, d.Allowed = true, true
			return d
		}(), 0, true},
		{"shadow allows: least remaining", func() limiter.Decision {
			d := twoLimits(true, true)
			d.Shadow = true
			return d
		}(), 1, false},
		{"no rule", limiter.Decision{Allowed: true, WouldAllow: true}, -1, false},
		{"no limits though denied", limiter.Decision{Rule: "r"}, -1, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := Result{Decision: tc.d}
			if got := r.Primary(); got != tc.want {
				t.Errorf("Primary = %d, want %d", got, tc.want)
			}
			if got := r.RuleDenied(); got != tc.wantDenied {
				t.Errorf("RuleDenied = %v, want %v", got, tc.wantDenied)
			}
		})
	}
}

// TestLimitsToleratesFaultyN: a Checker reporting an impossible N must not
// make a frontend index out of range.
func TestLimitsToleratesFaultyN(t *testing.T) {
	for _, tc := range []struct{ n, want int }{
		{-1, 0}, {0, 0}, {1, 1}, {2, 2}, {len(limiter.Decision{}.Limits), len(limiter.Decision{}.Limits)},
		{len(limiter.Decision{}.Limits) + 1, len(limiter.Decision{}.Limits)}, {1 << 30, len(limiter.Decision{}.Limits)},
	} {
		r := Result{Decision: twoLimits(false, false)}
		r.Decision.N = tc.n
		if got := len(r.Limits()); got != tc.want {
			t.Errorf("N=%d: %d limits, want %d", tc.n, got, tc.want)
		}
		if p := r.Primary(); p >= len(r.Limits()) || (p < 0) != (tc.want == 0) {
			t.Errorf("N=%d: Primary %d for %d limits", tc.n, p, len(r.Limits()))
		}
	}
}
