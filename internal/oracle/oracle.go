// Package oracle is the exact check of a decision log, the one every
// simulation, load tool and test of limiterd judges its decisions with:
// the most admitted in any window-long interval (NFR1), and the false
// rejections, denials while fewer than the limit were admitted in the
// window before them (NFR2).
//
// Instants are integers of any one unit (milliseconds, a time.Duration
// since a start), sorted non-decreasing; an interval is half-open,
// [a, a+window). The functions are pure and allocate nothing.
package oracle

// MaxInWindow returns the most admitted in any interval [a, a+window) and
// the first instant of the first such interval: two pointers over at,
// O(len(at)). hits weighs each instant (a request of several hits); nil
// counts each as 1. Such an interval can always be slid right until it
// starts on an instant, so the intervals starting at each instant are
// enough (the seed's enYogunPencere).
func MaxInWindow[T ~int64](at []T, hits []int64, window T) (best int64, start T) {
	var sum int64
	j := 0
	for i, t := range at {
		sum += weight(hits, i)
		for t-at[j] >= window {
			sum -= weight(hits, j)
			j++
		}
		if sum > best {
			best, start = sum, at[j]
		}
	}
	return best, start
}

// InWindow returns the hits admitted in (t-window, t]: what a limiter that
// never over-counts had counted when it decided at t.
func InWindow[T ~int64](at []T, hits []int64, t, window T) int64 {
	var n int64
	for i := len(at) - 1; i >= 0 && at[i] > t-window; i-- {
		if at[i] <= t {
			n += weight(hits, i)
		}
	}
	return n
}

// FalseRejections counts the rejections (sorted instants) for which fewer
// than limit admitted instants lie in (r-window, r]: a limiter that never
// over-counts would have admitted them.
func FalseRejections[T ~int64](admitted, rejected []T, window T, limit int64) int {
	n, lo, hi := 0, 0, 0
	for _, r := range rejected {
		for hi < len(admitted) && admitted[hi] <= r {
			hi++
		}
		for lo < hi && admitted[lo] <= r-window {
			lo++
		}
		if int64(hi-lo) < limit {
			n++
		}
	}
	return n
}

func weight(hits []int64, i int) int64 {
	if hits == nil {
		return 1
	}
	return hits[i]
}
