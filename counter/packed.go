package counter

import (
	"encoding/binary"
	"slices"
)

// packed is a state's slices as its table stores them, read and changed in
// place: a slice is 6 bytes when the whole list fits the narrow form, 10
// otherwise. Narrow: the offset from off0 in 24 bits, the count in 16, the
// origin in 8 (a window's slices over up to 4.6 hours, each of at most
// 65,535 requests, from the first 256 origins). Wide: offset, count and
// origin as a slice holds them. A list that stops fitting the narrow form
// (a count past 65,535, say) is rewritten wide; every value a slice can
// hold is kept exactly.
//
// b is normally the list's bytes inside its block, with the rest of the
// block as capacity. When an insert needs more, or the form changes, the
// list moves to sc's buffer (own) and the table copies it into a new block
// when the state is stored.
//
// Only add and merge write a block's bytes, and their callers store the
// state right after. Everything else leaves the block as it was until the
// store: dropFront only moves the start of b (dropped), and a wide list
// that shifts is moved to sc first. So a state read and then not stored
// (a denied check, a sweep between reading and storing) never leaves its
// block half changed.
type packed struct {
	b       []byte
	n       int    // slices in b
	dropped int    // slices dropped from the front of the block's list, still there
	off0    uint32 // narrow: the offset slice offsets are stored from
	wide    bool
	own     bool        // b is sc.b, not the block's bytes
	sc      *scratchBuf // where the list moves when it must
}

const (
	narrowBytes = 6
	wideBytes   = 10
	narrowOff   = 1<<24 - 1
	narrowN     = 1<<16 - 1
	narrowOrig  = 1<<8 - 1
)

// scratchBuf holds the lists that calls move out of their blocks, one per
// limit of a call, reused so that a check allocates nothing.
type scratchBuf struct {
	b   []byte  // a moved list
	tmp []slice // a list being rewritten
	// The index slot (plus 1; 0: none) and block that get found the key
	// at, so that put need not look it up again.
	at  int
	ref uint32
}

func (p *packed) width() int {
	if p.wide {
		return wideBytes
	}
	return narrowBytes
}

func (p *packed) off(i int) uint32 {
	if p.wide {
		return binary.LittleEndian.Uint32(p.b[i*wideBytes:])
	}
	return p.off0 + binary.LittleEndian.Uint32(p.b[i*narrowBytes:])&narrowOff
}

func (p *packed) count(i int) uint32 {
	if p.wide {
		return binary.LittleEndian.Uint32(p.b[i*wideBytes+4:])
	}
	return uint32(binary.LittleEndian.Uint16(p.b[i*narrowBytes+3:]))
}

func (p *packed) origin(i int) uint16 {
	if p.wide {
		return binary.LittleEndian.Uint16(p.b[i*wideBytes+8:])
	}
	return uint16(p.b[i*narrowBytes+5])
}

func (p *packed) at(i int) slice {
	return slice{off: p.off(i), n: p.count(i), origin: p.origin(i)}
}

// fits reports whether sl can be written in the list's current form.
func (p *packed) fits(sl slice) bool {
	return p.wide || sl.off >= p.off0 && sl.off-p.off0 <= narrowOff && sl.n <= narrowN && sl.origin <= narrowOrig
}

// write stores sl at i; it must fit.
func (p *packed) write(i int, sl slice) {
	if p.wide {
		e := p.b[i*wideBytes : i*wideBytes+wideBytes]
		binary.LittleEndian.PutUint32(e, sl.off)
		binary.LittleEndian.PutUint32(e[4:], sl.n)
		binary.LittleEndian.PutUint16(e[8:], sl.origin)
		return
	}
	e := p.b[i*narrowBytes : i*narrowBytes+narrowBytes]
	r := sl.off - p.off0
	e[0], e[1], e[2] = byte(r), byte(r>>8), byte(r>>16)
	binary.LittleEndian.PutUint16(e[3:], uint16(sl.n))
	e[5] = byte(sl.origin)
}

// set replaces the slice at i with sl.
func (p *packed) set(i int, sl slice) {
	if !p.fits(sl) {
		p.refit(sl, 0)
	}
	p.write(i, sl)
}

