package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

// A hand-written msgpack writer and reader for the fixed schemas of the
// sync messages (message and group, codec.go) and of the coordination
// messages (ask, answer and release, askcodec.go). The reflective codec
// cost more than the work it fed (a string allocated per key, reflection
// per value, a third of an ask's round trip); these write the very bytes
// it wrote and read every encoding a conforming msgpack encoder can give
// these types, with bounds checks in place of its panics. The goldens
// under testdata/wire pin the bytes, and TestCodecMatchesMsgpack,
// FuzzDecodeMatchesMsgpack, TestCoordinationMatchesMsgpack and
// FuzzCoordinationMatchesMsgpack hold both sides to go-msgpack, the
// oracle. Only the reset messages (resetcodec.go, rare) still use it.

// msgpack format bytes used here.
const (
	mpPosFixIntMax = 0x7f
	mpFixArray     = 0x90 // | n, n < 16
	mpFixStr       = 0xa0 // | n, n < 32
	mpNil          = 0xc0
	mpFalse        = 0xc2
	mpTrue         = 0xc3
	mpBin8         = 0xc4
	mpBin16        = 0xc5
	mpBin32        = 0xc6
	mpUint8        = 0xcc
	mpUint16       = 0xcd
	mpUint32       = 0xce
	mpUint64       = 0xcf
	mpInt8         = 0xd0
	mpInt16        = 0xd1
	mpInt32        = 0xd2
	mpInt64        = 0xd3
	mpStr8         = 0xd9
	mpStr16        = 0xda
	mpStr32        = 0xdb
	mpArray16      = 0xdc
	mpArray32      = 0xdd
	mpNegFixIntMin = 0xe0
)

// appendArrayLen appends an array header of n elements, in the shortest
// form, as go-msgpack writes it.
func appendArrayLen(b []byte, n int) []byte {
	switch {
	case n < 16:
		return append(b, mpFixArray|byte(n))
	case n < 1<<16:
		return append(b, mpArray16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, mpArray32), uint32(n))
	}
}

// arrayLenSize, stringSize, intSize and uintSize are the lengths of what
// appendArrayLen, appendString (a string of n bytes), appendInt and
// appendUint append: the encoder sizes its messages with them
// (TestSizesMatchAppends).
func arrayLenSize(n int) int {
	switch {
	case n < 16:
		return 1
	case n < 1<<16:
		return 3
	default:
		return 5
	}
}

func stringSize(n int) int {
	switch {
	case n < 32:
		return 1 + n
	case n < 1<<16:
		return 3 + n
	default:
		return 5 + n
	}
}

func intSize(i int64) int {
	switch {
	case i > math.MaxInt32 || i < math.MinInt32:
		return 9
	case i > math.MaxInt16 || i < math.MinInt16:
		return 5
	case i > math.MaxInt8 || i < math.MinInt8:
		return 3
	case i >= -32: // a fixint, positive or negative
		return 1
	default:
		return 2
	}
}

func uintSize(u uint64) int {
	switch {
	case u <= mpPosFixIntMax:
		return 1
	case u <= math.MaxUint8:
		return 2
	case u <= math.MaxUint16:
		return 3
	case u <= math.MaxUint32:
		return 5
	default:
		return 9
	}
}

// appendString appends s as go-msgpack writes a string without WriteExt
// (the handle's default, with which the format was defined): the old
// spec's raw, fixstr or str16/str32, never str8.
func appendString(b []byte, s string) []byte {
	return append(appendStrLen(b, len(s)), s...)
}

// appendStrLen appends the header of a string of n bytes, as appendString
// writes it: go-msgpack writes a []byte (an ask's entry limits) so too.
func appendStrLen(b []byte, n int) []byte {
	switch {
	case n < 32:
		return append(b, mpFixStr|byte(n))
	case n < 1<<16:
		return append(b, mpStr16, byte(n>>8), byte(n))
	default:
		return binary.BigEndian.AppendUint32(append(b, mpStr32), uint32(n))
	}
}

// appendBool appends v as msgpack's true or false.
func appendBool(b []byte, v bool) []byte {
	if v {
		return append(b, mpTrue)
	}
	return append(b, mpFalse)
}

