package seedstudy

import (
	"fmt"
	"math"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// The seed's model constants (hiz/pencere.mjs): HS3, HS7 and HS8.
const (
	Limit      = 600     // SINIR: requests per window (HS3)
	WindowMs   = 60_000  // PENCERE
	Slices     = 12      // HS7
	SliceMs    = 5_000   // DILIM = PENCERE / 12
	DurationMs = 180_000 // SURE: model time of every pattern
	Bucket     = 60      // KOVA: token-bucket capacity (HS8)
	Refill     = 10      // DOLDURMA: tokens per second = SINIR / 60 s
)

// NFR1Ratio is NFR1: no 60 s interval may hold more than 1.1 x the limit.
const NFR1Ratio = 1.1

// Ratio is n over limit, the figure the seed prints as "asim orani".
func Ratio(n int, limit int64) float64 { return float64(n) / float64(limit) }

// A Model decides, one request at a time, whether a request arriving at t
// (ms, non-decreasing from call to call) is accepted, and counts it if so.
// Models are single-client and single-use.
type Model func(t int64) (bool, error)

// An Algorithm names a model and builds fresh instances of it.
type Algorithm struct {
	Name  string
	Build func() (Model, error)
}

// Algorithms returns the seed's three comparison models followed by
// limiterd's real counter, all with the seed's parameters.
func Algorithms() []Algorithm {
	return []Algorithm{
		{"fixed window", func() (Model, error) { return FixedWindow(Limit, WindowMs), nil }},
		{"12-slice sliding", func() (Model, error) { return SeedSliding(Limit, WindowMs, SliceMs), nil }},
		{"token bucket (60, 10/s)", func() (Model, error) { return TokenBucket(Bucket, Refill), nil }},
		{"limiterd", func() (Model, error) {
			return Limiterd(counter.DefaultConfig(), Limit, WindowMs*time.Millisecond, Slices)
		}},
	}
}

// FixedWindow is the seed's "sabit pencere": one counter per epoch-aligned
// window, reset when a request arrives in a new window.
func FixedWindow(limit, windowMs int64) Model {
	cur, n := int64(-1), int64(0)
	return func(t int64) (bool, error) {
		if k := floorDiv(t, windowMs); k != cur {
			cur, n = k, 0
		}
		if n >= limit {
			return false, nil
		}
		n++
		return true, nil
	}
}

// SeedSliding is the seed's "kaydirmali dilim": epoch-aligned slices of
// sliceMs, numbered floor(t/sliceMs); a request in slice d counts slices
// [d-K+1, d] with K = windowMs/sliceMs. What it counts is therefore the
// interval [(d-K+1)*sliceMs, t], between windowMs-sliceMs and windowMs long:
// a request at the very end of slice d-K is forgotten as soon as slice d
// begins, windowMs-sliceMs+1 ms later. That is the flaw the slice-end pattern
// exposes. Like the JavaScript, it forgets old slices even on a rejection.
func SeedSliding(limit, windowMs, sliceMs int64) Model {
	k := windowMs / sliceMs
	counts := make(map[int64]int64)
	return func(t int64) (bool, error) {
		d := floorDiv(t, sliceMs)
		first := d - k + 1
		var total int64
		for s, n := range counts {
			if s < first {
				delete(counts, s)
				continue
			}
			total += n
		}
		if total >= limit {
			return false, nil
		}
		counts[d]++
		return true, nil
	}
}

// TokenBucket is the seed's "belirtec kovasi" in float64, operation for
// operation like the JavaScript: tokens = min(capacity, tokens +
// (t-last)/1000*refill); a request takes one token if at least one is there.
// The bucket starts full and its clock at 0.
func TokenBucket(capacity, refill float64) Model {
	tokens, last := capacity, int64(0)
	return func(t int64) (bool, error) {
		// The explicit conversion rounds the product before the addition,
		// which forbids the compiler to fuse them into one FMA (Go spec,
		// "Arithmetic operators"), so every platform matches JavaScript.
		tokens = math.Min(capacity, tokens+float64(float64(t-last)/1000*refill))
		last = t
		if tokens < 1 {
			return false, nil
		}
		tokens--
		return true, nil
	}
}

// limiterdKey is the one client the single-client models are about.
const limiterdKey = "seed"

// Limiterd runs limiterd's real counter on a simulated clock: each request
// is one Allow of one hit at time.UnixMilli(t) against a fresh Counter.
func Limiterd(cfg counter.Config, limit int64, window time.Duration, slices int) (Model, error) {
	c, err := counter.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("limiterd model: %w", err)
	}
	lim, err := c.Limit(limiterdKey, limit, window, slices)
	if err != nil {
		return nil, fmt.Errorf("limiterd model: %w", err)
	}
	limits := []counter.Limit{lim}
	var res [counter.MaxLimitsPerCall]counter.Result
	return func(t int64) (bool, error) {
		d, err := c.Allow(time.UnixMilli(t), limiterdKey, 1, limits, res[:])
		if err != nil {
			return false, fmt.Errorf("limiterd model at %d ms: %w", t, err)
		}
		return d.Allowed, nil
	}, nil
}

// RunModel feeds the request instants at (non-decreasing) to m and returns
// the instants it accepted, in order.
func RunModel(m Model, at []int64) ([]int64, error) {
	accepted := make([]int64, 0, len(at))
	for _, t := range at {
		ok, err := m(t)
		if err != nil {
			return nil, err
		}
		if ok {
			accepted = append(accepted, t)
		}
	}
	return accepted, nil
}

// floorDiv is Math.floor(a / b) for b > 0, also for negative a.
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}
