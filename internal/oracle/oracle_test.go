package oracle

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// naiveMax tries every interval start between the first and last instant.
func naiveMax(at, hits []int64, window int64) int64 {
	var best int64
	if len(at) == 0 {
		return 0
	}
	for a := at[0] - window; a <= at[len(at)-1]; a++ {
		var n int64
		for i, t := range at {
			if t >= a && t < a+window {
				n += weight(hits, i)
			}
		}
		best = max(best, n)
	}
	return best
}

// TestAgainstNaive: the two-pointer answers equal the brute force over
// every interval, for random logs with and without weights.
func TestAgainstNaive(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		n, window := rng.IntN(40), int64(1+rng.IntN(20))
		at := make([]int64, n)
		for i := range at {
			at[i] = int64(rng.IntN(100))
		}
		slices.Sort(at)
		var hits []int64
		if round%2 == 1 {
			hits = make([]int64, n)
			for i := range hits {
				hits[i] = int64(1 + rng.IntN(3))
			}
		}
		got, start := MaxInWindow(at, hits, window)
		if want := naiveMax(at, hits, window); got != want {
			t.Fatalf("round %d: MaxInWindow %d, brute force %d (at %v hits %v window %d)", round, got, want, at, hits, window)
		}
		if n > 0 && InWindow(at, hits, start+window-1, window) != got {
			t.Fatalf("round %d: the interval starting at %d holds %d, not %d", round, start, InWindow(at, hits, start+window-1, window), got)
		}
	}
}

func TestFalseRejections(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		name               string
		admitted, rejected []time.Duration
		want               int
	}{
		{"full window", ms(0, 1, 2), ms(3), 0},
		{"one left the window", ms(0, 1, 2), ms(10), 1},
		{"the window is half-open on the left", ms(0, 5, 6), ms(10), 1},
		{"nothing admitted", nil, ms(1, 2), 2},
	} {
		if got := FalseRejections(tc.admitted, tc.rejected, 10*time.Millisecond, 3); got != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, got, tc.want)
		}
	}
	if got := FalseRejections(ms(5, 6, 7), ms(7), 10*time.Millisecond, 3); got != 0 {
		t.Errorf("an admission at the rejection's own instant counts: %d false, want 0", got)
	}
}

// TestLogAgainstInWindow: a Log fed decisions in order answers what
// InWindow computes over the whole log, query by query.
func TestLogAgainstInWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		var l Log[int64]
		window, limit := int64(1+rng.IntN(20)), int64(1+rng.IntN(6))
		var at, hits []int64
		now := int64(0)
		for range rng.IntN(60) {
			now += int64(rng.IntN(4))
			h := int64(1 + rng.IntN(3))
			want := InWindow(at, hits, now, window)
			if got := l.Admitted(now, window); got != want {
				t.Fatalf("round %d at %d: Log %d, InWindow %d", round, now, got, want)
			}
			if l.Fits(now, h, window, limit) != (want+h <= limit) {
				t.Fatalf("round %d at %d: Fits disagrees", round, now)
			}
			if rng.IntN(2) == 0 {
				l.Admit(now, h)
				at, hits = append(at, now), append(hits, h)
			}
		}
		if !slices.Equal(l.At, at) || !slices.Equal(l.Hits, hits) {
			t.Fatalf("round %d: the log kept %v %v, admitted %v %v", round, l.At, l.Hits, at, hits)
		}
	}
}

// TestMaxDecidedInWindow against brute force over every interval start:
// a request counts in [a, a+window) only if it was sent and answered in it.
func TestMaxDecidedInWindow(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 300 {
		n, window := rng.IntN(30), int64(1+rng.IntN(20))
		sent := make([]int64, n)
		for i := range sent {
			sent[i] = int64(rng.IntN(100))
		}
		slices.Sort(sent)
		answered := make([]int64, n)
		for i := range answered {
			answered[i] = sent[i] + int64(rng.IntN(6))
		}
		var want int64
		for a := int64(-window); a <= 110; a++ {
			var c int64
			for i := range sent {
				if sent[i] >= a && answered[i] < a+window {
					c++
				}
			}
			want = max(want, c)
		}
		if got := MaxDecidedInWindow(sent, answered, window); got != want {
			t.Fatalf("round %d: %d, brute force %d (sent %v answered %v window %d)", round, got, want, sent, answered, window)
		}
		if most, _ := MaxInWindow(sent, nil, window); MaxDecidedInWindow(sent, answered, window) > most {
			t.Fatalf("round %d: more decided in a window than sent in one", round)
		}
	}
}
