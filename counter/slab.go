package counter

import (
	"encoding/binary"
	"math/bits"
)

// A table keeps each (limit, key) pair's state in one block of a byte slab
// rather than as a map entry, a key string and a slice array: at HS1 the
// map's slack, the string and the array's growth were most of what a
// tracked client cost (doc.go, "Memory and the key cap"). A block is, in
// little-endian order,
//
//	base int64, off0 uint32, n uint32, head uint16, meta uint16,
//	class uint8, flags uint8,
//	[restoredEnd uint32, pending uint32, prev uint32, changed uint32]  (flagSync),
//	uvarint key length, the key's bytes, n slices (packed.go),
//	room for more slices
//
// The sync fields are left out until one of them is set: a single node,
// and a cluster node's keys that only its peers count, never set them.
// Code outside table.go, slab.go and packed.go sees a state as before; its
// slices are read and changed in place in the block.
const (
	bBase  = 0
	bOff0  = 8
	bN     = 12
	bHead  = 16
	bMeta  = 18
	bClass = 20
	bFlags = 21
	bSync  = 22 // the sync fields, or the key length without them

	syncBytes = 16

	flagWide = 1 << 0
	flagSync = 1 << 1
)

// minRoom is the room for slices a new block gets (and a block keeps when
// it shrinks): a client at HS1 has 4 to 8 live slices, so most blocks
// never move. A block that must grow moves to one with a quarter more.
const minRoom = 8

// minBlock is the least a block takes: a header, an empty key and minRoom
// narrow slices.
const minBlock = bSync + 1 + minRoom*narrowBytes

// Blocks are allocated in size classes of 8-byte units: every size up to
// 512 bytes exactly (a block wastes under 8 bytes), powers of two above.
// A freed block goes on its class's free list and is reused by the next
// block of that class, so a steady load allocates nothing.
const (
	exactUnits = 64
	numClasses = exactUnits + 27 // powers of two up to 2^32 units
)

func classOf(size int) uint8 {
	u := (size + 7) / 8
	if u <= exactUnits {
		return uint8(u)
	}
	return uint8(exactUnits + bits.Len(uint(u-1)) - 6)
}

func unitsOf(c uint8) int {
	if c <= exactUnits {
		return int(c)
	}
	return 1 << (int(c) - exactUnits + 6)
}

// maxSlabUnits is the most 8-byte units a slab may hold: a ref is a uint32.
// A table refuses new keys well before (table.full), so the blocks of the
// keys it holds can still grow; alloc past it is a broken invariant.
const maxSlabUnits = 1<<32 - 2

// slab is one table's block storage. A ref names a block: its byte offset
// over 8, plus 1, so that 0 names none.
type slab struct {
	b         []byte
	free      [numClasses]uint32 // per class, the first free block; a free block starts with the next one
	freeBytes int                // bytes in free blocks
}

func refOff(ref uint32) int { return int(ref-1) * 8 }

func (sb *slab) alloc(c uint8) uint32 {
	if r := sb.free[c]; r != 0 {
		sb.free[c] = binary.LittleEndian.Uint32(sb.b[refOff(r):])
		sb.freeBytes -= unitsOf(c) * 8
		return r
	}
	o, n := len(sb.b), unitsOf(c)*8
	if (o+n)/8 > maxSlabUnits {
		panic("counter: a table's slab is full") // table.full keeps new keys out long before
	}
	if o+n > cap(sb.b) {
		// Grow by an eighth rather than append's quarter: the slab is
		// nearly all of a table's memory, and its spare capacity counts.
		nb := make([]byte, o, o+max(n, o/8, 4096))
		copy(nb, sb.b)
		sb.b = nb
	}
	sb.b = sb.b[:o+n]
	sb.b[o+bClass] = c
	return uint32(o/8 + 1)
}

func (sb *slab) release(ref uint32) {
	o := refOff(ref)
	c := sb.b[o+bClass]
	binary.LittleEndian.PutUint32(sb.b[o:], sb.free[c])
	sb.free[c] = ref
	sb.freeBytes += unitsOf(c) * 8
}

func uvarintLen(v int) int { return (bits.Len(uint(v)|1) + 6) / 7 }

// keyAt returns where the key length of the block at o is.
func (sb *slab) keyAt(o int) int {
	if sb.b[o+bFlags]&flagSync != 0 {
		return o + bSync + syncBytes
	}
	return o + bSync
}

// key returns the key bytes of the block at ref, and where its slices start.
func (sb *slab) key(ref uint32) ([]byte, int) {
	p := sb.keyAt(refOff(ref))
	n := int(sb.b[p])
	if n < 0x80 {
		p++
	} else {
		v, k := binary.Uvarint(sb.b[p:])
		n, p = int(v), p+k
	}
	return sb.b[p : p+n], p + n
}

// usedEnd returns where the slices of the block at o end.
func (sb *slab) usedEnd(o int) int {
	_, p := sb.key(uint32(o/8 + 1))
	w := narrowBytes
	if sb.b[o+bFlags]&flagWide != 0 {
		w = wideBytes
	}
	return p + int(binary.LittleEndian.Uint32(sb.b[o+bN:]))*w
}

