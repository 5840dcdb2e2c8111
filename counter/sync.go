package counter

import (
	"cmp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Entry is one slice of one key as its origin node counted it. Counts are
// absolute, not increments: Merge keeps the largest count it has seen for
// (Limit, Key, Origin, Start), so entries may be lost, duplicated, reordered
// or re-sent without ever over-counting.
//
// Merge does not retain the strings of entries; it copies what it keeps (a
// new key's bytes into its table, a key new to the hot set or the restored
// list, a new origin's name). A decoder may hand Merge strings over a
// buffer that it overwrites once Merge returns. The entries that the
// counter returns (AppendChanges, AppendState, AppendHot) are the
// counter's own strings and stay valid.
type Entry struct {
	// Limit is the limit's identity, "name|window_ms|slices" (LimitID).
	Limit string
	Key   string
	// Origin names the node that counted the requests.
	Origin string
	// Start is the slice's start, unix ms on the origin's clock.
	Start int64
	Count uint32
}

// LimitID returns the identity a limit registered as (name, window, slices)
// has in Entry.Limit.
func LimitID(name string, window time.Duration, slices int) string {
	return name + "|" + strconv.FormatInt(window.Milliseconds(), 10) + "|" + strconv.Itoa(slices)
}

// ID returns l's identity, as in Entry.Limit.
func (l Limit) ID() string { return LimitID(l.name, l.Window(), l.Slices()) }

// MergeStats counts what one Merge call did with its entries.
type MergeStats struct {
	Merged    int // raised a count or added a slice
	Unchanged int // known already with a count at least as large
	Expired   int // slice already out of the window (or more than a window ahead)
	Unknown   int // limit not registered on this node
	NoRoom    int // new key while the counter is at MaxKeys
	// Refused: a new slice of an origin that already has as many slices of
	// the key as a window can hold (more than it could have counted): a
	// forged entry, dropped so that no message makes a key's slices grow
	// without bound.
	Refused int
	Erased  int // a slice that started before a reset of its key in force (Counter.ApplyReset)
}

func (c *Counter) lookupLimit(id string) (uint16, limitInfo, bool) {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	slot, ok := c.slots[id]
	if !ok {
		return 0, limitInfo{}, false
	}
	return slot, c.infos[slot], true
}

// originOf returns the origin number of a node name, numbering new names.
func (c *Counter) originOf(name string) uint16 {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if name == c.names[0] {
		return 0
	}
	if o, ok := c.origins[name]; ok {
		return o
	}
	if len(c.names) > 1<<16-1 {
		return uint16(len(c.names) - 1) // share the last number rather than fail; max merges stay safe
	}
	o := uint16(len(c.names))
	c.origins[strings.Clone(name)] = o
	c.names = append(c.names, strings.Clone(name))
	return o
}

// snapshotNames returns the registry's limit ids and origin names.
func (c *Counter) snapshotNames() (ids []string, maxes []int64, names []string) {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	ids = make([]string, len(c.infos))
	maxes = make([]int64, len(c.infos))
	for i, in := range c.infos {
		ids[i], maxes[i] = in.id, in.max
	}
	return ids, maxes, append([]string(nil), c.names...)
}

// AppendChanges appends to dst the local slices that changed since the
// previous call (each tick of the sync loop) and returns it. Each call
// starts a new sync interval for the budget. It returns dst unchanged in single-node mode.
func (c *Counter) AppendChanges(dst []Entry, now time.Time) []Entry {
	if c.cluster.Load() == nil {
		return dst
	}
	nowMs := now.UnixMilli()
	c.tickAt.Store(nowMs)
	tick := c.tickNo.Add(1)
	ids, _, names := c.snapshotNames()
	// Slices this node still counts (SetClockLead) are still sent.
	horizon := nowMs - c.lagMs()
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		// The dirty keys' slots and blocks are read first, all at once,
		// so that their cache misses overlap (as Merge's do), and so is
		// each key's own string, which the lookup compares with the
		// block's: the caller's bytes or a copy made at the check, a
		// tick ago, rarely still in cache.
		var x uint64
		for _, ref := range s.dirty {
			x += s.tables[ref.slot].touchSlot(ref.tag)
			if len(ref.key) > 0 {
				x += uint64(ref.key[0])
			}
		}
		for _, ref := range s.dirty {
			x += s.tables[ref.slot].touchBlock(ref.tag)
		}
		runtime.KeepAlive(x)
		for _, ref := range s.dirty {
			t := &s.tables[ref.slot]
			tag := ref.tag
			var st state
			ok := t.get(tag, ref.key, s.buf(0), false, &st)
			if !ok || !st.is(flagDirty) {
				continue
			}
			resend := st.sentSliceGrew(tick)
			newest := uint32(0)
			for j := range st.sl.n {
				sl := st.sl.at(j)
				if sl.origin != 0 || sl.off < st.sentOff {
					continue
				}
				if sl.off == st.sentOff && !resend {
					newest = sl.off // unchanged since sent: peers have it
					continue
				}
				if start := st.base + int64(sl.off); start > horizon-t.windowMs {
					dst = append(dst, Entry{Limit: ids[ref.slot], Key: ref.key, Origin: names[0], Start: start, Count: sl.n})
				}
				newest = sl.off
			}
			st.sentOff = newest
			st.set(flagDirty, false)
			s.store(ref.slot, tag, ref.key, &st)
		}
		clear(s.dirty)
		s.dirty = s.dirty[:0]
		if len(s.restored) > 1 {
			// A key restored by several messages is listed once each.
			slices.SortFunc(s.restored, func(a, b dirtyRef) int { return cmp.Or(cmp.Compare(a.slot, b.slot), strings.Compare(a.key, b.key)) })
			s.restored = slices.Compact(s.restored)
		}
		for _, ref := range s.restored {
			t := &s.tables[ref.slot]
			var st state
			if !t.get(c.tagOf(ref.key), ref.key, s.buf(0), false, &st) {
				continue
			}
			for j := range st.sl.n {
				sl := st.sl.at(j)
				// Restored slices lie before sentOff; from sentOff on, the
				// dirty list above sends what changed.
				if start := st.start(j); sl.origin == 0 && sl.off < st.sentOff && start > horizon-t.windowMs {
					dst = append(dst, Entry{Limit: ids[ref.slot], Key: ref.key, Origin: names[0], Start: start, Count: sl.n})
				}
			}
		}
		clear(s.restored)
		s.restored = s.restored[:0]
		s.mu.Unlock()
	}
	return dst
}

