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
	c.tickNo.Add(1)
	ids, _, names := c.snapshotNames()
	// Slices this node still counts (SetClockLead) are still sent.
	horizon := nowMs - c.lagMs()
	for i := range c.shards {
		s := &c.shards[i]
		s.mu.Lock()
		// Each change is the slice as its last check left it: nothing of
		// the table is read (recordChange). A key's changes go together,
		// in the order their slices opened (a change that follows
		// another of its key is sent after it, through next), as they
		// did when they were collected key by key: so they encode
		// shortest (the codec sends what a key shares with the one
		// before once).
		//
		// The keys' bytes, made by the checks a tick ago and rarely still
		// in cache, are read first, all at once, so that their misses
		// overlap rather than stall the encoder one key at a time.
		var x uint64
		for _, ch := range s.dirty {
			if len(ch.key) > 0 {
				x += uint64(ch.key[0]) + uint64(ch.key[len(ch.key)-1])
			}
		}
		runtime.KeepAlive(x)
		for _, ch := range s.dirty {
			if ch.follows {
				continue // sent after the change before it
			}
			for {
				if ch.start > horizon-s.tables[ch.slot].windowMs {
					dst = append(dst, Entry{Limit: ids[ch.slot], Key: ch.key, Origin: names[0], Start: ch.start, Count: ch.count})
				}
				if ch.next == 0 {
					break
				}
				ch = s.dirty[ch.next-1]
			}
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
				// Restored slices lie before restoredEnd; the changes
				// above are what checks counted since.
				if start := st.start(j); sl.origin == 0 && sl.off < st.restoredEnd && start > horizon-t.windowMs {
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

// recordChange notes, once a check has counted hits in st (of the limit
// in slot), the slice that took them, its newest local one, as a change
// for the next AppendChanges: in place when st's last recorded change is
// that slice's and still in the list, else as a new change. Its count is
// then the slice's: what the next AppendChanges sends is what the block
// holds, though it reads no block. clone keeps a copy of key (an ask's,
// whose bytes the caller may reuse); otherwise the list keeps key itself.
// tick is the Counter's tickNo: a change recorded in an earlier interval
// is gone from the list, and st.changed says so without the list being
// read (changeRef).
func (s *shard) recordChange(slot uint16, key string, clone bool, tick uint32, st *state) {
	j := st.newestLocal()
	start, count := st.start(j), st.sl.count(j)
	follows := false
	if i, ok := changeAt(st.changed, tick); ok && i < len(s.dirty) {
		if ch := &s.dirty[i]; ch.slot == slot && ch.key == key {
			if ch.start == start {
				ch.count = max(ch.count, count)
				return
			}
			// A slice opened since: its change is sent right after this
			// one (AppendChanges), so the key's changes go together.
			ch.next = uint32(len(s.dirty)) + 1
			follows = true
		}
	}
	if clone {
		key = strings.Clone(key)
	}
	s.dirty = append(s.dirty, change{dirtyRef{slot: slot, key: key}, start, count, 0, follows})
	st.changed = changeRef(len(s.dirty)-1, tick)
}

// A state's changed field names its key's last change in the shard's
// dirty list and the sync interval it was recorded in: 1 + the index in
// the low changeIndexBits, the interval's tick number's low bits above.
// Without the tick a check of a key last changed in an earlier interval
// read the list at a stale index, another key's change, and compared
// that key: a cache miss, most checks at 100,000 keys. The tick's bits
// wrap every 4,096 intervals (13 minutes at 200 ms), so a match is still
// confirmed by the key.
const (
	changeIndexBits = 20
	changeIndexMask = 1<<changeIndexBits - 1
)

// changeRef is the changed field of a state whose last change is at index
// i of the list of interval tick: 0 (none) past the index's bits, where a
// key's next change is then a new one.
func changeRef(i int, tick uint32) uint32 {
	if i+1 > changeIndexMask {
		return 0
	}
	return tick<<changeIndexBits | uint32(i+1)
}

// changeAt is the index a changed field names if it was recorded in
// interval tick.
func changeAt(ref, tick uint32) (int, bool) {
	i := int(ref&changeIndexMask) - 1
	return i, i >= 0 && ref>>changeIndexBits == tick&(1<<(32-changeIndexBits)-1)
}
