package counter

// table holds one limit's keys in one shard: an open-addressed index
// (linear probing) over blocks in a slab (slab.go). An index entry is
// tag<<32 | ref, tag the high half of the key's hash (the low half picks
// the shard) and 0 an empty slot. The tag also gives an entry's home slot,
// so the index grows and deletes without reading a key, and a probe reads
// a block only when the tags match.
type table struct {
	idx      []uint64
	n        int   // keys in the table
	peak     int   // largest n since the index was last rebuilt
	windowMs int64 // the window of the slot's limit (part of its identity)
	slab     slab
}

func entry(tag, ref uint32) uint64 { return uint64(tag)<<32 | uint64(ref) }

func (t *table) home(e uint64) int { return int(uint32(e>>32)) & (len(t.idx) - 1) }

// find returns key's slot and true, or the empty slot where it would go.
func (t *table) find(tag uint32, key string) (int, bool) {
	i, _, ok := t.lookup(tag, key)
	return i, ok
}

// lookup is find that also returns where the key's slices start in the slab.
func (t *table) lookup(tag uint32, key string) (int, int, bool) {
	if len(t.idx) == 0 {
		return -1, 0, false
	}
	mask := len(t.idx) - 1
	for i := int(tag) & mask; ; i = (i + 1) & mask {
		e := t.idx[i]
		if e == 0 {
			return i, 0, false
		}
		if uint32(e>>32) == tag {
			if k, p := t.slab.key(uint32(e)); string(k) == key {
				return i, p, true
			}
		}
	}
}

// blockOf returns the byte offset in the slab of the block of the first
// slot a probe for tag finds with that tag, almost always the key's, for
// Merge to read ahead (touch): its header and, a cache line on, its slices
// (every block is longer than minBlock).
func (t *table) blockOf(tag uint32) (int, bool) {
	mask := len(t.idx) - 1
	if mask < 0 {
		return 0, false
	}
	for i := int(tag) & mask; t.idx[i] != 0; i = (i + 1) & mask {
		if e := t.idx[i]; uint32(e>>32) == tag {
			return refOff(uint32(e)), true
		}
	}
	return 0, false
}

// cacheLine is the bytes of a cache line on the machines limiterd runs
// on (amd64, arm64): what Merge reads ahead at a time (mergeWork.touch).
const cacheLine = 64

// longBlocks reports whether the table's blocks average past two cache
// lines less the header's: whether a key's slices are likely to reach
// past the two lines Merge reads ahead first (mergeWork.touch).
func (t *table) longBlocks() bool {
	return t.n > 0 && len(t.slab.b)-t.slab.freeBytes > t.n*(2*cacheLine-bSync)
}

// get sets *st to key's state and reports whether key is tracked. The state's slices
// are changed in place in the table (packed.go) until they need to move,
// to sc; private gives a copy in sc from the start. An untracked key's
// state has none, in sc.
func (t *table) get(tag uint32, key string, sc *scratchBuf, private bool, st *state) bool {
	if i, p, ok := t.lookup(tag, key); ok {
		sc.at, sc.ref = i+1, uint32(t.idx[i])
		t.slab.loadAt(sc.ref, p, sc, private, st)
		return true
	}
	sc.at = 0
	*st = state{sl: packed{b: sc.b[:0], own: true, sc: sc}}
	return false
}