// load sets *st to the state in the block at ref. Its slices are the block's
// bytes, changed in place, unless private, when they are a copy in sc (a
// call that names one limit twice must not see its own first write).
func (sb *slab) load(ref uint32, sc *scratchBuf, private bool, st *state) {
	_, p := sb.key(ref)
	sb.loadAt(ref, p, sc, private, st)
}

// loadAt is load for a block whose slices start at p.
func (sb *slab) loadAt(ref uint32, p int, sc *scratchBuf, private bool, st *state) {
	o := refOff(ref)
	h := sb.b[o : o+bSync]
	st.base = int64(binary.LittleEndian.Uint64(h[bBase:]))
	st.head = binary.LittleEndian.Uint16(h[bHead:])
	st.meta = binary.LittleEndian.Uint16(h[bMeta:])
	st.restoredEnd, st.pending, st.prev, st.changed = 0, 0, 0, 0
	flags := h[bFlags]
	if flags&flagSync != 0 {
		s := sb.b[o+bSync : o+bSync+syncBytes]
		st.restoredEnd = binary.LittleEndian.Uint32(s)
		st.pending = binary.LittleEndian.Uint32(s[4:])
		st.prev = binary.LittleEndian.Uint32(s[8:])
		st.changed = binary.LittleEndian.Uint32(s[12:])
	}
	p0 := &st.sl
	p0.n = int(binary.LittleEndian.Uint32(h[bN:]))
	p0.off0 = binary.LittleEndian.Uint32(h[bOff0:])
	p0.wide = flags&flagWide != 0
	p0.sc = sc
	p0.own, p0.dropped = false, 0
	end := o + unitsOf(h[bClass])*8
	p0.b = sb.b[p : p+p0.n*p0.width() : end]
	if private {
		p0.rewrite(p0.wide, p0.off0, 1)
	}
}

// store writes st back as key's block at ref (0: none yet) and returns the
// block's ref: in place when st's slices are still there and the header
// keeps its layout, else in a new block (the old one freed). It copies
// key's bytes and keeps no reference to key or st.
func (sb *slab) store(ref uint32, key string, st *state) uint32 {
	return storeKey(sb, ref, key, st)
}

// restore is store for a state loaded from ref, with the key it has.
func (sb *slab) restore(ref uint32, st *state) uint32 {
	k, _ := sb.key(ref)
	return storeKey(sb, ref, k, st)
}

// storeKey is store for a key as a string or as bytes. When the block
// moves, the key's bytes and st's slices may be the old block's: they are
// copied before the old block is freed.
func storeKey[K string | []byte](sb *slab, ref uint32, key K, st *state) uint32 {
	p := &st.sl
	sync := st.hasSync()
	w := p.width()
	if ref != 0 && !p.own {
		o := refOff(ref)
		flags := sb.b[o+bFlags]
		sync = sync || flags&flagSync != 0
		units := unitsOf(sb.b[o+bClass])
		// In place unless the header needs the sync fields now, or the
		// window emptied most of a large block.
		if sync == (flags&flagSync != 0) && (units <= exactUnits/2 || p.n*w*4 > units*8) {
			if p.dropped > 0 {
				// Slices dropped from the front: the rest moves down.
				_, at := sb.key(ref)
				p.b = sb.b[at : at+copy(sb.b[at:], p.b) : o+units*8]
				p.dropped = 0
			}
			sb.header(o, st, sync)
			return ref
		}
	}
	hdr := bSync
	if sync {
		hdr += syncBytes
	}
	keyAt := hdr + uvarintLen(len(key))
	at := keyAt + len(key)
	nref := sb.alloc(classOf(at + max(p.n+p.n/4, minRoom)*w))
	o := refOff(nref)
	b := sb.b[o : o+unitsOf(sb.b[o+bClass])*8]
	binary.PutUvarint(b[hdr:], uint64(len(key)))
	copy(b[keyAt:], key)
	n := copy(b[at:], p.b)
	sb.header(o, st, sync)
	if ref != 0 {
		sb.release(ref)
	}
	// The state now reads the new block, as after an in-place store.
	p.b, p.own, p.dropped = b[at:at+n], false, 0
	return nref
}

// header writes st's fixed fields into the block at o.
func (sb *slab) header(o int, st *state, sync bool) {
	h := sb.b[o : o+bSync]
	binary.LittleEndian.PutUint64(h[bBase:], uint64(st.base))
	binary.LittleEndian.PutUint32(h[bOff0:], st.sl.off0)
	binary.LittleEndian.PutUint32(h[bN:], uint32(st.sl.n))
	binary.LittleEndian.PutUint16(h[bHead:], st.head)
	binary.LittleEndian.PutUint16(h[bMeta:], st.meta)
	var flags byte
	if st.sl.wide {
		flags |= flagWide
	}
	if sync {
		flags |= flagSync
		s := sb.b[o+bSync : o+bSync+syncBytes]
		binary.LittleEndian.PutUint32(s, st.restoredEnd)
		binary.LittleEndian.PutUint32(s[4:], st.pending)
		binary.LittleEndian.PutUint32(s[8:], st.prev)
		binary.LittleEndian.PutUint32(s[12:], st.changed)
	}
	h[bFlags] = flags
}