// sentSliceGrew reports whether the local slice sent last (at sentOff) may
// have counted requests since the AppendChanges that sent it, the one
// before tick. If not, only the slices opened since need sending:
// re-sending an unchanged slice costs every peer a decode and a merge, and
// slices close often (each node's tail share is small), so it was 40 % of
// the entries sent at 8 nodes.
//
// Every local slice after sentOff was opened since that AppendChanges, so
// the slice at sentOff grew iff the hits since then exceed the counts of
// those newer slices. The hits since then are at most pending + prev when
// the state was last rolled in this interval (tick), or pending when in the
// previous one: an Allow that ran after the previous AppendChanges passed
// this shard read tickNo at least tick−1, and roll keeps prev only when it
// is the interval right before. The estimate can only be too large, so an
// unchanged slice may be re-sent, never a grown one skipped.
func (s *state) sentSliceGrew(tick uint32) bool {
	var since uint64
	switch s.meta & tickMask {
	case uint16(tick & tickMask):
		since = uint64(s.pending) + uint64(s.prev)
	case uint16((tick - 1) & tickMask):
		since = uint64(s.pending)
	default:
		return true // not rolled recently: no estimate, send as before
	}
	var opened uint64
	for j := range s.sl.n {
		if s.sl.origin(j) == 0 && s.sl.off(j) > s.sentOff {
			opened += uint64(s.sl.count(j))
		}
	}
	return since > opened
}

// AppendState appends every live slice counted by origin (this node's name
// for its own) and returns dst. With minShare > 0 only keys whose window
// holds at least minShare x their limit are included: the keys where a
// lost message could change a decision. Used for anti-entropy and to give a
// restarted peer back what it had counted.
func (c *Counter) AppendState(dst []Entry, now time.Time, origin string, minShare float64) []Entry {
	nowMs := now.UnixMilli()
	ids, maxes, names := c.snapshotNames()
	o := originIndex(names, origin)
	if o < 0 {
		return dst
	}
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		for slot := range s.tables {
			t := &s.tables[slot]
			if slot >= len(ids) {
				continue
			}
			t.scan(func(i int) bool {
				ref := uint32(t.idx[i])
				var st state
				t.slab.load(ref, s.buf(0), false, &st)
				if minShare > 0 && float64(st.liveCount(nowMs, t.windowMs)) < minShare*float64(maxes[slot]) {
					return false
				}
				if st.hasOrigin(o, nowMs, t.windowMs) {
					// The table holds the key's bytes, not a string: a
					// copy per key sent (AppendState serves a peer's
					// (re)join, not every tick).
					k, _ := t.slab.key(ref)
					dst = st.appendOrigin(dst, ids[slot], string(k), origin, o, nowMs-t.windowMs)
				}
				return false
			})
		}
		s.mu.Unlock()
	}
	return dst
}

// originIndex returns origin's number in names, or -1.
func originIndex(names []string, origin string) int {
	for i, n := range names {
		if n == origin {
			return i
		}
	}
	return -1
}

// liveCount returns the requests in the slices that start inside the
// window ending at nowMs (expire need not have run).
func (s *state) liveCount(nowMs, windowMs int64) int64 {
	var n int64
	for j := range s.sl.n {
		if s.start(j) > nowMs-windowMs {
			n += int64(s.sl.count(j))
		}
	}
	return n
}

// hasOrigin reports whether origin number o has a live slice here.
func (s *state) hasOrigin(o int, nowMs, windowMs int64) bool {
	for j := range s.sl.n {
		if int(s.sl.origin(j)) == o && s.start(j) > nowMs-windowMs {
			return true
		}
	}
	return false
}

// appendOrigin appends the slices of origin number o that start after
// after (now less the window: the live ones) as entries of (limitID, key).
func (s *state) appendOrigin(dst []Entry, limitID, key, origin string, o int, after int64) []Entry {
	for j := range s.sl.n {
		if int(s.sl.origin(j)) == o && s.start(j) > after {
			dst = append(dst, Entry{Limit: limitID, Key: key, Origin: origin, Start: s.start(j), Count: s.sl.count(j)})
		}
	}
	return dst
}

// appendOriginChanged is appendOrigin of the slices that may have changed
// at or after since (newestBack): it reads from the newest slice back and
// stops at the first of origin o that is too old either way; what it
// appends is in start order, as appendOrigin's.
func (s *state) appendOriginChanged(dst []Entry, limitID, key, origin string, o int, after, since int64) []Entry {
	mark := len(dst)
	for j, changed := range s.newestBack(o, since) {
		start := s.start(j)
		if start <= after || !changed {
			break
		}
		dst = append(dst, Entry{Limit: limitID, Key: key, Origin: origin, Start: start, Count: s.sl.count(j)})
	}
	slices.Reverse(dst[mark:])
	return dst
}

// Self returns this node's name in cluster mode, "" otherwise.
func (c *Counter) Self() string {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	return c.names[0]
}
