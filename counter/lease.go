package counter

import "strings"

// Leases (ClusterConfig.LeaseShare): a key's coordinator lends a node that
// keeps asking about the key part of the key's blind pool, to decide
// locally, without the network, until it is used up or LeaseTime has
// passed. What a lease lends is tolerance, not limit: the coordinator
// never counts a lease in its window, so a lease can never make it deny a
// check, whoever holds it and whether its holder lives (NFR2 is untouched);
// and the leases out of one key never exceed leaseCap, the share of the
// tolerance set aside for them, so what their holders admit unseen adds
// at most leaseCap to a window (NFR1; the argument is in doc.go).

// heldLease is a lease this node holds on one (limit, key): what is left
// of it and until when it may be used (unix ms, this node's clock). gen
// numbers this node's asks about the key: a lease is taken only from the
// answer to the newest one (Grant), and the coordinator keeps, per node
// and key, only the lease of the newest ask it decided (lend), so that
// with several asks of one key in flight at once the lease the node uses
// is the one the coordinator counts. asked is when the newest ask was
// prepared: gen is kept that long after it (maxAnswerDelay), whatever the
// lease.
type heldLease struct {
	left  uint32
	gen   uint32
	until int64
	asked int64
}

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

// leases is one shard's lease state. Guarded by the shard's mutex; a nil
// *leases is empty. The maps hold pointers, and a new entry's key is
// copied, so that no caller's key string is kept (a Go map keeps the key
// of the latest assignment, and callers' keys may alias a buffer).
type leases struct {
	held map[dirtyRef]*heldLease
	lent map[dirtyRef]*[]lentLease
}

// owned returns ref with a key of its own, for a new map entry.
func owned(ref dirtyRef) dirtyRef {
	ref.key = strings.Clone(ref.key)
	return ref
}

// maxLeases caps the leases held and the keys with leases lent per shard:
// past it no new lease is taken or lent (the check asks, as without
// leases), so memory stays bounded whatever keys go hot.
const maxLeases = 4096

// take uses hits of the lease held on ref at now, if one is live with
// that much left, and reports whether it did. An expired lease is dropped.
func (ls *leases) take(ref dirtyRef, now, hits int64) bool {
	if ls == nil || len(ls.held) == 0 {
		return false
	}
	h, ok := ls.held[ref]
	switch {
	case !ok || now >= h.until:
		return false
	case int64(h.left) < hits:
		return false
	}
	return true
}

// use spends hits of the lease on ref, which take found live.
func (ls *leases) use(ref dirtyRef, hits int64) {
	ls.held[ref].left -= uint32(hits)
}

// hold takes a lease of hits on ref until the given instant, lent in
// answer to the ask numbered gen: only if that is the newest ask about
// ref (a later one's answer, or none, is what the coordinator counts).
func (ls *leases) hold(ref dirtyRef, hits, until int64, gen uint32) {
	h, ok := ls.held[ref]
	if !ok || h.gen != gen {
		return
	}
	h.left, h.until = uint32(min(hits, MaxLimit)), until
}

// ask drops the leases held on refs (the limits of one check), whose
// holder is asking again at now (it uses no lease while it waits, so that
// what it admitted on the old one is in the slices its ask carries), and
// returns the new ask's number, one for all of them.
func (ls *leases) ask(refs []dirtyRef, now int64) uint32 {
	if ls.held == nil {
		ls.held = make(map[dirtyRef]*heldLease)
	}
	var gen uint32 = 1
	for _, ref := range refs {
		if h, ok := ls.held[ref]; ok {
			gen = max(gen, h.gen+1)
		}
	}
	for _, ref := range refs {
		h, ok := ls.held[ref]
		switch {
		case ok:
			*h = heldLease{gen: gen, asked: now}
		case len(ls.held) < maxLeases:
			ls.held[owned(ref)] = &heldLease{gen: gen, asked: now}
		}
		// else no lease will be taken: hold finds no entry
	}
	return gen
}

// out returns the hits lent on ref at now to nodes other than origin,
// dropping the expired leases.
func (ls *leases) out(ref dirtyRef, origin uint16, now int64) int64 {
	if ls == nil || len(ls.lent) == 0 {
		return 0
	}
	lent, ok := ls.lent[ref]
	if !ok {
		return 0
	}
	var sum int64
	kept := (*lent)[:0]
	for _, l := range *lent {
		if l.expires <= now {
			continue
		}
		kept = append(kept, l)
		if l.origin != origin {
			sum += int64(l.hits)
		}
	}
	ls.setLent(ref, lent, kept)
	return sum
}

// lend records a lease of hits on ref to origin for ask id, replacing the
// one origin held, and reports whether it did: an ask from a holder means
// it stopped using its lease, and what it admitted on it is in the slices
// the ask carried, merged before this decision. An ask older (by the
// holder's numbering) than one decided already gets no lease: its holder
// would not take it.
func (ls *leases) lend(ref dirtyRef, l lentLease) bool {
	if ls.lent == nil {
		ls.lent = make(map[dirtyRef]*[]lentLease)
	}
	lent, ok := ls.lent[ref]
	if !ok {
		if len(ls.lent) >= maxLeases {
			return false
		}
		lent = new([]lentLease)
		ls.lent[owned(ref)] = lent
	}
	for _, o := range *lent {
		if o.origin == l.origin && o.gen > l.gen {
			return false // a newer ask of the holder's was decided: it will not take this one
		}
	}
	kept := (*lent)[:0]
	for _, o := range *lent {
		if o.origin != l.origin {
			kept = append(kept, o)
		}
	}
	*lent = append(kept, l)
	return true
}

// unlend drops the lease lent for ask (origin, id): the asker gave the ask
// up, so it never took the lease.
func (ls *leases) unlend(ref dirtyRef, origin uint16, id uint64) {
	if ls == nil {
		return
	}
	lent, ok := ls.lent[ref]
	if !ok {
		return
	}
	kept := (*lent)[:0]
	for _, l := range *lent {
		if l.origin != origin || l.id != id {
			kept = append(kept, l)
		}
	}
	ls.setLent(ref, lent, kept)
}

// setLent stores kept as ref's leases, dropping the entry when none is left.
func (ls *leases) setLent(ref dirtyRef, lent *[]lentLease, kept []lentLease) {
	setList(ls.lent, ref, lent, kept)
}

// sweep drops expired leases, held and lent.
func (ls *leases) sweep(now int64) {
	if ls == nil {
		return
	}
	for k, h := range ls.held {
		if now >= max(h.until, h.asked+maxAnswerDelay.Milliseconds()) {
			delete(ls.held, k)
		}
	}
	for k, lent := range ls.lent {
		kept := (*lent)[:0]
		for _, l := range *lent {
			if l.expires > now {
				kept = append(kept, l)
			}
		}
		ls.setLent(k, lent, kept)
	}
}

// want is the lease an asker asks for: the hits it would decide on the
// key in LeaseTime at the pace of its current and previous sync interval
// (pending and prev, st rolled), this check's included.
func (cs *clusterState) want(st *state, hits int64) int64 {
	if cs.LeaseShare == 0 {
		return 0
	}
	per := max(int64(st.pending)+hits, int64(st.prev))
	intervals := (cs.LeaseTime + cs.syncInterval - 1) / cs.syncInterval
	return min(per*int64(intervals), MaxLimit)
}
