package counter

import (
	"math"
	"time"
)

// Leases (ClusterConfig.LeaseShare): a key's coordinator lends a node that
// keeps asking about the key part of the key's blind pool, to decide
// locally, without the network, until its lease time has passed
// (ClusterConfig.LeaseTime; RoutedLeaseTime for a routed limit): of a limit
// every node merges, up to the lease's size unacknowledged at any instant
// (a blind share lent); of a routed limit, its size in all. What a lease
// lends is tolerance, not limit: the coordinator never counts a lease in
// its window, so a lease can never make it deny a check, whoever holds it
// and whether its holder lives (NFR2 is untouched);
// and the leases out of one key never exceed leaseCap, the share of the
// tolerance set aside for them, so what their holders admit unseen adds
// at most leaseCap to a window (NFR1; the argument is in doc.go).

// heldLease is a lease this node holds on one (limit, key): its size,
// what it admitted, and until when it may be used (unix ms, this node's
// clock). gen numbers this node's asks about the key: a lease is taken
// only from the answer to the newest one (Grant), and the coordinator
// keeps, per node and key, only the lease of the newest ask it decided
// (lend), so that with several asks of one key in flight at once the lease
// the node uses is the one the coordinator counts. asked is when the
// newest ask was prepared: gen is kept that long after it
// (maxAnswerDelay), whatever the lease. used and prev are what the lease
// admitted in the sync interval tick (the low bits of Counter.tickNo) and
// in the one before, as allow's unacked counts a node's admissions: a
// lease on a limit every node merges covers a check while those of them
// not yet acknowledged, plus the check, fit its size. A routed limit's
// lease is spent: used counts all it admitted. taken tells when the
// newest lease this node took on the key was asked for (leaseFrom): a new
// ask carries the slices that may have changed since (PrepareAsk).
type heldLease struct {
	size  uint16 // a lease is at most maxHeldLease hits
	used  uint16
	prev  uint16
	tick  uint16
	gen   uint32
	til   uint16 // until, in ms after asked (at most maxHeldMs)
	taken uint16 // the newest lease taken was asked for this many ms before asked, plus 1; 0: not known
	asked int64
}

// maxHeldMs is the longest a node uses a lease after asking for it: a
// longer one lent (a lease time past a minute) is used this long, which
// only admits less than the coordinator counts. Like maxHeldLease, it
// keeps a record small (TestKeyCoordSize).
const maxHeldMs = math.MaxUint16

// leaseFrom returns the instant (unix ms, this node's clock) the newest
// lease this node took on the key was asked for, and whether it knows it:
// this record's own once the answer brought one (size > 0), else the one
// askLeases kept from the record before. Every hit admitted on a lease
// that an ask's coordinator may replace was admitted at or after it: a
// coordinator replaces only the lease that answered this node's previous
// ask to it, with no ask elsewhere between (followAsk), a lease is taken
// only from the answer to the newest ask, and each lease taken before
// this one from that coordinator was replaced by an ask that carried, the
// same way, what it admitted. Not known: no lease taken since the record
// was made (a record is dropped once its lease has expired), or over a
// minute ago.
func (h *heldLease) leaseFrom() (int64, bool) {
	switch {
	case h.size > 0:
		return h.asked, true
	case h.taken > 0:
		return h.asked - int64(h.taken-1), true
	}
	return 0, false
}

// leaseFrom is heldLease.leaseFrom of the lease k holds; not known when k
// (nil: no record) holds none.
func (k *keyCoord) leaseFrom() (int64, bool) {
	if k == nil || !k.holds() {
		return 0, false
	}
	return k.held.leaseFrom()
}

// takenBefore is the taken field of a record asked at now that follows h.
func (h *heldLease) takenBefore(now int64) uint16 {
	from, ok := h.leaseFrom()
	if !ok {
		return 0
	}
	d := max(now-from, 0) // from after now (asks out of order): now, which carries more
	if d >= math.MaxUint16 {
		return 0 // long ago: not known, and older than any slice an ask must carry
	}
	return uint16(d + 1)
}

