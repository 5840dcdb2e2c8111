package counter

import (
	"fmt"
	"time"
)

// Peek reports whether hits more requests of key, arriving at now, would
// fit every limit in limits, and counts nothing: a check without admission,
// such as Envoy's hits_addend 0, or a probe before a request that may never
// be made. res must have room for len(limits) entries and is filled as
// Allow fills them for the window as it is now: Count, Remaining (what is
// left without these hits), RetryAfter (0 when the limit has room for them)
// and Reset. Decision.Allowed reports that every limit fits, count + hits <=
// max, exactly when an Allow of the same hits at the same instant would be
// allowed on a single node; Untracked and Coordinate are never set.
//
// hits may be 0 (is the window over its limit already?) up to the smallest
// limit; ErrInvalidHits otherwise, and ErrTooManyLimits for more than
// MaxLimitsPerCall limits.
//
// Peek changes nothing: it creates no state for a key that is not tracked
// (which then reports count 0, everything remaining), drops no expired
// slice, remembers nothing and marks nothing hot, so a stream of peeks at
// random keys costs no memory and a peek between two Allows leaves the
// second one's outcome as it was.
//
// In a cluster it decides on the window as this node knows it: its own
// slices, the slices merged from its peers and the grants it made as a
// key's coordinator that those do not show yet, and, for hits >= 1, a
// coordinator's denial it still remembers (RememberDenial). It never asks
// for coordination and ignores the blind share and the budget: those ration
// admissions between syncs, and a peek admits nothing.
func (c *Counter) Peek(now time.Time, key string, hits int64, limits []Limit, res []Result) (Decision, error) {
	if len(limits) > MaxLimitsPerCall {
		return Decision{}, fmt.Errorf("%w: %d > %d", ErrTooManyLimits, len(limits), MaxLimitsPerCall)
	}
	if len(res) < len(limits) {
		return Decision{}, fmt.Errorf("counter: results has room for %d of %d limits", len(res), len(limits))
	}
	if hits < 0 {
		return Decision{}, fmt.Errorf("%w: hits of a peek must be at least 0, got %d", ErrInvalidHits, hits)
	}
	for _, l := range limits {
		if hits > l.max {
			return Decision{}, fmt.Errorf("%w: hits %d exceed the limit %d of %q", ErrInvalidHits, hits, l.max, l.name)
		}
	}
	nowMs := now.UnixMilli()
	coordinated := c.cluster.Load().coordinated()
	d := Decision{Allowed: true}
	s, tag := c.locate(key)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, l := range limits {
		ref := dirtyRef{slot: l.slot, key: key}
		// A copy whose slice list starts at the first live slice: the
		// view Allow has after expire, without writing the expiry back.
		st, at := s.view(l, tag, key, nowMs, i)
		pending := s.coord.pendingAt(ref, &st, at, l.windowMs)
		count := st.count() + pending
		r := Result{Allowed: count+hits <= l.max, Limit: l.max, Count: count, Pending: pending, Remaining: max(l.max-count, 0)}
		r.Reset = time.Duration(st.reset(at, l.windowMs)) * time.Millisecond
		if r.Allowed && coordinated && hits > 0 {
			if until := s.coord.deniedAt(ref, at, l.max); until > 0 {
				c.denyResult(&r, &d, until-at, st.reset(at, l.windowMs))
				res[i] = r
				continue
			}
		}
		if !r.Allowed {
			r.RetryAfter = time.Duration(c.retryMs(s, ref, &st, at, l.windowMs, count, hits, l.max)) * time.Millisecond
			d.Allowed = false
			d.RetryAfter = max(d.RetryAfter, r.RetryAfter)
		}
		res[i] = r
	}
	return d, nil
}

// view returns key's state for l as Allow sees it after clamping now and
// expiring old slices, and the clamped instant, without changing the shard:
// no table is created, and the state only reads the table's slices (a
// view that starts at the first live one). An untracked key gives the
// empty state.
func (s *shard) view(l Limit, tag uint32, key string, now int64, buf int) (state, int64) {
	if int(l.slot) >= len(s.tables) {
		return state{}, now
	}
	var st state
	if !s.tables[l.slot].get(tag, key, s.buf(buf), false, &st) {
		return state{}, now
	}
	at := st.clamp(now)
	cut := at - l.windowMs
	i := 0
	for i < st.sl.n && st.start(i) <= cut {
		i++
	}
	st.sl = st.sl.from(i)
	return st, at
}

// pendingAt is invisible without its clean-up: the granted hits st does not
// show at now, leaving the grants as they are.
func (cs *coordState) pendingAt(ref dirtyRef, st *state, now, windowMs int64) int64 {
	k := cs.lookup(ref)
	if k == nil {
		return 0
	}
	var sum int64
	for _, g := range k.grantList() {
		if g.live(now, windowMs) {
			sum += max(st.grantGap(g), 0)
		}
	}
	return sum
}

// deniedAt is deniedUntil without its clean-up.
func (cs *coordState) deniedAt(ref dirtyRef, now, max int64) int64 {
	if k := cs.lookup(ref); k != nil && k.denial.until > now && max <= k.denial.max {
		return k.denial.until
	}
	return 0
}

// live reports whether g still counts at now: not expired, and its slice
// still in the window.
func (g grant) live(now, windowMs int64) bool {
	return g.expires > now && g.start > now-windowMs
}