// setCount sets the count of the slice at i.
func (p *packed) setCount(i int, n uint32) {
	if p.wide {
		binary.LittleEndian.PutUint32(p.b[i*wideBytes+4:], n)
		return
	}
	if n > narrowN {
		p.refit(slice{off: p.off(i), n: n}, 0)
		binary.LittleEndian.PutUint32(p.b[i*wideBytes+4:], n)
		return
	}
	binary.LittleEndian.PutUint16(p.b[i*narrowBytes+3:], uint16(n))
}

// insert puts sl at index i, moving the slices from i on up by one.
func (p *packed) insert(i int, sl slice) {
	if !p.fits(sl) {
		p.refit(sl, 1)
	}
	w := p.width()
	if len(p.b)+w > cap(p.b) {
		p.rewrite(p.wide, p.off0, p.n/4+8)
	}
	p.b = p.b[:len(p.b)+w]
	copy(p.b[(i+1)*w:], p.b[i*w:])
	p.n++
	p.write(i, sl)
}

// dropFront removes the first k slices. In a block it only moves the
// list's start; the store moves the rest down.
func (p *packed) dropFront(k int) {
	if p.own {
		w := p.width()
		p.b = p.b[:copy(p.b, p.b[k*w:])]
	} else {
		p.b = p.b[k*p.width():]
		p.dropped += k
	}
	p.n -= k
}

// shift adds d to every offset (d may wrap to subtract, as the offsets'
// own arithmetic does): narrow lists only move off0.
func (p *packed) shift(d uint32) {
	if !p.wide {
		p.off0 += d
		return
	}
	if !p.own {
		p.rewrite(true, 0, 1) // not in the block: a read-only caller may not store
	}
	for i := range p.n {
		e := p.b[i*wideBytes:]
		binary.LittleEndian.PutUint32(e, binary.LittleEndian.Uint32(e)+d)
	}
}

// refit rewrites the list in a form that can also hold sl (not yet in it),
// with room for extra more slices: narrow from a new off0 if every offset
// then fits, wide otherwise.
func (p *packed) refit(sl slice, extra int) {
	lo, hi := sl.off, sl.off
	if p.n > 0 {
		lo, hi = min(lo, p.off(0)), max(hi, p.off(p.n-1)) // in start order
	}
	narrow := !p.wide && hi-lo <= narrowOff && sl.n <= narrowN && sl.origin <= narrowOrig
	if narrow {
		p.rewrite(false, lo, extra)
	} else {
		p.rewrite(true, 0, extra)
	}
}

// rewrite moves the list to the scratch buffer in the given form, with
// room for extra more slices.
func (p *packed) rewrite(wide bool, off0 uint32, extra int) {
	tmp := p.sc.tmp[:0]
	for i := range p.n {
		tmp = append(tmp, p.at(i))
	}
	p.sc.tmp = tmp[:0]
	w := narrowBytes
	if wide {
		w = wideBytes
	}
	b := slices.Grow(p.sc.b[:0], (p.n+extra)*w)
	p.sc.b = b
	p.b, p.wide, p.off0, p.own, p.dropped = b[:p.n*w], wide, off0, true, 0
	for i, sl := range tmp {
		p.write(i, sl)
	}
}

// sum returns the total count of the slices.
func (p *packed) sum() int64 {
	var c int64
	if p.wide {
		for o := 4; o+4 <= len(p.b); o += wideBytes {
			c += int64(binary.LittleEndian.Uint32(p.b[o:]))
		}
		return c
	}
	// Two slices a step: this loop is most of a check of a key with many
	// slices (a cluster node's keys, whose tail share is small, have dozens).
	b := p.b
	var c2 int64
	for len(b) >= 2*narrowBytes {
		c += int64(binary.LittleEndian.Uint16(b[3:5]))
		c2 += int64(binary.LittleEndian.Uint16(b[9:11]))
		b = b[2*narrowBytes:]
	}
	if len(b) >= narrowBytes {
		c += int64(binary.LittleEndian.Uint16(b[3:5]))
	}
	return c + c2
}

// from returns the list without its first i slices, for reading.
func (p packed) from(i int) packed {
	p.b = p.b[i*p.width():]
	p.n -= i
	return p
}