// put stores st as key's state, dropping key when st has no slices, and
// returns the change in the number of keys: -1, 0 or 1. It copies what it
// keeps (the key's bytes go into the slab), so key may be reused after.
func (t *table) put(tag uint32, key string, st *state) int {
	var i int
	var ok bool
	// Where get found the key, if the slot still names the block it read
	// (a block is the key's alone until freed, and nothing frees it between).
	if sc := st.sl.sc; sc != nil && sc.at > 0 && sc.at <= len(t.idx) && t.idx[sc.at-1] == entry(tag, sc.ref) {
		i, ok = sc.at-1, true
	} else {
		i, ok = t.find(tag, key)
	}
	switch {
	case ok && st.sl.n == 0:
		ref := uint32(t.idx[i])
		t.removeAt(i)
		t.slab.release(ref)
		t.n--
		return -1
	case ok:
		t.idx[i] = entry(tag, t.slab.store(uint32(t.idx[i]), key, st))
		return 0
	case st.sl.n == 0:
		return 0
	}
	// At most 13/16 full: probes stay short (all tags, one or two cache
	// lines), and the index costs 10 to 20 bytes a key.
	if (t.n+1)*16 > len(t.idx)*13 {
		t.resize(max(8, 2*len(t.idx)))
		i, _ = t.find(tag, key)
	}
	t.idx[i] = entry(tag, t.slab.store(0, key, st))
	t.n++
	t.peak = max(t.peak, t.n)
	return 1
}

// full reports whether the table must refuse new keys: its slab is near
// the most a ref can name, and the blocks of the keys it has must still be
// able to grow. (Some 32 GiB for one limit in one shard: far past MaxKeys
// in practice.)
func (t *table) full() bool { return len(t.slab.b)/8 > maxSlabUnits-maxSlabUnits/8 }

// removeAt empties slot i, moving later entries of its run back so that
// every entry stays reachable from its home slot (no tombstones).
func (t *table) removeAt(i int) {
	mask := len(t.idx) - 1
	for j := i; ; {
		j = (j + 1) & mask
		e := t.idx[j]
		if e == 0 {
			break
		}
		// e stays if its home lies cyclically in (i, j].
		if h := t.home(e); i <= j && i < h && h <= j || i > j && (i < h || h <= j) {
			continue
		}
		t.idx[i] = e
		i = j
	}
	t.idx[i] = 0
}

func (t *table) resize(size int) {
	old := t.idx
	t.idx = make([]uint64, size)
	mask := size - 1
	for _, e := range old {
		if e == 0 {
			continue
		}
		i := t.home(e)
		for t.idx[i] != 0 {
			i = (i + 1) & mask
		}
		t.idx[i] = e
	}
}

// scan calls visit with the slot of every entry, once each. visit may
// remove the entry it is given (removeAt) and then reports it: later
// entries of the run may have moved into the slot, which is visited again.
// The scan starts after an empty slot, so no run wraps past its start and
// an entry only ever moves into a slot not yet passed.
func (t *table) scan(visit func(i int) (removed bool)) {
	if t.n == 0 {
		return
	}
	mask := len(t.idx) - 1
	start := 0
	for t.idx[start] != 0 {
		start++
	}
	for k := 1; k <= len(t.idx); k++ {
		i := (start + k) & mask
		for t.idx[i] != 0 && visit(i) {
		}
	}
}

// compact rebuilds the table when keys left much of it unused: the index
// after a flood of keys that have since expired (it never shrinks
// otherwise), the slab when a quarter of it is free blocks of classes no
// longer in demand. Both give their memory back to the runtime.
func (t *table) compact() {
	if len(t.idx) >= 4096 && t.n < len(t.idx)/16 {
		size := 8
		for (t.n+1)*2 > size {
			size *= 2
		}
		t.resize(size)
		t.peak = t.n
	}
	if len(t.slab.b) < 64<<10 || t.slab.freeBytes < len(t.slab.b)/4 {
		return
	}
	old := t.slab.b
	t.slab = slab{b: make([]byte, 0, len(old)-t.slab.freeBytes)}
	// Blocks keep their size and layout: only their refs change.
	for i, e := range t.idx {
		if e == 0 {
			continue
		}
		o := refOff(uint32(e))
		n := unitsOf(old[o+bClass]) * 8
		ref := uint32(len(t.slab.b)/8 + 1)
		t.slab.b = append(t.slab.b, old[o:o+n]...)
		t.idx[i] = entry(uint32(e>>32), ref)
	}
}
