package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func TestBucketRoundTrip(t *testing.T) {
	// Every bucket's top maps back to the bucket, and the next value to the next one.
	for b := range histBuckets - 1 {
		top := bucketTop(b)
		if got := bucketOf(top); got != b {
			t.Fatalf("bucketOf(bucketTop(%d) = %d) = %d", b, top, got)
		}
		if got := bucketOf(top + 1); got != b+1 {
			t.Fatalf("bucketOf(%d) = %d, want %d", top+1, got, b+1)
		}
	}
	if got := bucketOf(math.MaxInt64); got != histBuckets-1 {
		t.Errorf("bucketOf(MaxInt64) = %d, want the last bucket %d", got, histBuckets-1)
	}
}

// exactQuantile is the definition quantile implements: the smallest value
// with at least a fraction q of the values at or below it.
func exactQuantile(sorted []time.Duration, q float64) time.Duration {
	rank := int(math.Ceil(q * float64(len(sorted))))
	return sorted[max(rank, 1)-1]
}

func TestQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	gens := map[string]func() time.Duration{
		"small exact": func() time.Duration { return time.Duration(rng.IntN(64)) },
		"loopback":    func() time.Duration { return time.Duration(50_000 + rng.ExpFloat64()*200_000) },
		"heavy tail":  func() time.Duration { return time.Duration(math.Exp(rng.Float64()*20)) * time.Microsecond },
	}
	for name, gen := range gens {
		var h histogram
		vals := make([]time.Duration, 10_000)
		for i := range vals {
			vals[i] = gen()
			h.record(vals[i])
		}
		slices.Sort(vals)
		for _, q := range []float64{0, 0.001, 0.5, 0.9, 0.99, 0.999, 1} {
			got, want := h.quantile(q), exactQuantile(vals, q)
			// Never below the true value, at most one bucket (1/64) above it.
			if got < want || float64(got) > float64(want)*(1+1.0/subCount)+1 {
				t.Errorf("%s: q %v = %v, exact %v", name, q, got, want)
			}
		}
		if h.max != vals[len(vals)-1] || h.min != vals[0] || h.n != uint64(len(vals)) {
			t.Errorf("%s: min %v max %v n %d", name, h.min, h.max, h.n)
		}
	}
}

func TestHistogramSmallCases(t *testing.T) {
	var h histogram
	if h.quantile(0.5) != 0 || h.mean() != 0 {
		t.Error("empty histogram: quantile and mean must be 0")
	}
	h.record(-5) // a clock step backwards counts as 0
	h.record(3 * time.Millisecond)
	h.record(time.Millisecond)
	if got := h.quantile(0.5); got < time.Millisecond || got > time.Millisecond*65/64 {
		t.Errorf("median of {0, 1ms, 3ms} = %v", got)
	}
	if got := h.quantile(1); got != 3*time.Millisecond {
		t.Errorf("max quantile %v, want exactly the max 3ms", got)
	}
	if got := h.quantile(0); got != 0 {
		t.Errorf("min quantile %v, want 0", got)
	}
	if got := h.mean(); got != 4*time.Millisecond/3 {
		t.Errorf("mean %v", got)
	}

	var a, b histogram
	a.record(time.Second)
	b.record(time.Microsecond)
	b.record(2 * time.Second)
	a.merge(&b)
	a.merge(&histogram{})
	if a.n != 3 || a.min != time.Microsecond || a.max != 2*time.Second || a.quantile(0.5) < time.Second {
		t.Errorf("merged: n %d min %v max %v median %v", a.n, a.min, a.max, a.quantile(0.5))
	}
}
