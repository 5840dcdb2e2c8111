package seed

import (
	"math"
	"math/bits"
)

// The study's arrival patterns (hiz/pencere.mjs), for any limit and window:
// at its own scale, 600 per 60 s over 180 s, they are its instants to the
// millisecond. Instants are integers of one unit (milliseconds, or a
// time.Duration), non-decreasing.

// SliceOf is the study's 5 s slice, scaled: a twelfth of the window.
func SliceOf[T ~int64](window T) T { return window / 12 }

// Spread returns n instants spread evenly over [start, start+span):
// request i at start + floor(i x span / n), the study's layout of a burst.
// The product is taken in 128 bits, so any span >= 0 and n are exact.
func Spread[T ~int64](start, span T, n int) []T {
	at := make([]T, n)
	for i := range at {
		hi, lo := bits.Mul64(uint64(i), uint64(span))
		q, _ := bits.Div64(hi, lo, uint64(n)) // i < n, so q < span: no overflow
		at[i] = start + T(q)
	}
	return at
}

// Steady is "steady at k x the limit": request i at
// i x window/(factor x limit), every instant before d. With 600 per 60 s,
// factor 2 and 180 s it is one request every 50 ms, 3,600 requests.
func Steady[T ~int64](limit int, window T, factor float64, d T) []T {
	step := float64(window) / (factor * float64(limit))
	n := int(math.Ceil(float64(d) / step))
	at := make([]T, 0, n)
	for i := range n {
		t := T(float64(i) * step)
		if t >= d {
			break
		}
		at = append(at, t)
	}
	return at
}

// EdgeBurst is "a burst on both sides of a window edge": for each edge E
// at 1 and 2 windows, a full limit spread over the slice before E and
// another over the slice after it; 4 x limit requests, in order. A fixed
// window counts the halves in different windows and lets 2x through.
func EdgeBurst[T ~int64](limit int, window T) []T {
	s := SliceOf(window)
	var at []T
	for _, edge := range []T{window, 2 * window} {
		at = append(at, Spread(edge-s, s, limit)...)
		at = append(at, Spread(edge, s, limit)...)
	}
	return at // the four bursts do not overlap, so this is sorted
}

// Intermittent is "intermittent, exactly at the limit": a full limit
// spread over the first slice of each of three windows. The client never
// exceeds its limit in any window, so none may be rejected.
func Intermittent[T ~int64](limit int, window T) []T {
	s := SliceOf(window)
	var at []T
	for k := range 3 {
		at = append(at, Spread(T(k)*window, s, limit)...)
	}
	return at
}