// appendInt appends i as go-msgpack writes a signed integer: a fixint, or
// the shortest signed form (a positive value too: int16, not uint8).
func appendInt(b []byte, i int64) []byte {
	switch {
	case i > math.MaxInt32:
		return binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(i))
	case i > math.MaxInt16:
		return binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(i))
	case i > math.MaxInt8:
		return append(b, mpInt16, byte(i>>8), byte(i))
	case i >= -32:
		return append(b, byte(i))
	case i >= math.MinInt8:
		return append(b, mpInt8, byte(i))
	case i >= math.MinInt16:
		return append(b, mpInt16, byte(i>>8), byte(i))
	case i >= math.MinInt32:
		return binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(i))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(i))
	}
}

// appendUint appends u as go-msgpack writes an unsigned integer.
func appendUint(b []byte, u uint64) []byte {
	switch {
	case u <= mpPosFixIntMax:
		return append(b, byte(u))
	case u <= math.MaxUint8:
		return append(b, mpUint8, byte(u))
	case u <= math.MaxUint16:
		return append(b, mpUint16, byte(u>>8), byte(u))
	case u <= math.MaxUint32:
		return binary.BigEndian.AppendUint32(append(b, mpUint32), uint32(u))
	default:
		return binary.BigEndian.AppendUint64(append(b, mpUint64), u)
	}
}

// appendMessage appends m's body (what follows the kind byte): the array
// [version, from, sentMs, groups], a group the array [limit, origin,
// keys, starts, counts]. A nil slice is msgpack nil, as go-msgpack writes
// it (a hello's and a heartbeat's groups).
func appendMessage(b []byte, m *message) []byte {
	b = append(b, mpFixArray|4)
	b = appendUint(b, uint64(m.Version))
	b = appendString(b, m.From)
	b = appendInt(b, m.SentMs)
	if m.Groups == nil {
		return append(b, mpNil)
	}
	b = appendArrayLen(b, len(m.Groups))
	for i := range m.Groups {
		g := &m.Groups[i]
		b = append(b, mpFixArray|5)
		b = appendString(b, g.Limit)
		b = appendString(b, g.Origin)
		// Version 2 codes each key against the one before it and writes
		// each start as its age (codec.go, wireVersion).
		coded := m.Version >= wireVersion
		if g.Keys == nil {
			b = append(b, mpNil)
		} else {
			b = appendArrayLen(b, len(g.Keys))
			known := len(g.shared) == len(g.Keys) // measured by the encoder
			for j, k := range g.Keys {
				switch {
				case !coded:
					b = appendString(b, k)
				case known:
					b = appendCodedKey(b, int(g.shared[j]), k)
				case j == 0:
					b = appendCodedKey(b, 0, k)
				default:
					b = appendCodedKey(b, sharedPrefix(g.Keys[j-1], k), k)
				}
			}
		}
		if g.Starts == nil {
			b = append(b, mpNil)
		} else {
			b = appendArrayLen(b, len(g.Starts))
			for _, s := range g.Starts {
				if coded {
					s = m.SentMs - s
				}
				b = appendInt(b, s)
			}
		}
		if g.Counts == nil {
			b = append(b, mpNil)
		} else {
			b = appendArrayLen(b, len(g.Counts))
			for _, c := range g.Counts {
				b = appendUint(b, uint64(c))
			}
		}
	}
	return b
}

// reader reads msgpack values from b at off. Every method checks bounds
// and returns an error rather than panic; after an error the reader is
// not used again.
type reader struct {
	b   []byte
	off int
}

func (r *reader) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: at byte %d: "+format, append([]any{ErrMalformed, r.off + 1}, args...)...)
}

// next returns the n bytes at off and moves past them.
func (r *reader) next(n int) ([]byte, error) {
	if n < 0 || n > len(r.b)-r.off {
		return nil, r.errorf("%d bytes wanted, %d left", n, len(r.b)-r.off)
	}
	p := r.b[r.off : r.off+n : r.off+n]
	r.off += n
	return p, nil
}

