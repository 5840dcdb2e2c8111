package counter

import "strings"

// keyCoord is everything this node keeps about one (limit, key) for
// coordination, in one record so that a check, an ask or an answer finds
// it with one map lookup: as the key's coordinator, the grants its merged
// slices may not show yet and the leases it lent; as an asker, the lease
// it holds, the coordinator's denial it remembers and, of a routed key,
// the others' count its last answer told (heard.go). A record with none
// of the five is dropped from the map (coordState.tidy).
//
// The parts were four maps once; at 64 simulated nodes their lookups,
// each a cache miss on a large heap, cost more than the decisions they
// fed (BENCHMARKS.md, issue 20).
type keyCoord struct {
	held    heldLease  // gen 0: none (ask numbers start at 1)
	denial  denial     // until 0: none
	heardOf heardCount // until 0: none
	side    *coordSide // as the key's coordinator; nil: nothing
}

// coordSide is what a key's coordinator keeps of it: the grants its merged
// slices may not show yet and the leases it lent. Apart, because most
// records are an asker's (a lease held, a denial), and a record is kept
// small: a node holds one for each key it asked about in the last second.
type coordSide struct {
	grants []grant
	lent   []lentLease
}

// empty reports whether k holds nothing.
func (k *keyCoord) empty() bool {
	return k.side == nil && !k.holds() && k.denial.until == 0 && k.heardOf.until == 0
}

// holds reports whether k has a lease held (perhaps used up or expired).
func (k *keyCoord) holds() bool { return k.held.gen != 0 }

// grantList returns k's grants (nil: none).
func (k *keyCoord) grantList() []grant {
	if k.side == nil {
		return nil
	}
	return k.side.grants
}

// lentList returns the leases lent on k's key (nil: none).
func (k *keyCoord) lentList() []lentLease {
	if k.side == nil {
		return nil
	}
	return k.side.lent
}

// lends returns k's coordinator side, made if missing.
func (k *keyCoord) lends() *coordSide {
	if k.side == nil {
		k.side = new(coordSide)
	}
	return k.side
}

// dropSideIfEmpty frees k's coordinator side once it holds nothing.
func (k *keyCoord) dropSideIfEmpty() {
	if k.side != nil && len(k.side.grants) == 0 && len(k.side.lent) == 0 {
		k.side = nil
	}
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
	// filter has the bit (filterBit) of every key in keys set, and
	// perhaps others: a check (lookup) of a key whose bit is clear, most
	// checks, skips the map, whose lookup was a cache miss on a large
	// heap (at 100,000 keys, a tenth of what a cluster node's check cost
	// more than a single node's). It is rebuilt from keys once as many
	// records were dropped since as keys holds, so a key's bit does not
	// stay set long after its record went.
	filter  [filterWords]uint64
	dropped int // records dropped since filter was rebuilt
}

// filterWords is the size of coordState.filter in words: 1,024 bits, a
// few per record at the records a shard holds (a node keeps one for each
// key it asked about in the last second or so).
const filterWords = 16

// filterBit is ref's bit in coordState.filter: a hash of the key's last
// eight bytes (or fewer), its length and the limit, which tell a tick's
// keys apart without hashing them whole (keys that collide only cost a
// map lookup).
func filterBit(ref dirtyRef) uint {
	k := ref.key
	var x uint64
	for i := max(len(k)-8, 0); i < len(k); i++ {
		x = x<<8 | uint64(k[i])
	}
	x ^= uint64(len(k))<<48 ^ uint64(ref.slot)<<32
	x *= 0x9e3779b97f4a7c15
	return uint(x >> (64 - 10)) // 10 bits: filterWords*64
}

// mayHold reports whether ref's bit is set in the filter: false means
// the map holds no record of ref.
func (cs *coordState) mayHold(ref dirtyRef) bool {
	b := filterBit(ref)
	return cs.filter[b/64]&(1<<(b%64)) != 0
}

// mark sets ref's bit in the filter.
func (cs *coordState) mark(ref dirtyRef) {
	b := filterBit(ref)
	cs.filter[b/64] |= 1 << (b % 64)
}

// lookup returns ref's record, nil if none (or on a nil coordState).
func (cs *coordState) lookup(ref dirtyRef) *keyCoord {
	if cs == nil || len(cs.keys) == 0 || !cs.mayHold(ref) {
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
	cs.mark(ref)
	return k
}

// tidy drops ref's record k if it holds nothing any more. k may be nil.
func (cs *coordState) tidy(ref dirtyRef, k *keyCoord) {
	if k != nil && k.empty() {
		delete(cs.keys, ref)
		if cs.dropped++; cs.dropped >= len(cs.keys) {
			cs.rebuildFilter()
		}
	}
}

// rebuildFilter sets the filter's bits of the keys in the map alone.
func (cs *coordState) rebuildFilter() {
	cs.filter = [filterWords]uint64{}
	for ref := range cs.keys {
		cs.mark(ref)
	}
	cs.dropped = 0
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
	if k.side == nil {
		return // kept is empty: it came from k's grants
	}
	if len(kept) == 0 {
		kept = nil
	}
	k.side.grants = kept
	k.dropSideIfEmpty()
}

// setLent makes kept k's leases lent, keeping the count of records with
// leases lent.
func (cs *coordState) setLent(k *keyCoord, kept []lentLease) {
	switch had := len(k.lentList()) > 0; {
	case had && len(kept) == 0:
		cs.lent--
		kept = nil
	case !had && len(kept) > 0:
		cs.lent++
	}
	if k.side == nil && len(kept) == 0 {
		return
	}
	k.lends().lent = kept
	k.dropSideIfEmpty()
}

// setHeld makes h the lease k holds, or drops it (ok false), keeping the
// count of records with a lease held.
func (cs *coordState) setHeld(k *keyCoord, h heldLease, ok bool) {
	switch {
	case k.holds() && !ok:
		cs.held--
	case !k.holds() && ok:
		cs.held++
	}
	if !ok {
		h = heldLease{}
	}
	k.held = h
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
