package counter

import "time"

// sweepEvery is how often, at most, a full shard triggers an inline sweep
// for expired keys before it turns a new key away.
const sweepEvery = int64(time.Second / time.Millisecond)

// admit reports whether the shard may track one more key of table t at
// now. At the cap it first sweeps expired keys, at most once per
// sweepEvery. The sweep rewrites blocks: no other state of the shard may
// be in use (Allow sweeps before its stores, sweepFor). lag is the
// counter's clock lead (SetClockLead), in ms.
func (s *shard) admit(now, lag int64, t *table) bool {
	if s.room(t) {
		return true
	}
	if t.full() {
		return false
	}
	if now-s.lastSweep >= sweepEvery {
		s.lastSweep = now
		s.sweep(now, lag)
	}
	return s.room(t)
}

// room reports whether the shard may track one more key of table t.
func (s *shard) room(t *table) bool { return s.keys < s.cap && !t.full() }

// sweepFor is admit's sweep for a check whose new keys (the limits not
// found) may not all fit: it sweeps, at most once per sweepEvery, before
// the check stores anything, and reports whether it did. The check then
// reads its states again (reread) and admits its new keys by room.
func (s *shard) sweepFor(now, lag int64, found []bool) bool {
	n := 0
	for _, f := range found {
		if !f {
			n++
		}
	}
	if n == 0 || s.keys+n <= s.cap || now-s.lastSweep < sweepEvery {
		return false
	}
	s.lastSweep = now
	s.sweep(now, lag)
	return true
}

// reread reads st again after a sweep, as Allow's first loop left it:
// expired at at, with the interval bookkeeping it had rolled. It reports
// whether the key is still tracked (the sweep drops a key whose window
// emptied; it is then a new key).
func (s *shard) reread(l Limit, tag uint32, key string, i int, private bool, st *state, at int64) bool {
	pending, prev, meta := st.pending, st.prev, st.meta
	ok := s.tables[l.slot].get(tag, key, s.buf(i), private, st)
	if ok {
		st.expire(at, l.windowMs)
	}
	st.pending, st.prev, st.meta = pending, prev, meta
	return ok
}

// sweep drops every key whose window is empty at now, the window judged
// lag ms earlier (SetClockLead); grants and resets expire at now.
func (s *shard) sweep(now, lag int64) int {
	removed := 0
	s.coord.sweep(now)
	s.coord.sweepResets(now)
	buf := s.buf(0)
	for slot := range s.tables {
		t := &s.tables[slot]
		t.scan(func(i int) bool {
			e := t.idx[i]
			var st state
			t.slab.load(uint32(e), buf, false, &st)
			if !st.expire(now-lag, t.windowMs) {
				return false
			}
			if st.sl.n > 0 {
				t.idx[i] = entry(uint32(e>>32), t.slab.restore(uint32(e), &st))
				return false
			}
			t.removeAt(i)
			t.slab.release(uint32(e))
			t.n--
			s.keys--
			removed++
			return true
		})
		// Neither the index nor the slab shrinks by itself; after a flood
		// of unique keys, rebuild them so their memory goes back to the
		// runtime.
		t.compact()
	}
	return removed
}

// Sweep drops every tracked key whose window is empty at t, shard by shard
// (one lock at a time), and returns how many it dropped. Keys are also
// dropped when a check finds their window empty; Sweep reclaims keys that
// are never checked again. The daemon calls it periodically.
func (c *Counter) Sweep(t time.Time) int {
	now, lag := t.UnixMilli(), c.lagMs()
	removed := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		removed += s.sweep(now, lag)
		s.mu.Unlock()
	}
	return removed
}

// Stats is a snapshot of a Counter's size.
type Stats struct {
	// Keys is the number of (limit, key) pairs tracked.
	Keys int
	// Untracked counts the checks allowed uncounted because the counter was
	// at MaxKeys, since the Counter was made.
	Untracked uint64
}

// Stats returns the current size; it takes every shard's lock in turn.
func (c *Counter) Stats() Stats {
	st := Stats{Untracked: c.untracked.Load()}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		st.Keys += s.keys
		s.mu.Unlock()
	}
	return st
}