// arrayLen reads an array header (fixarray, array16 or array32) or nil,
// which a conforming encoder writes for a nil slice: nil reports -1. Each
// element takes a byte at least, so a length beyond the bytes left is
// refused before anything is allocated for it.
func (r *reader) arrayLen() (int, error) {
	if r.off >= len(r.b) {
		return 0, r.errorf("array expected, end of message")
	}
	c := r.b[r.off]
	r.off++
	var n int
	switch {
	case c&0xf0 == mpFixArray:
		n = int(c & 0x0f)
	case c == mpArray16:
		p, err := r.next(2)
		if err != nil {
			return 0, err
		}
		n = int(binary.BigEndian.Uint16(p))
	case c == mpArray32:
		p, err := r.next(4)
		if err != nil {
			return 0, err
		}
		n = int(binary.BigEndian.Uint32(p))
	case c == mpNil:
		return -1, nil
	default:
		return 0, r.errorf("array expected, format byte 0x%02x", c)
	}
	if n > len(r.b)-r.off {
		return 0, r.errorf("array of %d elements in %d bytes", n, len(r.b)-r.off)
	}
	return n, nil
}

// tuple reads the array header of a struct of n fields: exactly n, as
// this package and go-msgpack write them. A short array (whose missing
// fields go-msgpack would leave as they were), a longer one, a map or nil
// is refused.
func (r *reader) tuple(n int) error {
	if r.off < len(r.b) && r.b[r.off] == mpFixArray|byte(n) {
		r.off++ // the only form this package writes
		return nil
	}
	at := r.off
	got, err := r.arrayLen()
	if err != nil {
		return err
	}
	if got != n {
		r.off = at
		return r.errorf("array of %d fields expected, got %d (-1: nil)", n, got)
	}
	return nil
}

// str reads a string of at most max bytes (str or bin in any width, as
// go-msgpack reads into a string with RawToString) as a string over r.b:
// it aliases the message and is valid only while the message's bytes are
// (see wire.decode). Nil reads as "", which every caller refuses.
func (r *reader) str(max int) (string, error) {
	if r.off >= len(r.b) {
		return "", r.errorf("string expected, end of message")
	}
	c := r.b[r.off]
	r.off++
	var n int
	switch {
	case c&0xe0 == mpFixStr:
		n = int(c & 0x1f)
	case c == mpStr8 || c == mpBin8:
		if r.off >= len(r.b) {
			return "", r.errorf("string length expected, end of message")
		}
		n = int(r.b[r.off])
		r.off++
	case c == mpStr16 || c == mpBin16:
		p, err := r.next(2)
		if err != nil {
			return "", err
		}
		n = int(binary.BigEndian.Uint16(p))
	case c == mpStr32 || c == mpBin32:
		p, err := r.next(4)
		if err != nil {
			return "", err
		}
		n = int(binary.BigEndian.Uint32(p))
	case c == mpNil:
		return "", nil
	default:
		return "", r.errorf("string expected, format byte 0x%02x", c)
	}
	if n > max {
		return "", r.errorf("string of %d bytes, more than %d", n, max)
	}
	if n > len(r.b)-r.off {
		return "", r.errorf("string of %d bytes in %d", n, len(r.b)-r.off)
	}
	if n == 0 {
		return "", nil
	}
	s := unsafe.String(&r.b[r.off], n)
	r.off += n
	return s, nil
}

// int reads an integer in any msgpack form, signed or unsigned, whose
// value fits an int64. Go-msgpack would wrap a uint64 beyond it around to
// a negative value; no conforming encoder writes one for an int64.
func (r *reader) int() (int64, error) {
	if r.off >= len(r.b) {
		return 0, r.errorf("integer expected, end of message")
	}
	c := r.b[r.off]
	if c <= mpPosFixIntMax || c >= mpNegFixIntMin {
		r.off++
		return int64(int8(c)), nil
	}
	switch {
	case c == mpInt16 && len(r.b)-r.off >= 3: // a version 2 start's age, in practice
		v := int64(int16(binary.BigEndian.Uint16(r.b[r.off+1:])))
		r.off += 3
		return v, nil
	case c == mpInt64 && len(r.b)-r.off >= 9: // a version 1 start, in practice
		v := int64(binary.BigEndian.Uint64(r.b[r.off+1:]))
		r.off += 9
		return v, nil
	}
	return r.intSlow()
}

