// Package oracle is the exact check of a decision log, the one every
// simulation, load tool and test of limiterd judges its decisions with:
// the most admitted in any window-long interval (NFR1), and the false
// rejections, denials while fewer than the limit were admitted in the
// window before them (NFR2).
//
// Instants are integers of any one unit (milliseconds, a time.Duration
// since a start), sorted non-decreasing; an interval is half-open,
// [a, a+window). The functions are pure; only a Log allocates, for the
// instants it keeps. A Log is not safe for concurrent use; its zero value
// is an empty log.
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

// MaxDecidedInWindow is MaxInWindow for requests known only to have been
// decided somewhere between their sending and their answer: the most
// admissions whose whole span [sent[i], answered[i]] lies in one interval
// [a, a+window), so none of them can have been decided outside it. sent is
// sorted, answered[i] >= sent[i]. What a client sees is MaxInWindow of
// sent; this one never charges the network's delay to the limiter, so it
// is what a derived bound is held against. O(n·k), k the most sent in a
// window.
func MaxDecidedInWindow[T ~int64](sent, answered []T, window T) int64 {
	var best int64
	for j := range sent {
		end, n := sent[j]+window, int64(0)
		for i := j; i < len(sent) && sent[i] < end; i++ {
			if answered[i] < end {
				n++
			}
		}
		best = max(best, n)
	}
	return best
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
	var l Log[T]
	n, i := 0, 0
	for _, r := range rejected {
		for ; i < len(admitted) && admitted[i] <= r; i++ {
			l.Admit(admitted[i], 1)
		}
		if l.Fits(r, 1, window, limit) {
			n++
		}
	}
	return n
}

// Log is one key's admissions, checked as decisions come, in the order of
// their instants: the streaming form of FalseRejections, for a simulation
// that judges each denial when it happens. At and Hits are the admitted
// instants and their weights, ready for MaxInWindow at the end.
type Log[T ~int64] struct {
	At   []T
	Hits []int64
	lo   int   // first index of At inside the window of the latest query
	sum  int64 // hits of At[lo:]
}

// Admit records hits admitted at t, no earlier than the last instant
// admitted or queried.
func (l *Log[T]) Admit(t T, hits int64) {
	l.At = append(l.At, t)
	l.Hits = append(l.Hits, hits)
	l.sum += hits
}

// Admitted returns the hits admitted in (t-window, t], t no earlier than
// the last instant admitted or queried: amortised O(1).
func (l *Log[T]) Admitted(t, window T) int64 {
	for l.lo < len(l.At) && l.At[l.lo] <= t-window {
		l.sum -= l.Hits[l.lo]
		l.lo++
	}
	return l.sum
}

// Fits reports whether a request of hits at t fits a limit a limiter that
// never over-counts enforces: its denial then is a false rejection.
func (l *Log[T]) Fits(t T, hits int64, window T, limit int64) bool {
	return l.Admitted(t, window)+hits <= limit
}

func weight(hits []int64, i int) int64 {
	if hits == nil {
		return 1
	}
	return hits[i]
}
