package counter

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// ErrTooManyResets is returned by Reset and ApplyReset when the key's shard
// already holds maxResets live resets: nothing is reset then.
var ErrTooManyResets = errors.New("counter: too many resets in force")

// maxResets bounds the live resets (tombstones) of one shard: with the
// default 64 shards, 65,536 (limit, key) pairs reset within their
// windows. A tombstone costs a map entry and the key's bytes.
const maxResets = 1024

// Reset is one reset of a key's counts under some of its limits, as a
// key's coordinator makes it and every node applies it (ApplyReset).
//
// At is the reset instant R, unix ms on the clock of the node that made it.
// A node that applies it erases every slice of (limit, Key) that starts
// before R, whichever node counted it, and from then until the limit's
// window has passed R refuses any such slice a peer sends (Merge) and counts
// its own requests no earlier than R. Which slices a reset erases is thus a
// property of the slice alone, its start against R, the same on every node:
// see Counter.ApplyReset for why that erases what was counted before the
// reset, keeps what was counted after it, and counts nothing twice.
type Reset struct {
	Key string
	// Limits are the identities (LimitID) of the limits whose counts go.
	Limits []string
	At     int64
}

// ResetStats says what one reset did on this node.
type ResetStats struct {
	// Erased is the sum of the counts of the slices dropped: the requests
	// of the key this node had counted under the limits before R, its
	// own and those merged from its peers (a limit's requests each, so a
	// request counted under two limits is two).
	Erased int64
	// Unknown counts the limits not registered here: nothing of them is
	// reset (this node's rules lack them).
	Unknown int
}

// Reset makes a reset of key's counts under limits (their LimitID) at now
// and applies it here: what a single node, or a key's coordinator, does.
// The reset instant R (Reset.At) is the millisecond after now, or after
// the start of this node's newest slice of the key if that is later (a
// check whose clock read was later took the lock first): every request
// this node counted before the call is in a slice that starts before R,
// and is erased. It returns the Reset for the other nodes to apply with
// ApplyReset, and what it did here. It returns ErrTooManyLimits for more
// than MaxLimitsPerCall limits and ErrTooManyResets when the key's shard
// holds too many resets still in force; nothing is reset then.
func (c *Counter) Reset(now time.Time, key string, limits []string) (Reset, ResetStats, error) {
	r := Reset{Key: key, Limits: limits}
	st, err := c.applyReset(now, &r, true)
	return r, st, err
}

// ApplyReset applies a reset that a key's coordinator made (Reset), at now
// on this node's clock, with the coordinator's instant R = r.At. Limits not
// registered here are skipped and counted in ResetStats.Unknown. Applying
// the same reset twice, or an older one after a newer, erases nothing the
// first did not: a (limit, key) keeps the latest R it was given. It returns
// ErrTooManyLimits and ErrTooManyResets as Reset does.
//
// Which slices go, and why nothing is counted twice: a request is counted
// in exactly one slice, named (origin, start), and a node's view of a slice
// is the largest count it has seen for that name (Merge). ApplyReset drops
// every slice of (limit, key) with start < R and records R for the
// window's length; while it holds, Merge refuses every slice of (limit,
// key) with start < R, and this node counts a request of it that arrives at
// t < R as arriving at R (its clock is behind the coordinator's: it applies
// a reset that was made, in real time, before it arrived). So a slice with
// start < R is dropped on every node that applied the reset, and can never
// come back from a late, duplicated or re-sent message, a peer's catch-up or
// this node's own restored slices; a slice with start >= R is kept
// everywhere; and every request a node counts after it applied the reset
// lands in a slice with start >= R. A reset only removes slices, never
// adds a count, and the merge stays a maximum per slice, so no request is
// counted twice: once every node has applied the reset and merged its
// peers' slices, every node counts exactly the requests of the slices with
// start >= R, and they agree.
//
// What "before the reset" means is the slice's start against R, on the
// clocks of the slice's origin and of the coordinator: a slice opened, on
// a node whose clock is d ahead, up to d before the reset is kept with
// what it holds, and requests counted up to the delivery delay after R on
// a node that had not yet applied the reset, in a slice opened before R,
// are erased. The engine bounds d (cluster/engine, Timing.MaxClockOffset:
// it merges nothing of a peer whose clock is further ahead), and a node
// whose clock is behind counts its requests at R for at most its offset,
// which keeps them counted that much longer (as every slice of a peer
// behind is: package doc, "In a cluster").
func (c *Counter) ApplyReset(now time.Time, r Reset) (ResetStats, error) {
	return c.applyReset(now, &r, false)
}