// maxHeldLease is the largest lease a node holds: a larger one lent is
// held as this many hits, which only admits less than the coordinator
// counts. (It keeps a record small: TestKeyCoordSize.)
const maxHeldLease = math.MaxUint16

// leaseTime is how long a lease of a routed limit or of a merged one is
// used (ClusterConfig.LeaseTime, RoutedLeaseTime).
func (cs *clusterState) leaseTime(routed bool) time.Duration {
	if routed {
		return cs.RoutedLeaseTime
	}
	return cs.LeaseTime
}

// lentLeaseMs is how long a coordinator counts a lease it lends against the
// pool, after the longest answer delay: the longer lease time, whatever
// the limit's kind, since nodes may see the cluster's size, and so which
// limits are routed, differently for a while; then a grant's lifetime, for
// what the lease admitted to be merged.
func (cs *clusterState) lentLeaseMs() int64 {
	return maxAnswerDelay.Milliseconds() + max(cs.LeaseTime, cs.RoutedLeaseTime).Milliseconds() + cs.grantTTLMs()
}

// until is the instant (unix ms) the lease stops being usable.
func (h *heldLease) until() int64 { return h.asked + int64(h.til) }

// lentLease is a lease this node, as a key's coordinator, lent out: it
// counts against leaseCap until expires, when its holder has stopped
// using it and what it admitted has been merged here on a healthy
// cluster.
type lentLease struct {
	expires int64 // unix ms on this node's clock
	id      uint64
	hits    uint32
	gen     uint32 // the holder's ask number (heldLease.gen)
	origin  uint16
}

// maxLeases caps the leases held and the keys with leases lent per shard:
// past it no new lease is taken or lent (the check asks, as without
// leases), so memory stays bounded whatever keys go hot.
const maxLeases = 4096

// syncClock is where an instant falls among the sync intervals: the
// interval (Counter.tickNo: AppendChanges calls so far) and whether the
// grace after its tick is still running, when the interval before's
// admissions are not yet acknowledged (allow's unacked counts them).
type syncClock struct {
	tick    uint32
	inGrace bool
}

// syncClock returns where now (unix ms) falls among the sync intervals.
func (c *Counter) syncClock(cs *clusterState, now int64) syncClock {
	return syncClock{tick: c.tickNo.Load(), inGrace: now-c.tickAt.Load() < cs.graceMs}
}

// unacked is what is not yet acknowledged of admissions counted cur in
// the current sync interval and prev in the one before: cur, and prev
// too while the grace runs (sent at the last tick, maybe not merged yet).
func (clk syncClock) unacked(cur, prev int64) int64 {
	if clk.inGrace {
		return cur + prev
	}
	return cur
}

// leaseCovers reports whether the lease k holds is live at now and covers
// hits more, at sync clock clk. A lease on a limit whose changes every
// node merges (refill) is a blind share lent: what it admitted that is not
// yet acknowledged (this interval's, and the interval before's during the
// grace), plus hits, must fit its size, so what it admitted that no peer
// has merged is never more than its size. A lease on a routed limit,
// whose holder does not see its peers' admissions, is spent: all it
// admitted, plus hits, must fit its size.
func (k *keyCoord) leaseCovers(now, hits int64, clk syncClock, refill bool) bool {
	if k == nil || !k.holds() || now >= k.held.until() {
		return false
	}
	h := &k.held
	if !refill {
		return int64(h.used)+hits <= int64(h.size)
	}
	if t := uint16(clk.tick); t != h.tick {
		// A new interval: the lease's admissions roll as a key's do
		// (state.roll); after a gap of more than one, none is left.
		if t == h.tick+1 {
			h.prev = h.used
		} else {
			h.prev = 0
		}
		h.used, h.tick = 0, t
	}
	return clk.unacked(int64(h.used), int64(h.prev))+hits <= int64(h.size)
}

