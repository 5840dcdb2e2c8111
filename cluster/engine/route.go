package engine

import (
	"slices"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// view is where this node sends the changes of a routed key: the ring of
// this node and its up peers, and the peers passed over for missing their
// asks (Failover). Nodes with the same members and the same misses agree.
type view struct {
	ring   *ring
	failed []string // sorted
}

// same reports whether v and o send every key to the same node.
func (v view) same(o view) bool {
	return v.ring != nil && o.ring != nil && slices.Equal(v.ring.names, o.ring.names) && slices.Equal(v.failed, o.failed)
}

// dest returns where this node sends its own slices of a routed key: the
// node it would ask about the key (its coordinator, or the runner-up when
// the coordinator is failed over), or, when that is this node, the next
// node in that order, which keeps a copy of what this node admitted as the
// key's coordinator, so that it can take the key over with this node's
// counts if this node dies. "" when there is none (this node alone).
func (v view) dest(self, key string) string {
	if first := v.ring.first(key); first != self && !slices.Contains(v.failed, first) {
		return first // the common case: no walk
	}
	out := ""
	v.ring.walk(key, func(name string) bool {
		if name == self || slices.Contains(v.failed, name) {
			return true
		}
		out = name
		return false
	})
	return out
}

// also returns the key's coordinator on the ring when it is failed over
// here and is neither this node nor dest: this node keeps sending it its
// own slices of the key beside dest's. A coordinator failed over here is
// silent to this node, not necessarily to the others: cut one way from
// this node, it still grants their checks, and its count must hold what
// this node admits meanwhile (alone, with the budget) for its grants to
// leave room for it. Counts merge by max, so the copy never adds twice,
// and one sent to a dead node is lost and harmless. "" otherwise.
func (v view) also(self, key, dest string) string {
	if len(v.failed) == 0 {
		return ""
	}
	if first := v.ring.first(key); first != self && first != dest && slices.Contains(v.failed, first) {
		return first
	}
	return ""
}

// route adds en, a routed key's slice, to e.routes under where it goes
// (view.dest, view.also). Under e.tickMu.
func (e *Engine) route(en counter.Entry) {
	to := e.lastView.dest(e.cfg.Self, en.Key)
	if to != "" {
		e.routes[to] = append(e.routes[to], en)
	}
	if also := e.lastView.also(e.cfg.Self, en.Key, to); also != "" {
		e.routes[also] = append(e.routes[also], en)
	}
}

// viewLocked returns the current view. Under e.mu.
func (e *Engine) viewLocked(now time.Time) view {
	v := view{ring: e.ringLocked()}
	for name, p := range e.peers {
		if p.Up && e.failedOver(p, now) {
			v.failed = append(v.failed, name)
		}
	}
	slices.Sort(v.failed)
	return v
}

// routeTick starts a tick's routing: it reads the routed limits
// (counter.Counter.Routed) and the view, and empties e.routes. When the
// view changed since the previous tick or Moved (which sends such a
// change at once when the transport calls it), it adds to e.routes this node's
// live slices of every routed key whose destination changed (a member
// joined or left, a coordinator was failed over or heard again), so that
// the key's new coordinator, or its backup, holds this node's counts of
// it: about 1/N of the keys move on a membership change. Under e.tickMu.
func (e *Engine) routeTick(now time.Time) {
	e.routed = e.c.Routed()
	clear(e.routes)
	e.moved.Store(false) // before the view is read: a change after it is seen next time
	e.moveRoutes(now)
}

// moveRoutes adds to e.routes this node's live slices of every routed key
// whose destination changed since e.lastView, and makes the current view
// e.lastView. Under e.tickMu, with e.routed read.
func (e *Engine) moveRoutes(now time.Time) {
	e.mu.Lock()
	v := e.viewLocked(now)
	e.mu.Unlock()
	if len(e.routed) > 0 && e.lastView.ring != nil && !v.same(e.lastView) {
		for _, en := range e.c.AppendState(nil, now, e.cfg.Self, 0) {
			if !e.routed[en.Limit] {
				continue
			}
			if to := v.dest(e.cfg.Self, en.Key); to != "" && to != e.lastView.dest(e.cfg.Self, en.Key) {
				e.routes[to] = append(e.routes[to], en)
			}
		}
	}
	e.lastView = v
}

// Moved returns, when the view changed since the last Tick or Moved (a
// member joined or left, a coordinator was failed over or heard again),
// this node's live slices of the routed keys whose destination changed,
// for their new coordinators (or backups), at once rather than at the
// next Tick: until they arrive the new coordinator of a moved key grants
// on the part of its counts it holds. The transport calls it after
// PeerDown and wherever else it may have changed the view; nil when
// nothing moved. It starts no budget interval (only Tick does). It never
// waits: while a Tick runs it returns nothing and leaves the change for
// the next call or Tick, so that the transport's receiving goroutine,
// which answers asks, is not held behind a tick.
func (e *Engine) Moved(now time.Time) ([]Outbound, error) {
	if !e.moved.Load() || !e.tickMu.TryLock() {
		return nil, nil
	}
	defer e.tickMu.Unlock()
	if !e.moved.Swap(false) {
		return nil, nil
	}
	if e.lastView.ring == nil {
		return nil, nil // before the first Tick: it sends the view's routes
	}
	e.routed = e.c.Routed()
	clear(e.routes)
	e.moveRoutes(now)
	out, err := e.sendRoutes(nil, now, kindDelta, PurposeDelta)
	for i := range out {
		out[i].Spread = false // at once: a new coordinator waits for them
	}
	return out, err
}

// split returns the entries of broadcast limits, in place, and adds those
// of routed limits to e.routes under the node each goes to; with resend,
// it also keeps them for the next anti-entropy (resendRouted). Under
// e.tickMu, after routeTick.
func (e *Engine) split(entries []counter.Entry, resend bool) []counter.Entry {
	if len(e.routed) == 0 {
		return entries
	}
	bc := entries[:0]
	for _, en := range entries {
		if !e.routed[en.Limit] {
			bc = append(bc, en)
			continue
		}
		e.route(en)
		if resend {
			e.resend = append(e.resend, en)
		}
	}
	return bc
}

// resendRouted adds to e.routes the routed entries the deltas carried
// since the previous anti-entropy, the newest count of each slice once,
// and forgets them. Anti-entropy's hot keys are judged on this node's own
// counts, which for a routed key are only its part: without this a lost
// delta of a key that changes no more would be missing at its coordinator
// until the slice left the window, where a broadcast key's total would
// have made it hot. So every routed change is sent twice, a tick and an
// anti-entropy interval apart, and a lost datagram is healed within that
// interval, as a hot broadcast key's is. Under e.tickMu, after routeTick.
func (e *Engine) resendRouted() {
	type slice struct {
		limit, key string
		start      int64
	}
	newest := make(map[slice]int, len(e.resend))
	for i, en := range e.resend {
		k := slice{en.Limit, en.Key, en.Start}
		if j, ok := newest[k]; !ok || e.resend[j].Count < en.Count {
			newest[k] = i
		}
	}
	for i, en := range e.resend {
		if newest[slice{en.Limit, en.Key, en.Start}] != i || !e.routed[en.Limit] {
			continue
		}
		e.route(en)
	}
	clear(e.resend)
	e.resend = e.resend[:0]
}

// sendRoutes appends an Outbound of p, messages of kind, for each node
// e.routes holds entries for, in name order, and empties e.routes. Under
// e.tickMu.
func (e *Engine) sendRoutes(out []Outbound, now time.Time, kind byte, p Purpose) ([]Outbound, error) {
	names := make([]string, 0, len(e.routes))
	for name, es := range e.routes {
		if len(es) > 0 {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		msgs, err := e.encode(kind, now, e.routes[name], e.cfg.DatagramBytes)
		// Dropped, not kept for the next tick: on a large cluster a node
		// sends to a different few hundred nodes each tick.
		delete(e.routes, name)
		if err != nil {
			return out, err
		}
		if p == PurposeDelta {
			e.Stats.DeltaMessages.Add(uint64(len(msgs)))
		}
		out = append(out, Outbound{To: name, Purpose: p, Msgs: msgs, Reliable: e.cfg.StreamOnly, Spread: !e.cfg.StreamOnly})
	}
	return out, nil
}

// routedFor keeps, of entries (this node's own slices), those peer should
// have: every slice of a broadcast limit, and a routed key's only when
// peer is where this node sends it (view.dest).
func (e *Engine) routedFor(now time.Time, peer string, entries []counter.Entry) []counter.Entry {
	routed := e.c.Routed()
	if len(routed) == 0 {
		return entries
	}
	e.mu.Lock()
	v := e.viewLocked(now)
	e.mu.Unlock()
	kept := entries[:0]
	for _, en := range entries {
		if !routed[en.Limit] || v.dest(e.cfg.Self, en.Key) == peer {
			kept = append(kept, en)
		}
	}
	return kept
}
