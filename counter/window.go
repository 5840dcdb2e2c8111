package counter

import (
	"cmp"
	"iter"
	"math"
)

// slice is one slice of one key's window: the requests an origin accepted
// from its start instant until the next slice of that origin began.
type slice struct {
	off    uint32 // start, in ms after the owning state's base
	n      uint32 // requests counted in the slice, including those at its start instant
	origin uint16 // 0 is this node; peers are numbered by the cluster layer
}

// state is the window of one (limit, key) pair. Slices are kept in order of
// start. Only the newest slice of the local origin is open for new requests.
//
// A state is its table's block as a call sees it (table.get): the fields
// are copies, written back by table.put; the slices are read and changed
// where the table keeps them, packed (packed.go), because the slices are
// most of what a tracked client costs.
type state struct {
	base        int64  // unix ms that slice offsets are relative to
	restoredEnd uint32 // local slices before this offset were restored from a peer (Merge)
	changed     uint32 // where the change of a local slice was last recorded in the shard's dirty list, and in which interval (changeRef)
	pending     uint32 // local hits in the current sync interval (cluster mode)
	prev        uint32 // local hits in the previous sync interval (cluster mode)
	head        uint16 // requests at the first instant of the newest local slice, saturating
	meta        uint16 // tickBits: the interval pending belongs to; flagClosed
	sl          packed // ordered by start, then origin
}

const (
	tickBits   = 14
	tickMask   = 1<<tickBits - 1
	flagClosed = 1 << 15 // the newest local slice takes no more requests (restored from a peer)
)

func (s *state) is(flag uint16) bool { return s.meta&flag != 0 }

func (s *state) set(flag uint16, on bool) {
	if on {
		s.meta |= flag
	} else {
		s.meta &^= flag
	}
}

// addHead adds hits to head, saturating. A saturated head makes the tail
// (n - head) look larger than it is, which only closes the slice sooner.
func (s *state) addHead(hits uint32) {
	s.head = uint16(min(uint32(s.head)+hits, math.MaxUint16))
}

// rebaseAt is the offset past which expire moves the base forward, keeping
// every offset far from uint32 overflow (live slices span under MaxWindow).
const rebaseAt = 1 << 31

func (s *state) start(i int) int64 { return s.base + int64(s.sl.off(i)) }

// expire drops every slice whose start is at or before now-window: such a
// slice may hold requests older than the window, so counting it could
// over-count (NFR2). It reports whether anything was dropped.
func (s *state) expire(now, windowMs int64) bool {
	cut := now - windowMs
	i := 0
	for i < s.sl.n && s.start(i) <= cut {
		i++
	}
	if i == 0 {
		return false
	}
	s.sl.dropFront(i)
	if s.sl.n > 0 && s.sl.off(0) >= rebaseAt {
		d := s.sl.off(0)
		s.sl.shift(-d)
		s.restoredEnd -= min(s.restoredEnd, d)
		s.base += int64(d)
	}
	return true
}

// offsetOf returns start as an offset from the base, first moving the base
// back to start if start is earlier (a peer's slice, or an empty state).
func (s *state) offsetOf(start int64) uint32 {
	switch {
	case s.sl.n == 0:
		s.base, s.restoredEnd = start, 0
		if !s.sl.wide {
			s.sl.off0 = 0
		}
	case start < s.base:
		d := uint32(s.base - start)
		s.sl.shift(d)
		s.restoredEnd += d
		s.base = start
	}
	return uint32(start - s.base)
}

// roll moves pending to prev when a sync interval has begun since the
// last local request, so pending counts this interval and prev the one
// before (zero if that was not the last).
func (s *state) roll(tickNo uint32) {
	tick := uint16(tickNo & tickMask)
	cur := s.meta & tickMask
	if cur == tick {
		return
	}
	if cur == (tick-1)&tickMask {
		s.prev = s.pending
	} else {
		s.prev = 0
	}
	s.pending = 0
	s.meta = s.meta&^tickMask | tick
}

// hasSync reports whether any of the sync fields is set: the key was
// counted here (a local request sets pending and, in cluster mode,
// changed, which only a dirty list past changeIndexMask in one interval
// leaves 0) or holds slices of this node restored from a peer. A key only
// the peers count has none: its block leaves them out (slab.go), and
// anti-entropy has nothing of this node's to re-send for it (Merge).
func (s *state) hasSync() bool {
	return s.restoredEnd != 0 || s.pending != 0 || s.prev != 0 || s.changed != 0
}

// count returns the requests counted in the window (call expire first).
func (s *state) count() int64 { return s.sl.sum() }

// newestLocal returns the index of the newest local slice, or -1.
func (s *state) newestLocal() int {
	for i := s.sl.n - 1; i >= 0; i-- {
		if s.sl.origin(i) == 0 {
			return i
		}
	}
	return -1
}

