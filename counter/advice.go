package counter

import "time"

// maxShareableScan bounds Advise's search for the smallest limit a
// cluster can share (about 1 ms of arithmetic): enough for a few thousand
// nodes.
const maxShareableScan = 1 << 16

// Advice says what would bring a limit whose nodes, deciding alone with
// the budget, may admit more than its promised bound back within it. Every
// figure in it is BoundOf's under the settings it names; Advise derives it
// and limiterd words it with its flags.
type Advice struct {
	Limit    int64
	Window   time.Duration
	Nodes    int
	Promised int64 // Bound.Promised
	// EnableBudget is set when the budget is off (ClusterConfig.Budget):
	// each node may then admit the whole limit between two syncs.
	// BudgetBound is the bound with it on at the current sync interval;
	// when that is within Promised the budget is all the advice, and the
	// fields below are zero. Otherwise they assume it on.
	EnableBudget bool
	BudgetBound  int64
	// Sync is the longest sync interval, in whole milliseconds and at most
	// the current one, that keeps the limit within Promised with the
	// budget, and SyncBound the bound there; 0 if not even 1 ms does (the
	// bound never falls as the interval grows).
	Sync      time.Duration
	SyncBound int64
	// When Sync is 0: the bound at a 1 ms sync interval (Bound1ms), each
	// node's budget floor there (Floor1ms; above 1 the window is too short
	// for any interval, else the limit too small to share among Nodes) and
	// the slices' tails, N x T.
	Bound1ms, Floor1ms, Tails int64
	// Smallest is, when Sync is 0, the smallest larger limit per Window
	// that a 1 ms sync interval keeps within its promised bound on Nodes
	// nodes, or 0 if none within 65,536 above does.
	Smallest int64
	// EnableCoordinator is set when the coordinator is off
	// (ClusterConfig.Coordinated): with it on a healthy cluster keeps every
	// limit within its promised bound.
	EnableCoordinator bool
}

// Advise returns the advice for a limit of limit per window on counters
// with the given Tolerance and cluster settings (cc.Nodes of them); ok is
// false on a single node, which keeps every limit within its bound. Pure
// like BoundOf, whose figures it searches.
func Advise(tolerance float64, cc ClusterConfig, limit int64, window time.Duration) (a Advice, ok bool) {
	if cc.Nodes <= 1 {
		return Advice{}, false
	}
	// The what-ifs are those of nodes deciding alone, with the budget.
	fallback := func(sync time.Duration, limit int64) Bound {
		w := cc
		w.SyncInterval, w.Budget, w.Coordinated = sync, true, false
		return BoundOf(tolerance, w, limit, window)
	}
	a = Advice{Limit: limit, Window: window, Nodes: cc.Nodes, Promised: BoundOf(tolerance, cc, limit, window).Promised, EnableCoordinator: !cc.Coordinated}
	if !cc.Budget {
		a.EnableBudget, a.BudgetBound = true, fallback(cc.SyncInterval, limit).Fallback
		if a.BudgetBound <= a.Promised {
			return a, true
		}
	}
	fits := func(ms int64) bool { return fallback(time.Duration(ms)*time.Millisecond, limit).Fallback <= a.Promised }
	if ms := longestFitting(max(cc.SyncInterval.Milliseconds(), 1), fits); ms > 0 {
		a.Sync = time.Duration(ms) * time.Millisecond
		a.SyncBound = fallback(a.Sync, limit).Fallback
		return a, true
	}
	at1 := fallback(time.Millisecond, limit)
	a.Bound1ms, a.Floor1ms, a.Tails = at1.Fallback, at1.Floor, int64(cc.Nodes)*at1.Tail
	for l := limit + 1; l <= min(limit+maxShareableScan, MaxLimit); l++ {
		if b := fallback(time.Millisecond, l); b.Fallback <= b.Promised {
			a.Smallest = l
			break
		}
	}
	return a, true
}

// longestFitting returns the largest ms in [1, hi] for which fits holds,
// or 0 if fits(1) does not; fits must hold up to some ms and not above.
func longestFitting(hi int64, fits func(ms int64) bool) int64 {
	lo := int64(1)
	if !fits(lo) {
		return 0
	}
	for lo < hi { // fits(lo)
		mid := lo + (hi-lo+1)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	return lo
}
