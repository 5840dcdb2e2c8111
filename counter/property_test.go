package counter

import (
	"math/rand/v2"
	"testing"
)

// TestPropertyAgainstOracle runs random and adversarial patterns over a
// spread of limits, windows, slice counts and tolerances, and checks NFR1,
// NFR2 and exact RetryAfter against the list of accepted requests.
func TestPropertyAgainstOracle(t *testing.T) {
	cases := []params{
		{limit: 600, windowMs: 60_000, slices: 12, tol: 0.1}, // HS3/HS7
		{limit: 10, windowMs: 1_000, slices: 10, tol: 0.1},
		{limit: 7, windowMs: 1_000, slices: 4, tol: 0.1}, // T = 0: exact log
		{limit: 1, windowMs: 500, slices: 1, tol: 0.1},
		{limit: 100, windowMs: 10_000, slices: 1, tol: 0.1},
		{limit: 100, windowMs: 10_000, slices: 100, tol: 0.1},
		{limit: 50, windowMs: 3_000, slices: 7, tol: 0.5},
		{limit: 50, windowMs: 3_000, slices: 3, tol: 0},
		{limit: 1000, windowMs: 1_000, slices: 12, tol: 0.05},
	}
	for _, p := range cases {
		for seed := uint64(1); seed <= 3; seed++ {
			rng := rand.New(rand.NewPCG(seed, 20260730))
			for name, arr := range patterns(p, rng) {
				t.Run(p.String()+"/"+name, func(t *testing.T) {
					_, rejected, _ := runAgainstOracle(t, p, arr, seed == 1)
					if name == "intermittent" && rejected != 0 {
						t.Errorf("intermittent client at exactly the limit: %d rejected, want 0", rejected)
					}
				})
			}
		}
	}
}

// TestBoundIsReached shows the bound is tight, so the tests above could
// fail: an adversary that knows the algorithm gets exactly L+T into one
// window-long interval, and no more.
func TestBoundIsReached(t *testing.T) {
	p := params{limit: 600, windowMs: 60_000, slices: 12, tol: 0.1}
	// One request opens a slice at 0; 60 more join its tail at 4999; 539
	// arrive at 5000; at 60000 the first slice leaves the window although
	// its tail (4999) is still inside [4999, 64999): 61 more fit.
	var a []arrival
	a = append(a, arrival{0, 1})
	for range 60 {
		a = append(a, arrival{4999, 1})
	}
	for range 539 {
		a = append(a, arrival{5000, 1})
	}
	for range 100 {
		a = append(a, arrival{60_000, 1})
	}
	_, _, o := runAgainstOracle(t, p, a, false)
	if got := o.maxInAnyWindow(p.windowMs); got != p.bound() {
		t.Fatalf("adversary got %d into one window, want exactly the bound %d", got, p.bound())
	}
}
