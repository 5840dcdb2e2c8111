package counter

import (
	"strings"
	"time"
)

// hotSet is a shard's set of the keys this node counts itself that
// reached HotShare of a limit: the candidates for anti-entropy, which
// re-sends this node's own slices. Without it every anti-entropy round
// scanned every key of every shard (16 ms for 200,000 keys with none hot,
// every second, on every node). Entries are dropped by AppendHot once
// their key falls below the share or is gone, so the set stays as small as
// the hot keys. Each entry keeps the smallest max it was marked with: a
// family's limits state their max per call (Family), and their
// registration's, MaxLimit, would never find them hot. Guarded by the
// shard's mutex.
type hotSet map[dirtyRef]int64

// mark adds (slot, key) to the set, found hot for a limit of max. It
// keeps a copy of key, made only when the key is new to the set: the
// caller's may alias a buffer it reuses (Merge's entries).
func (h *hotSet) mark(slot uint16, key string, max int64) {
	if m, ok := (*h)[dirtyRef{slot: slot, key: key}]; ok {
		if max < m {
			// An assignment stores its key anew (Go keeps the latest
			// key assigned): a copy, as for a new entry. Rare: a key
			// met with a smaller max than before.
			(*h)[dirtyRef{slot: slot, key: strings.Clone(key)}] = max
		}
		return
	}
	if *h == nil {
		*h = make(hotSet)
	}
	(*h)[dirtyRef{slot: slot, key: strings.Clone(key)}] = max
}

// isHot reports whether a window counting count of a limit of max is at
// least HotShare full.
func (cs *clusterState) isHot(count, max int64) bool {
	return float64(count) >= cs.HotShare*float64(max)
}

// AppendHot appends the live slices counted by origin (this node's name for
// its own) of every key whose window holds at least HotShare of its limit,
// and returns dst: for this node's own origin, what AppendState(dst, now,
// origin, HotShare) returns, at the cost of this node's hot keys rather
// than of all keys. The set it reads holds only the keys this node counts
// itself (Merge marks no key only the peers count), so for a peer's
// origin it returns that peer's slices of those keys alone. It returns
// dst unchanged in single-node mode.
func (c *Counter) AppendHot(dst []Entry, now time.Time, origin string) []Entry {
	return c.AppendHotChanged(dst, now, origin, 0)
}

// AppendHotChanged is AppendHot of the slices that may have changed within
// recent of now: those that started within recent plus the limit's slice
// length (a slice grows only while younger than its slice length, Model)
// and that are their origin's newest or were followed by its next within
// recent (an origin counts only in its newest slice: window.go's add), so
// every slice is in each call within recent of its last change. A key
// past its limit keeps a slice for every few admissions, hundreds in its
// window, of which only the newest changes: anti-entropy that re-sends
// them all at every round costs its peers a merge of each (the engine
// re-sends them all every few rounds instead). It reads a key's slices
// from the newest back, as far as the first that cannot have changed.
// recent 0: every live slice.
func (c *Counter) AppendHotChanged(dst []Entry, now time.Time, origin string, recent time.Duration) []Entry {
	cs := c.cluster.Load()
	if cs == nil {
		return dst
	}
	nowMs := now.UnixMilli()
	ids, maxes, names := c.snapshotNames()
	var sliceMs []int64
	if recent > 0 {
		c.regMu.Lock()
		sliceMs = make([]int64, len(c.infos))
		for i, in := range c.infos {
			sliceMs[i] = in.sliceMs
		}
		c.regMu.Unlock()
	}
	o := originIndex(names, origin)
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for ref, hotMax := range s.hot {
			if int(ref.slot) >= len(ids) || int(ref.slot) >= len(s.tables) {
				delete(s.hot, ref)
				continue
			}
			t := &s.tables[ref.slot]
			var st state
			if !t.get(c.tagOf(ref.key), ref.key, s.buf(0), false, &st) {
				delete(s.hot, ref)
				continue
			}
			if !cs.isHot(st.liveCount(nowMs, t.windowMs), min(hotMax, maxes[ref.slot])) {
				delete(s.hot, ref)
				continue
			}
			after := nowMs - t.windowMs
			if recent > 0 && int(ref.slot) < len(sliceMs) {
				after = max(after, nowMs-sliceMs[ref.slot]-recent.Milliseconds())
				dst = st.appendOriginChanged(dst, ids[ref.slot], ref.key, origin, o, after, nowMs-recent.Milliseconds())
				continue
			}
			dst = st.appendOrigin(dst, ids[ref.slot], ref.key, origin, o, after)
		}
		s.mu.Unlock()
	}
	return dst
}