// useLease counts hits admitted on the lease k holds, which leaseCovers
// found live (and rolled to the current interval).
func (k *keyCoord) useLease(hits int64) {
	k.held.used += uint16(hits)
}

// hold takes a lease of hits on k until the given instant, lent in
// answer to the ask numbered gen, at sync clock clk: only if that is the
// newest ask about k's key (a later one's answer, or none, is what the
// coordinator counts). Nothing is admitted on it yet: what the node
// admitted on its lease before asked is in the slices its ask carried.
func (k *keyCoord) hold(hits, until int64, gen uint32, clk syncClock) {
	if k == nil || !k.holds() || k.held.gen != gen {
		return
	}
	h := &k.held
	h.size = uint16(max(0, min(hits, maxHeldLease)))
	h.used, h.prev, h.tick = 0, 0, uint16(clk.tick)
	h.til = uint16(max(0, min(until-h.asked, maxHeldMs)))
}

// askLeases drops the leases held on refs (the limits of one check), whose
// holder is asking again at now (it uses no lease while it waits, so that
// what it admitted on the old one is in the slices its ask carries), and
// returns the new ask's number, one for all of them.
func (cs *coordState) askLeases(refs []dirtyRef, now int64) uint32 {
	var ks [MaxLimitsPerCall]*keyCoord
	var gen uint32 = 1
	for i, ref := range refs {
		ks[i] = cs.lookup(ref)
		if k := ks[i]; k != nil && k.holds() {
			gen = max(gen, k.held.gen+1)
		}
	}
	for i, ref := range refs {
		switch k := ks[i]; {
		case k != nil && k.holds():
			k.held = heldLease{gen: gen, asked: now, taken: k.held.takenBefore(now)}
		case cs.held < maxLeases:
			cs.setHeld(cs.upsert(ref), heldLease{gen: gen, asked: now}, true)
		}
		// else no lease will be taken: hold finds none
	}
	return gen
}

// followAsk takes origin's ask numbered gen about k's key as following the
// ask that origin's lease here answered, when its number is the next
// (renumbering the lease gen): the holder then asked no other node in
// between, so this ask carries what the lease admitted (PrepareAsk
// carries the slices since the newest lease its holder took, which is
// that one or a later one lent here, which replaced it the same way), and
// leasesOut and lend treat the lease as this ask's to replace. A lease
// whose holder's next ask went elsewhere in between (a coordinator failed
// over and back) stays counted until it expires: the slices of this ask
// need not hold what it admitted. Renumbering also carries a lease over
// an ask decided without a new one (denied, or the pool empty), which
// carried its slices as well.
func (cs *coordState) followAsk(k *keyCoord, origin uint16, gen uint32) {
	if k == nil || gen == 0 {
		return
	}
	for i, o := range k.lentList() {
		if o.origin == origin && o.gen+1 == gen {
			k.lentList()[i].gen = gen
		}
	}
}

// leasesOut returns the hits lent on k's key at now but for origin's
// lease that its ask numbered gen replaces (followAsk), dropping the
// expired leases. The caller tidies k.
func (cs *coordState) leasesOut(k *keyCoord, origin uint16, gen uint32, now int64) int64 {
	sum, _ := cs.leasesOutTo(k, origin, gen, now)
	return sum
}

// leasesOutTo is leasesOut that also returns how many of those leases
// other nodes than origin hold.
func (cs *coordState) leasesOutTo(k *keyCoord, origin uint16, gen uint32, now int64) (hits int64, others int) {
	if k == nil || len(k.lentList()) == 0 {
		return 0, 0
	}
	kept := k.lentList()[:0]
	for _, l := range k.lentList() {
		if l.expires <= now {
			continue
		}
		kept = append(kept, l)
		if l.origin != origin || l.gen != gen {
			hits += int64(l.hits)
		}
		if l.origin != origin {
			others++
		}
	}
	cs.setLent(k, kept)
	return hits, others
}