func (r *reader) intSlow() (int64, error) {
	c := r.b[r.off]
	size := 0
	switch c {
	case mpUint8, mpInt8:
		size = 1
	case mpUint16, mpInt16:
		size = 2
	case mpUint32, mpInt32:
		size = 4
	case mpUint64, mpInt64:
		size = 8
	default:
		return 0, r.errorf("integer expected, format byte 0x%02x", c)
	}
	r.off++
	p, err := r.next(size)
	if err != nil {
		return 0, err
	}
	switch c {
	case mpUint8:
		return int64(p[0]), nil
	case mpInt8:
		return int64(int8(p[0])), nil
	case mpUint16:
		return int64(binary.BigEndian.Uint16(p)), nil
	case mpInt16:
		return int64(int16(binary.BigEndian.Uint16(p))), nil
	case mpUint32:
		return int64(binary.BigEndian.Uint32(p)), nil
	case mpInt32:
		return int64(int32(binary.BigEndian.Uint32(p))), nil
	case mpUint64:
		u := binary.BigEndian.Uint64(p)
		if u > math.MaxInt64 {
			r.off -= 9
			return 0, r.errorf("integer %d overflows an int64", u)
		}
		return int64(u), nil
	default: // mpInt64
		return int64(binary.BigEndian.Uint64(p)), nil
	}
}

// uint reads an integer in any msgpack form whose value is in [0, max],
// as go-msgpack reads into an unsigned type of that range.
func (r *reader) uint(max uint64) (uint64, error) {
	if r.off < len(r.b) {
		if c := r.b[r.off]; c <= mpPosFixIntMax && uint64(c) <= max { // a count, in practice
			r.off++
			return uint64(c), nil
		}
	}
	at := r.off
	if r.off < len(r.b) && r.b[r.off] == mpUint64 {
		// An int64 cannot hold all of them: read it as it is.
		r.off++
		p, err := r.next(8)
		if err != nil {
			return 0, err
		}
		if u := binary.BigEndian.Uint64(p); u <= max {
			return u, nil
		}
		r.off = at
		return 0, r.errorf("integer out of [0, %d]", max)
	}
	v, err := r.int()
	if err != nil {
		return 0, err
	}
	if v < 0 || uint64(v) > max {
		r.off = at
		return 0, r.errorf("integer %d out of [0, %d]", v, max)
	}
	return uint64(v), nil
}

// bool reads msgpack's true or false. Go-msgpack also reads the integers
// 0 and 1 as a bool; no encoder writes a Go bool so, and they are refused.
func (r *reader) bool() (bool, error) {
	if r.off >= len(r.b) {
		return false, r.errorf("bool expected, end of message")
	}
	switch c := r.b[r.off]; c {
	case mpFalse, mpTrue:
		r.off++
		return c == mpTrue, nil
	default:
		return false, r.errorf("bool expected, format byte 0x%02x", c)
	}
}

// bytes reads a []byte of at most max bytes in every form go-msgpack
// reads one from: str or bin in any width (which the result aliases, as
// str's does), an array of integers in [0, 255] (appended to dst[:0]), or
// nil (nil).
func (r *reader) bytes(dst []byte, max int) ([]byte, error) {
	if r.off >= len(r.b) {
		return nil, r.errorf("bytes expected, end of message")
	}
	c := r.b[r.off]
	if c&0xf0 != mpFixArray && c != mpArray16 && c != mpArray32 {
		if c == mpNil {
			r.off++
			return nil, nil
		}
		s, err := r.str(max)
		if err != nil {
			return nil, err
		}
		return r.b[r.off-len(s) : r.off : r.off], nil // s's bytes, just read
	}
	n, err := r.arrayLen()
	if err != nil {
		return nil, err
	}
	if n > max {
		return nil, r.errorf("%d bytes, more than %d", n, max)
	}
	dst = dst[:0]
	for range n {
		v, err := r.uint(math.MaxUint8)
		if err != nil {
			return nil, err
		}
		dst = append(dst, byte(v))
	}
	return dst, nil
}