// applyReset erases key's slices of limits that start before R and
// records the tombstones, under the key's shard lock: all of a key's
// limits live in one shard, so a reset of several is atomic, and ordered
// with every check and merge of the key. making sets r.At first (Reset).
func (c *Counter) applyReset(now time.Time, r *Reset, making bool) (ResetStats, error) {
	var st ResetStats
	if len(r.Limits) > MaxLimitsPerCall {
		return st, fmt.Errorf("%w: %d > %d", ErrTooManyLimits, len(r.Limits), MaxLimitsPerCall)
	}
	var buf [MaxLimitsPerCall]Limit
	limits := buf[:0]
	for _, id := range r.Limits {
		slot, info, ok := c.lookupLimit(id)
		if !ok {
			st.Unknown++
			continue
		}
		limits = append(limits, Limit{slot: slot, max: info.max, windowMs: info.windowMs, sliceMs: info.sliceMs, name: id})
	}
	nowMs := now.UnixMilli()
	if making {
		r.At = nowMs + 1
	}
	if len(limits) == 0 {
		return st, nil
	}
	s, tag := c.locate(r.Key)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.coord == nil {
		s.coord = &coordState{}
	}
	rs := &s.coord.resets
	if !rs.room(r.Key, limits, nowMs) {
		return st, fmt.Errorf("%w: %d in the key's shard", ErrTooManyResets, len(*rs))
	}
	var states [MaxLimitsPerCall]state
	var found [MaxLimitsPerCall]bool
	for i, l := range limits {
		if int(l.slot) < len(s.tables) {
			found[i] = s.tables[l.slot].get(tag, r.Key, s.buf(i), repeats(limits, i), &states[i])
		}
		if j := states[i].newestLocal(); making && found[i] && j >= 0 {
			r.At = max(r.At, states[i].start(j)+1)
		}
	}
	for i, l := range limits {
		ref := dirtyRef{slot: l.slot, key: r.Key}
		at := rs.record(ref, r.At, l.windowMs, nowMs)
		if n, dropped := states[i].eraseBefore(at, l.windowMs); found[i] && dropped {
			st.Erased += n
			s.store(l.slot, tag, r.Key, &states[i])
		}
		s.coord.eraseBefore(ref, at)
	}
	return st, nil
}

// eraseBefore drops the slices that start before r, and returns the sum
// of their counts and whether it dropped any. Slices are in start order,
// so they are the first ones: expire at the instant whose window starts
// at r - 1 drops exactly them (and moves the base as it always does).
// The node's own slices that remain, if any, are its newest, so what
// describes its newest slice (head, flagClosed) stays true; when none
// remains it is cleared.
func (s *state) eraseBefore(r, windowMs int64) (erased int64, dropped bool) {
	i := 0
	for ; i < s.sl.n && s.start(i) < r; i++ {
		erased += int64(s.sl.count(i))
	}
	if i == 0 {
		return 0, false
	}
	s.expire(r-1+windowMs, windowMs)
	if s.newestLocal() < 0 {
		s.head = 0
		s.set(flagClosed, false)
	}
	return erased, true
}

// eraseBefore drops the grants of ref counted in an asker's slice that
// starts before r, and a remembered denial of ref: the counts both stood
// for are gone. A grant made after the reset for such a slice (its asker
// had not applied it yet) is recorded afresh and counts until its asker's
// slices show it, as any grant.
func (cs *coordState) eraseBefore(ref dirtyRef, r int64) {
	k := cs.lookup(ref)
	if k == nil {
		return
	}
	cs.setDenial(k, denial{})
	kept := k.grantList()[:0]
	for _, g := range k.grantList() {
		if g.start >= r {
			kept = append(kept, g)
		}
	}
	k.setGrants(kept)
	cs.tidy(ref, k)
}

