package main

import (
	"maps"
	"slices"

	"github.com/limiterd/limiterd/internal/oracle"
	"github.com/limiterd/limiterd/limiter"
)

// tally accounts for decisions against the truth: every key's accepted
// instants on the true clock. It finds false rejections (NFR2) as they
// happen and the busiest window-long interval (NFR1) at the end.
type tally struct {
	window, limit int64
	keys          map[string]*oracle.Log[int64]

	requests, accepted, rejected, untracked int
	// falseRejections counts rejections of a request that fitted: fewer
	// than limit requests of its key were accepted in the window before it,
	// (t-window, t], so a limiter that never over-counts must accept it
	// (limit - hits + 1 for a request of several hits).
	falseRejections int
	// falseFallback counts the false rejections among them that the budget
	// decided, as a fallback when no answer came in time: the budget is
	// not exact, the other decisions are.
	falseFallback int
	// falseOrphaned counts the false rejections decided exactly (not by
	// the fallback) that a grant without an answer explains (see
	// simCluster.orphans): with those hits counted, the window had no
	// room. They are among falseRejections too.
	falseOrphaned int
}

func newTally(window, limit int64) *tally {
	return &tally{window: window, limit: limit, keys: make(map[string]*oracle.Log[int64])}
}

// record adds one decision for key at true time t (non-decreasing from call
// to call). untracked requests are allowed and counted as accepted.
func (ty *tally) record(t int64, key string, allowed, untracked bool) {
	ty.recordHits(t, key, 1, allowed, untracked, false, 0)
}

// recordDecision records d, a decision of hits hits of key at true time
// t, telling the fallback's from the exact ones.
func (ty *tally) recordDecision(t int64, key string, hits int64, d *limiter.Decision) {
	ty.recordHits(t, key, hits, d.Allowed, d.Untracked, d.Decided == limiter.DecidedInFallback, 0)
}

// recordHits is record of a request of hits hits (each an accepted
// instant when allowed); fallback marks a decision of the budget, and
// orphaned is the hits that grants without an answer counted then.
func (ty *tally) recordHits(t int64, key string, hits int64, allowed, untracked, fallback bool, orphaned int64) {
	ty.requests++
	k := ty.keys[key]
	if k == nil {
		k = &oracle.Log[int64]{}
		ty.keys[key] = k
	}
	if allowed {
		ty.accepted++
		if untracked {
			ty.untracked++
		}
		k.Admit(t, hits)
		return
	}
	ty.rejected++
	if k.Fits(t, hits, ty.window, ty.limit) {
		ty.falseRejections++
		if fallback {
			ty.falseFallback++
		}
		if !fallback && !k.Fits(t, hits+orphaned, ty.window, ty.limit) {
			ty.falseOrphaned++
		}
	}
}

// busiest returns the most accepted requests of one key in any half-open
// interval [a, a+window), and that key (the smallest on a tie; "" if none).
func (ty *tally) busiest() (n int, key string) {
	for _, k := range slices.Sorted(maps.Keys(ty.keys)) {
		if m, _ := oracle.MaxInWindow(ty.keys[k].At, ty.keys[k].Hits, ty.window); int(m) > n {
			n, key = int(m), k
		}
	}
	return n, key
}
