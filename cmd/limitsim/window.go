package main

// maxInWindow returns the largest number of entries of at (instants in ms,
// non-decreasing) that fall in any half-open interval [a, a+window). It is
// the seed's enYogunPencere: two pointers, O(len(at)). Such an interval can
// always be slid right until it starts on an entry, so checking the intervals
// that end just after each entry (that is, [at[j], at[j]+window) for the
// leftmost j still in reach) is enough.
func maxInWindow(at []int64, window int64) int {
	best, j := 0, 0
	for i, t := range at {
		for t-at[j] >= window {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// ratio is n over limit, the figure the seed prints as "asim orani".
func ratio(n int, limit int64) float64 { return float64(n) / float64(limit) }
