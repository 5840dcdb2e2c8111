package counter

import "strings"

// keyCoord is everything this node keeps about one (limit, key) for
// coordination, in one record so that a check, an ask or an answer finds
// it with one map lookup: as the key's coordinator, the grants its merged
// slices may not show yet and the leases it lent; as an asker, the lease
// it holds and the coordinator's denial it remembers. A record with none
// of the four is dropped from the map (coordState.tidy).
//
// The parts were four maps once; at 64 simulated nodes their lookups,
// each a cache miss on a large heap, cost more than the decisions they
// fed (BENCHMARKS.md, issue 20).
type keyCoord struct {
	grants  []grant
	lent    []lentLease
	held    heldLease
	denial  denial // until == 0: none
	hasHeld bool
}

// empty reports whether k holds nothing.
func (k *keyCoord) empty() bool {
	return len(k.grants) == 0 && len(k.lent) == 0 && !k.hasHeld && k.denial.until == 0
}

// coordState is one shard's coordination state. Guarded by the shard's
// mutex; a nil *coordState is empty.
type coordState struct {
	// keys holds the records of the (limit, key)s with coordination
	// state. The map holds pointers, so that a record changes without an
	// assignment, which would replace the map's copy of the key with the
	// caller's (a Go map keeps the key of the latest assignment), and a
	// new entry's key is copied: callers' keys may alias a buffer reused
	// once they return (Ask).
	keys map[dirtyRef]*keyCoord
	// held, lent and denied count the records with a lease held, leases
	// lent and a denial remembered, for their caps (maxLeases, maxDenied).
	held, lent, denied int
	resets             resetSet // the resets in force (reset.go)
}

// lookup returns ref's record, nil if none (or on a nil coordState).
func (cs *coordState) lookup(ref dirtyRef) *keyCoord {
	if cs == nil || len(cs.keys) == 0 {
		return nil
	}
	return cs.keys[ref]
}

// upsert returns ref's record, made if missing.
func (cs *coordState) upsert(ref dirtyRef) *keyCoord {
	if k := cs.keys[ref]; k != nil {
		return k
	}
	if cs.keys == nil {
		cs.keys = make(map[dirtyRef]*keyCoord)
	}
	k := new(keyCoord)
	cs.keys[dirtyRef{slot: ref.slot, key: strings.Clone(ref.key)}] = k
	return k
}

// tidy drops ref's record k if it holds nothing any more. k may be nil.
func (cs *coordState) tidy(ref dirtyRef, k *keyCoord) {
	if k != nil && k.empty() {
		delete(cs.keys, ref)
	}
}

// tidyAll tidies the records ks of key's limits (nil ones skipped).
func (cs *coordState) tidyAll(limits []Limit, key string, ks []*keyCoord) {
	for i, k := range ks {
		if k != nil {
			cs.tidy(dirtyRef{slot: limits[i].slot, key: key}, k)
		}
	}
}

// setGrants makes kept k's grants.
func (k *keyCoord) setGrants(kept []grant) {
	if len(kept) == 0 {
		kept = nil
	}
	k.grants = kept
}

// setLent makes kept k's leases lent, keeping the count of records with
// leases lent.
func (cs *coordState) setLent(k *keyCoord, kept []lentLease) {
	switch had := len(k.lent) > 0; {
	case had && len(kept) == 0:
		cs.lent--
		kept = nil
	case !had && len(kept) > 0:
		cs.lent++
	}
	k.lent = kept
}

// setHeld makes h the lease k holds, or drops it (ok false), keeping the
// count of records with a lease held.
func (cs *coordState) setHeld(k *keyCoord, h heldLease, ok bool) {
	switch {
	case k.hasHeld && !ok:
		cs.held--
	case !k.hasHeld && ok:
		cs.held++
	}
	k.held, k.hasHeld = h, ok
}

// setDenial makes d k's remembered denial (d.until == 0: none), keeping
// the count of records with one.
func (cs *coordState) setDenial(k *keyCoord, d denial) {
	switch had := k.denial.until != 0; {
	case had && d.until == 0:
		cs.denied--
	case !had && d.until != 0:
		cs.denied++
	}
	k.denial = d
}