// resetSet is a shard's live resets, per (limit, key): the tombstones that
// Merge and the local clamp consult. It lives in the shard's coordState
// (the shard itself is a cache line, full), guarded by the shard's mutex;
// a nil set is empty, and costs the paths that consult it a nil check and
// a length.
type resetSet map[dirtyRef]tombstone

// resetsOf returns the shard's resets in force (nil: none).
func (cs *coordState) resetsOf() resetSet {
	if cs == nil {
		return nil
	}
	return cs.resets
}

// tombstone is one (limit, key)'s latest reset.
type tombstone struct {
	at      int64 // R: unix ms on the clock of the node that made the reset
	until   int64 // R + window: from then on Merge's window refuses every slice this would
	applied int64 // unix ms on this node's clock when it was applied
}

// room reports whether the tombstones of key's limits fit, dropping the
// expired ones first when the set is full.
func (rs *resetSet) room(key string, limits []Limit, nowMs int64) bool {
	need := 0
	for _, l := range limits {
		if _, ok := (*rs)[dirtyRef{slot: l.slot, key: key}]; !ok {
			need++
		}
	}
	if len(*rs)+need <= maxResets {
		return true
	}
	rs.sweep(nowMs)
	return len(*rs)+need <= maxResets
}

// record sets ref's tombstone to at, unless it holds a later one, and
// returns the instant in force. The map keeps a copy of the key.
func (rs *resetSet) record(ref dirtyRef, at, windowMs, nowMs int64) int64 {
	if *rs == nil {
		*rs = make(resetSet)
	}
	if t, ok := (*rs)[ref]; ok && t.at >= at {
		return t.at
	}
	if _, ok := (*rs)[ref]; !ok {
		ref.key = strings.Clone(ref.key)
	}
	(*rs)[ref] = tombstone{at: at, until: at + windowMs, applied: nowMs}
	return at
}

// erases reports whether a slice of (slot, key) starting at start was
// erased by a reset in force: Merge refuses it.
func (rs resetSet) erases(slot uint16, key string, start int64) bool {
	if len(rs) == 0 {
		return false
	}
	t, ok := rs[dirtyRef{slot: slot, key: key}]
	return ok && start < t.at
}

// clamp returns the instant at which this node counts a request of (slot,
// key) that arrives at now: R when a reset in force is later (this node's
// clock is behind the one that made it), now otherwise.
func (rs resetSet) clamp(slot uint16, key string, now int64) int64 {
	if len(rs) == 0 {
		return now
	}
	if t, ok := rs[dirtyRef{slot: slot, key: key}]; ok && now < t.at {
		return t.at
	}
	return now
}

// maxDenialDelay is how long after applying a reset this node does not
// remember a coordinator's denial of the key: an answer decided before
// the reset may arrive after it (within the decision layer's deadline,
// at most a second), and remembering it would deny a key just reset.
const maxDenialDelay = maxAnswerDelay

// justReset reports whether (slot, key) was reset here less than
// maxDenialDelay ago: RememberDenial does not remember then.
func (rs resetSet) justReset(slot uint16, key string, now int64) bool {
	if len(rs) == 0 {
		return false
	}
	t, ok := rs[dirtyRef{slot: slot, key: key}]
	return ok && now-t.applied < maxDenialDelay.Milliseconds()
}

// sweepResets drops the shard's tombstones whose window has passed
// (Counter.Sweep): until then Allow and Merge look each of its keys up.
func (cs *coordState) sweepResets(nowMs int64) {
	if cs != nil {
		cs.resets.sweep(nowMs)
	}
}

// sweep drops the tombstones whose window has passed: a slice starting
// before their R is then out of every window Merge accepts.
func (rs *resetSet) sweep(nowMs int64) {
	for ref, t := range *rs {
		if t.until <= nowMs {
			delete(*rs, ref)
		}
	}
}