// leaseFor is the most a coordinator lends one asker of a key whose lease
// cap is lcap, out of which out is lent already, others of those leases
// to other nodes: what is left of the pool, and of a limit every node
// merges (refill) no more than an equal share among the holders, the
// asker included. The pool is lent for a lease's whole life (a few
// seconds) while each lease refills every sync interval, so the first
// askers of a key would otherwise hold all of it and the others, about as
// busy at a key checked evenly across the nodes, would ask on every check
// past their blind share (Doorman's fair share; BENCHMARKS.md, sixteenth
// session). A lone holder still gets the whole pool, as a client sending
// all its requests to one node needs. Each node rarely holds two leases
// of a key (an ask replaces the asker's own), so others counts leases,
// which only makes a share smaller when it does. A routed limit's lease
// is spent, sized to its holder's pace over its lease time: it keeps the
// pool's rest.
func leaseFor(lcap, out int64, others int, refill bool) int64 {
	free := lcap - out
	if refill {
		free = min(free, lcap/int64(others+1))
	}
	return free
}

// lend records a lease of hits on k's key to origin for ask id, replacing
// the one origin held that the ask follows (followAsk), and reports
// whether it did: an ask from a holder means it stopped using its lease,
// and what it admitted on it is in the slices the ask carried, merged
// before this decision. An ask older (by the holder's numbering) than one
// decided already gets no lease: its holder would not take it. Others of
// origin's leases stay counted until they expire.
func (cs *coordState) lend(k *keyCoord, l lentLease) bool {
	if len(k.lentList()) == 0 && cs.lent >= maxLeases {
		return false
	}
	for _, o := range k.lentList() {
		if o.origin == l.origin && o.gen > l.gen {
			return false // a newer ask of the holder's was decided: it will not take this one
		}
	}
	kept := k.lentList()[:0]
	for _, o := range k.lentList() {
		if o.origin != l.origin || o.gen != l.gen {
			kept = append(kept, o)
		}
	}
	cs.setLent(k, append(kept, l))
	return true
}

// unlend drops the lease lent on k's key for ask (origin, id): the asker
// gave the ask up, so it never took the lease. The caller tidies k.
func (cs *coordState) unlend(k *keyCoord, origin uint16, id uint64) {
	if len(k.lentList()) == 0 {
		return
	}
	kept := k.lentList()[:0]
	for _, l := range k.lentList() {
		if l.origin != origin || l.id != id {
			kept = append(kept, l)
		}
	}
	cs.setLent(k, kept)
}

// sweepLeases drops k's expired leases, held and lent. The caller tidies k.
func (cs *coordState) sweepLeases(k *keyCoord, now int64) {
	if k.holds() && now >= max(k.held.until(), k.held.asked+maxAnswerDelay.Milliseconds()) {
		cs.setHeld(k, heldLease{}, false)
	}
	if len(k.lentList()) > 0 {
		kept := k.lentList()[:0]
		for _, l := range k.lentList() {
			if l.expires > now {
				kept = append(kept, l)
			}
		}
		cs.setLent(k, kept)
	}
}

// want is the lease an asker asks for, at the pace of its current and
// previous sync interval (pending and prev, st rolled), this check's
// included: of a limit whose changes every node merges, twice that pace,
// since the lease is refilled each sync interval (leaseCovers); of a
// routed limit, whose lease is spent, the hits it would decide in
// RoutedLeaseTime.
func (cs *clusterState) want(st *state, hits int64, routed bool) int64 {
	if cs.LeaseShare == 0 {
		return 0
	}
	per := max(int64(st.pending)+hits, int64(st.prev))
	intervals := int64(2)
	if routed {
		intervals = int64((cs.RoutedLeaseTime + cs.syncInterval - 1) / cs.syncInterval)
	}
	return min(per*intervals, MaxLimit)
}
