package counter

import "time"

// sweepEvery is how often, at most, a full shard triggers an inline sweep
// for expired keys before it turns a new key away.
const sweepEvery = int64(time.Second / time.Millisecond)

// admit reports whether the shard may track one more key at now. At the cap
// it first sweeps expired keys, at most once per sweepEvery.
func (s *shard) admit(now int64) bool {
	if s.keys < s.cap {
		return true
	}
	if now-s.lastSweep >= sweepEvery {
		s.lastSweep = now
		s.sweep(now)
	}
	return s.keys < s.cap
}

// sweep drops every key whose window is empty at now.
func (s *shard) sweep(now int64) int {
	removed := 0
	s.coord.sweep(now)
	s.leases.sweep(now)
	for slot := range s.tables {
		t := &s.tables[slot]
		for k, st := range t.m {
			if st.expire(now, t.windowMs) {
				if len(st.slices) == 0 {
					delete(t.m, k)
					s.keys--
					removed++
					continue
				}
				t.m[k] = st
			}
		}
		// Go maps never shrink; after a flood of unique keys, rebuild the
		// map so its memory goes back to the runtime.
		if t.peak >= 4096 && len(t.m) < t.peak/4 {
			m := make(map[string]state, len(t.m))
			for k, st := range t.m {
				m[k] = st
			}
			t.m, t.peak = m, len(m)
		}
	}
	return removed
}

// Sweep drops every tracked key whose window is empty at t, shard by shard
// (one lock at a time), and returns how many it dropped. Keys are also
// dropped when a check finds their window empty; Sweep reclaims keys that
// are never checked again. The daemon calls it periodically.
func (c *Counter) Sweep(t time.Time) int {
	now := t.UnixMilli()
	removed := 0
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		removed += s.sweep(now)
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
