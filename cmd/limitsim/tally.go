package main

import (
	"maps"
	"slices"
)

// tally accounts for decisions against the truth: every key's accepted
// instants on the true clock. It finds false rejections (NFR2) as they
// happen and the busiest window-long interval (NFR1) at the end.
type tally struct {
	window, limit int64
	keys          map[string]*keyTally

	requests, accepted, rejected, untracked int
	// falseRejections counts rejections of a request that fitted: fewer
	// than limit requests of its key were accepted in the window before it,
	// (t-window, t], so a limiter that never over-counts must accept it.
	falseRejections int
}

// keyTally is one key's accepted instants (non-decreasing) and the index of
// the first one inside the window of the latest request.
type keyTally struct {
	at []int64
	lo int
}

func newTally(window, limit int64) *tally {
	return &tally{window: window, limit: limit, keys: make(map[string]*keyTally)}
}

// record adds one decision for key at true time t (non-decreasing from call
// to call). untracked requests are allowed and counted as accepted.
func (ty *tally) record(t int64, key string, allowed, untracked bool) {
	ty.requests++
	k := ty.keys[key]
	if k == nil {
		k = &keyTally{}
		ty.keys[key] = k
	}
	if allowed {
		ty.accepted++
		if untracked {
			ty.untracked++
		}
		k.at = append(k.at, t)
		return
	}
	ty.rejected++
	for k.lo < len(k.at) && k.at[k.lo] <= t-ty.window {
		k.lo++
	}
	if int64(len(k.at)-k.lo) < ty.limit {
		ty.falseRejections++
	}
}

// busiest returns the most accepted requests of one key in any half-open
// interval [a, a+window), and that key (the smallest on a tie; "" if none).
func (ty *tally) busiest() (n int, key string) {
	for _, k := range slices.Sorted(maps.Keys(ty.keys)) {
		if m := maxInWindow(ty.keys[k].at, ty.window); m > n {
			n, key = m, k
		}
	}
	return n, key
}