// newestBack yields origin o's slices from the newest back, each with
// whether it may have changed at or after since: an origin counts only in
// its newest slice (add), so one its next followed before since has not
// changed since, and neither has any before it.
func (s *state) newestBack(o int, since int64) iter.Seq2[int, bool] {
	return func(yield func(int, bool) bool) {
		next := int64(math.MaxInt64) // the start of o's slice after j: none yet
		for j := s.sl.n - 1; j >= 0; j-- {
			if int(s.sl.origin(j)) != o {
				continue
			}
			if !yield(j, next >= since) {
				return
			}
			next = s.start(j)
		}
	}
}

// clamp returns now, or the start of the newest local slice if that is
// later. Calls for one key may arrive slightly out of order (goroutines read
// the clock before taking the lock); treating a late call as made at the
// newest start keeps each key's local timeline monotone, which the proof in
// doc.go relies on.
func (s *state) clamp(now int64) int64 {
	if i := s.newestLocal(); i >= 0 {
		if st := s.start(i); st > now {
			return st
		}
	}
	return now
}

// add counts hits accepted at now. The open local slice takes them if it is
// younger than a slice and, unless now is its start instant, its tail (the
// requests after its start instant) stays within maxTail. Otherwise a new
// slice starts at now.
func (s *state) add(now int64, hits uint32, sliceMs int64, maxTail int64) {
	if i := s.newestLocal(); i >= 0 && !s.is(flagClosed) {
		n := s.sl.count(i)
		st := s.start(i)
		switch {
		case now == st && uint64(n)+uint64(hits) <= math.MaxUint32:
			s.sl.setCount(i, n+hits)
			s.addHead(hits)
			return
		case now-st < sliceMs && int64(n)-int64(s.head)+int64(hits) <= maxTail:
			s.sl.setCount(i, n+hits)
			return
		}
	}
	s.insert(slice{off: s.offsetOf(now), n: hits})
	s.head = 0
	s.addHead(hits)
	s.set(flagClosed, false)
}

// insert puts sl in start order. A peer's slice may start after this node's
// newest one (clocks differ, messages arrive late), so it is not always last.
func (s *state) insert(sl slice) {
	i := s.sl.n
	for i > 0 && (s.sl.off(i-1) > sl.off || s.sl.off(i-1) == sl.off && s.sl.origin(i-1) > sl.origin) {
		i--
	}
	s.sl.insert(i, sl)
}

// merge records that origin counted n requests in its slice starting at
// start, keeping the larger count if the slice is known: counts are
// absolute, so a duplicate, late or re-sent message never adds twice.
// It reports whether anything changed, and refused when the slice is new
// but origin already has perOrigin slices here: more than its window can
// hold (limitInfo.perOrigin), so the entry is forged, and a forged message
// cannot make the key's slice list, and every later scan of it, grow.
// Slices are kept in (start, origin) order, so the lookup is a binary
// search, not a scan of every origin's slices. full says the caller knows
// origin to be at perOrigin already (it was refused a moment ago), which
// spares the count.
func (s *state) merge(origin uint16, start int64, n uint32, perOrigin int, full bool) (changed, refused bool) {
	off := s.offsetOf(start)
	i := s.search(start, origin)
	if i < s.sl.n && s.sl.off(i) == off && s.sl.origin(i) == origin {
		if n > s.sl.count(i) {
			s.sl.setCount(i, n)
			return true, false
		}
		return false, false
	}
	if full || s.sl.n >= perOrigin && s.countOrigin(origin) >= perOrigin {
		return false, true
	}
	s.sl.insert(i, slice{off: off, n: n, origin: origin})
	return true, false
}

// search returns the index of the first slice at or after (start,
// origin) in the slices' order (start, then origin), s.sl.n if none.
func (s *state) search(start int64, origin uint16) int {
	i, j := 0, s.sl.n
	for i < j {
		m := int(uint(i+j) >> 1)
		if cmp.Or(cmp.Compare(s.start(m), start), cmp.Compare(s.sl.origin(m), origin)) < 0 {
			i = m + 1
		} else {
			j = m
		}
	}
	return i
}

// countOrigin returns how many slices origin has here.
func (s *state) countOrigin(origin uint16) int {
	k := 0
	for i := range s.sl.n {
		if s.sl.origin(i) == origin {
			k++
		}
	}
	return k
}

// retryAfter returns the shortest wait, in ms, after which count-dropped+hits
// fits max with no new arrivals: the moment enough of the oldest slices have
// left the window. It requires hits <= max.
func (s *state) retryAfter(now, windowMs, count, hits, max int64) int64 {
	for i := range s.sl.n {
		count -= int64(s.sl.count(i))
		if count+hits <= max {
			return s.start(i) + windowMs - now
		}
	}
	return 0 // unreachable when hits <= max
}

// reset returns the time, in ms, until every counted slice has left the window.
func (s *state) reset(now, windowMs int64) int64 {
	if s.sl.n == 0 {
		return 0
	}
	return s.start(s.sl.n-1) + windowMs - now
}
