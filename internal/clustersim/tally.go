package clustersim

import (
	"maps"
	"slices"

	"github.com/limiterd/limiterd/internal/oracle"
	"github.com/limiterd/limiterd/limiter"
)

// Tally accounts for decisions against the truth: every key's accepted
// instants on the true clock. It finds false rejections (NFR2) as they
// happen and the busiest window-long interval (NFR1) at the end. It is
// not safe for concurrent use.
type Tally struct {
	window, limit int64
	keys          map[string]*oracle.Log[int64]

	Requests, Accepted, Rejected, Untracked int
	// FalseRejections counts rejections of a request that fitted: fewer
	// than limit requests of its key were accepted in the window before it,
	// (t-window, t], so a limiter that never over-counts must accept it
	// (limit - hits + 1 for a request of several hits).
	FalseRejections int
	// FalseFallback counts the false rejections among them that the budget
	// decided, as a fallback when no answer came in time: the budget is
	// not exact, the other decisions are.
	FalseFallback int
	// FalseOrphaned counts the false rejections decided exactly (not by
	// the fallback) that a grant without an answer explains (see
	// Cluster.OrphanHits): with those hits counted, the window had no
	// room. They are among FalseRejections too.
	FalseOrphaned int
}

// NewTally returns an empty tally for a limit of limit per window ms.
func NewTally(window, limit int64) *Tally {
	return &Tally{window: window, limit: limit, keys: make(map[string]*oracle.Log[int64])}
}

// Record adds one decision for key at true time t (non-decreasing from call
// to call). Untracked requests are allowed and counted as accepted.
func (ty *Tally) Record(t int64, key string, allowed, untracked bool) {
	ty.RecordHits(t, key, 1, allowed, untracked, false, 0)
}

// RecordDecision records d, a decision of hits hits of key at true time
// t, telling the fallback's from the exact ones.
func (ty *Tally) RecordDecision(t int64, key string, hits int64, d *limiter.Decision) {
	ty.RecordHits(t, key, hits, d.Allowed, d.Untracked, d.Decided == limiter.DecidedInFallback, 0)
}

// RecordHits is Record of a request of hits hits (each an accepted
// instant when allowed); fallback marks a decision of the budget, and
// orphaned is the hits that grants without an answer counted then.
func (ty *Tally) RecordHits(t int64, key string, hits int64, allowed, untracked, fallback bool, orphaned int64) {
	ty.Requests++
	k := ty.keys[key]
	if k == nil {
		k = &oracle.Log[int64]{}
		ty.keys[key] = k
	}
	if allowed {
		ty.Accepted++
		if untracked {
			ty.Untracked++
		}
		k.Admit(t, hits)
		return
	}
	ty.Rejected++
	if k.Fits(t, hits, ty.window, ty.limit) {
		ty.FalseRejections++
		if fallback {
			ty.FalseFallback++
		}
		if !fallback && !k.Fits(t, hits+orphaned, ty.window, ty.limit) {
			ty.FalseOrphaned++
		}
	}
}

// Keys is how many distinct keys were recorded.
func (ty *Tally) Keys() int { return len(ty.keys) }

// Busiest returns the most accepted requests of one key in any half-open
// interval [a, a+window), and that key (the smallest on a tie; "" if none).
func (ty *Tally) Busiest() (n int, key string) {
	for _, k := range slices.Sorted(maps.Keys(ty.keys)) {
		if m, _ := oracle.MaxInWindow(ty.keys[k].At, ty.keys[k].Hits, ty.window); int(m) > n {
			n, key = int(m), k
		}
	}
	return n, key
}

// MaxInWindow returns the most entries of at (instants in ms,
// non-decreasing) in any half-open interval [a, a+window): the oracle's.
func MaxInWindow(at []int64, window int64) int {
	n, _ := oracle.MaxInWindow(at, nil, window)
	return int(n)
}
