package engine

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// The sync kinds' codec (msgpack.go) is held to go-msgpack, with which the
// format was defined and which peers of the previous release decode with:
// the same bytes out, and the same messages in from every encoding a
// conforming encoder could write. go-msgpack is the oracle here and in no
// other part of the sync path.

// oracleDecode is the decoder of the sync kinds before msgpack.go:
// go-msgpack's reflective one into a message, then the same checks.
func oracleDecode(b []byte, lim DecodeLimits) (kind byte, m message, err error) {
	if len(b) > lim.MaxMessageBytes || len(b) < 2 {
		return 0, m, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	kind = b[0]
	if kind != kindDelta && kind != kindState && kind != kindHello {
		return 0, m, fmt.Errorf("%w: unknown kind %q", ErrMalformed, kind)
	}
	defer func() {
		if r := recover(); r != nil {
			kind, m, err = 0, message{}, fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	if err := codec.NewDecoderBytes(b[1:], newHandle(1024)).Decode(&m); err != nil {
		return 0, m, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Version != wireVersionPlain && m.Version != wireVersion {
		return 0, m, fmt.Errorf("%w: version %d", ErrVersion, m.Version)
	}
	if m.Version == wireVersion {
		if err := oracleExpand(&m, lim); err != nil {
			return 0, m, err
		}
	}
	if m.From == "" || len(m.From) > lim.MaxNameBytes {
		return 0, m, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	}
	n := 0
	for _, g := range m.Groups {
		switch {
		case len(g.Limit) == 0 || len(g.Limit) > lim.MaxNameBytes || len(g.Origin) == 0 || len(g.Origin) > lim.MaxNameBytes:
			return 0, m, fmt.Errorf("%w: limit or origin name out of bounds", ErrMalformed)
		case len(g.Keys) != len(g.Starts) || len(g.Keys) != len(g.Counts):
			return 0, m, fmt.Errorf("%w: columns differ", ErrMalformed)
		}
		for _, k := range g.Keys {
			if k == "" || len(k) > lim.MaxKeyBytes {
				return 0, m, fmt.Errorf("%w: key of %d bytes", ErrMalformed, len(k))
			}
		}
		if n += len(g.Keys); n > lim.MaxEntries {
			return 0, m, fmt.Errorf("%w: more than %d entries", ErrMalformed, lim.MaxEntries)
		}
	}
	return kind, m, nil
}

// oracleExpand turns the columns of a version 2 message as go-msgpack
// read them (each key coded against the one before it, each start an
// age: codec.go, wireVersion) into its keys and starts, with the checks
// version 2 adds: a coded key has its prefix's byte, a group's first key
// shares nothing, no key shares more than the previous key has, and no
// rebuilt key is empty or longer than lim.MaxKeyBytes.
func oracleExpand(m *message, lim DecodeLimits) error {
	for gi := range m.Groups {
		g := &m.Groups[gi]
		if len(g.Keys) != len(g.Starts) {
			return nil // refused by the caller's column check
		}
		prev := ""
		for i, k := range g.Keys {
			if len(k) == 0 || len(k) > lim.MaxKeyBytes+1 {
				return fmt.Errorf("%w: coded key of %d bytes", ErrMalformed, len(k))
			}
			p := int(k[0])
			if p > len(prev) {
				return fmt.Errorf("%w: key shares %d bytes of %d", ErrMalformed, p, len(prev))
			}
			g.Keys[i] = prev[:p] + k[1:]
			prev = g.Keys[i]
			g.Starts[i] = m.SentMs - g.Starts[i]
		}
	}
	return nil
}

// oracleCode is m as version 2 puts it on the wire, for go-msgpack to
// write: every key coded against the one before it (the longest shared
// prefix, at most 255 bytes), every start its age; m itself if it is of
// version 1. It is oracleExpand's inverse.
func oracleCode(m *message) *message {
	if m.Version != wireVersion {
		return m
	}
	c := *m
	c.Groups = slices.Clone(m.Groups)
	for gi := range c.Groups {
		g := &c.Groups[gi]
		if g.Keys != nil {
			keys := make([]string, len(g.Keys))
			prev := ""
			for i, k := range g.Keys {
				p := 0
				for p < min(len(prev), len(k), 255) && prev[p] == k[p] {
					p++
				}
				keys[i], prev = string([]byte{byte(p)})+k[p:], k
			}
			g.Keys = keys
		}
		if g.Starts != nil {
			starts := make([]int64, len(g.Starts))
			for i, st := range g.Starts {
				starts[i] = m.SentMs - st
			}
			g.Starts = starts
		}
	}
	return &c
}

// oracleEncode is go-msgpack's encoding of m after kind.
func oracleEncode(t testing.TB, kind byte, m *message) []byte {
	t.Helper()
	var body []byte // the encoder writes from the start of its buffer
	if err := codec.NewEncoderBytes(&body, newHandle(1024)).Encode(oracleCode(m)); err != nil {
		t.Fatal(err)
	}
	return append([]byte{kind}, body...)
}

// decodeSchemaless decodes b's body (after its kind byte) as go-msgpack
// reads it without a schema, and reports whether it is one value exactly.
// It decodes from the bytes rather than from a reader: go-msgpack's reader
// allocates what a length prefix claims before it finds the input short
// (a 12-byte fuzz input claiming a 4 GB ext took seconds and gigabytes, and
// the fuzzer gave up on it), where decoding from bytes checks the claim
// against what is there first.
func decodeSchemaless(b []byte) (any, bool) {
	if len(b) < 2 {
		return nil, false
	}
	var v any
	d := codec.NewDecoderBytes(b[1:], newHandle(1024))
	if err := d.Decode(&v); err != nil || d.NumBytesRead() != len(b)-1 {
		return nil, false
	}
	return v, true
}

// wellFormed reports whether b's body is, in msgpack's own terms (read
// schema-less by go-msgpack), exactly the message schema: an array of
// [uint8, string, int64, nil or groups], a group an array of [string,
// string, nil or strings, nil or int64s, nil or uint32s], every integer
// in its type's range whatever its width, nothing after it. That is what
// a conforming encoder writes; the new decoder must accept all of it that
// go-msgpack accepts, and nothing else.
func wellFormed(b []byte) bool {
	v, ok := decodeSchemaless(b)
	if !ok {
		return false
	}
	isInt := func(v any, lo, hi int64) bool {
		switch x := v.(type) {
		case int64:
			return x >= lo && x <= hi
		case uint64:
			return hi >= 0 && x <= uint64(hi)
		}
		return false
	}
	isStr := func(v any) bool { _, ok := v.(string); return ok }
	column := func(v any, elem func(any) bool) bool {
		if v == nil {
			return true
		}
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range a {
			if !elem(e) {
				return false
			}
		}
		return true
	}
	m, ok := v.([]any)
	if !ok || len(m) != 4 || !isInt(m[0], 0, math.MaxUint8) || !isStr(m[1]) || !isInt(m[2], math.MinInt64, math.MaxInt64) {
		return false
	}
	return column(m[3], func(v any) bool {
		g, ok := v.([]any)
		return ok && len(g) == 5 && isStr(g[0]) && isStr(g[1]) &&
			column(g[2], isStr) &&
			column(g[3], func(v any) bool { return isInt(v, math.MinInt64, math.MaxInt64) }) &&
			column(g[4], func(v any) bool { return isInt(v, 0, math.MaxUint32) })
	})
}

// sameMessage reports how a and b differ, or "".
func sameMessage(a, b message) string {
	if a.Version != b.Version || a.From != b.From || a.SentMs != b.SentMs || len(a.Groups) != len(b.Groups) {
		return fmt.Sprintf("v%d %q at %d with %d groups, v%d %q at %d with %d groups", a.Version, a.From, a.SentMs, len(a.Groups), b.Version, b.From, b.SentMs, len(b.Groups))
	}
	for i := range a.Groups {
		g, h := a.Groups[i], b.Groups[i]
		if g.Limit != h.Limit || g.Origin != h.Origin || !slices.Equal(g.Keys, h.Keys) || !slices.Equal(g.Starts, h.Starts) || !slices.Equal(g.Counts, h.Counts) {
			return fmt.Sprintf("group %d: %+v, %+v", i, g, h)
		}
	}
	return ""
}

// tightLimits make every decode limit reachable by small inputs.
func tightLimits() DecodeLimits {
	return DecodeLimits{MaxMessageBytes: 4096, MaxEntries: 6, MaxKeyBytes: 40, MaxNameBytes: 300}
}

// checkAgainstOracle decodes b with the new decoder and the oracle under
// lim: the new one accepts exactly the well-formed inputs the oracle
// accepts, into the same message, and encodes what it accepts as
// go-msgpack does.
func checkAgainstOracle(t *testing.T, b []byte, lim DecodeLimits) {
	t.Helper()
	kind, got, err := decode(nil, b, lim)
	wkind, want, werr := oracleDecode(b, lim)
	switch {
	case err == nil && werr != nil:
		t.Fatalf("accepted what go-msgpack refuses (%v): %x", werr, b)
	case err == nil && !wellFormed(b):
		t.Fatalf("accepted an input outside the schema: %x", b)
	case err != nil && werr == nil && wellFormed(b):
		t.Fatalf("refused a well-formed message go-msgpack accepts: %v: %x", err, b)
	case err != nil:
		return
	}
	if kind != wkind {
		t.Fatalf("kind %q, go-msgpack %q", kind, wkind)
	}
	if d := sameMessage(got, want); d != "" {
		t.Fatalf("decoded differently from go-msgpack: %s\n%x", d, b)
	}
	// And the same message encodes as go-msgpack encodes it (nil slices
	// included: go-msgpack decodes nil as nil, an empty array as empty).
	enc, err := newWire(nil).encode(kind, want)
	if err != nil {
		t.Fatal(err)
	}
	if wantEnc := oracleEncode(t, kind, &want); !bytes.Equal(enc, wantEnc) {
		t.Fatalf("encodes %x, go-msgpack %x", enc, wantEnc)
	}
}

// FuzzDecodeMatchesMsgpack holds the decoder to go-msgpack on any input:
// it accepts exactly the well-formed ones the oracle accepts, decodes them
// to the same message, and encodes that message to go-msgpack's bytes.
// Seeded with FuzzDecode's corpus and with messages written in every
// width a conforming encoder may choose.
func FuzzDecodeMatchesMsgpack(f *testing.F) {
	for _, b := range fuzzCorpus(f, "FuzzDecode") {
		f.Add(b)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	for range 64 {
		m := randomMessage(rng, tightLimits())
		f.Add(wideEncode(rng, kindDelta, &m))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkAgainstOracle(t, b, DefaultDecodeLimits())
		checkAgainstOracle(t, b, tightLimits())
	})
}

// TestCodecMatchesMsgpack: random messages encode to go-msgpack's bytes,
// and every encoding of them a conforming encoder could write (each
// length, string and integer in any width that holds it, str or bin, nil
// or an empty array for an empty column) decodes, with either decoder, to
// the message.
func TestCodecMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	lim := DefaultDecodeLimits()
	lim.MaxKeyBytes = 70_000 // keys of str32 and bin32 length too
	lim.MaxMessageBytes = 1 << 22
	w := newWire(nil)
	for i := range 3000 {
		kind := []byte{kindDelta, kindState, kindHello}[i%3]
		m := randomMessage(rng, lim)
		enc, err := w.encode(kind, m)
		if err != nil {
			t.Fatal(err)
		}
		if want := oracleEncode(t, kind, &m); !bytes.Equal(enc, want) {
			t.Fatalf("message %d encodes as\n%x\ngo-msgpack\n%x", i, enc, want)
		}
		for _, b := range [][]byte{enc, wideEncode(rng, kind, &m)} {
			k, got, err := w.decode(b, lim)
			if err != nil || k != kind {
				t.Fatalf("message %d: %v (kind %q): %x", i, err, k, b)
			}
			if d := sameMessage(*got, m); d != "" {
				t.Fatalf("message %d decodes differently: %s", i, d)
			}
			_, want, err := oracleDecode(b, lim)
			if err != nil {
				t.Fatalf("message %d: go-msgpack refuses it: %v", i, err)
			}
			if d := sameMessage(want, m); d != "" {
				t.Fatalf("message %d: go-msgpack decodes it differently: %s", i, d)
			}
			if !wellFormed(b) {
				t.Fatalf("message %d: a conforming encoding is not wellFormed: %x", i, b)
			}
		}
	}
}

// randomMessage returns a valid message within lim, with nil and empty
// columns, names and keys of every string width up to lim's, and integers
// of every width.
func randomMessage(rng *rand.Rand, lim DecodeLimits) message {
	str := func(max int) string {
		n := []int{1, 1 + rng.IntN(31), 32 + rng.IntN(224), 256 + rng.IntN(1000), 65536 + rng.IntN(100)}[rng.IntN(5)]
		if n > max {
			n = 1 + rng.IntN(max)
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.IntN(256))
		}
		return string(b)
	}
	ints := []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769, 65535, 65536,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1,
		math.MaxInt64, math.MinInt64, 1_800_000_000_000}
	anInt := func() int64 {
		if rng.IntN(2) == 0 {
			return ints[rng.IntN(len(ints))]
		}
		return int64(rng.Uint64()) >> rng.IntN(64)
	}
	m := message{Version: []uint8{wireVersionPlain, wireVersion}[rng.IntN(2)], From: str(lim.MaxNameBytes), SentMs: anInt()}
	if rng.IntN(4) == 0 {
		if rng.IntN(2) == 0 {
			m.Groups = []group{}
		}
		return m
	}
	left := min(lim.MaxEntries, 40)
	for range 1 + rng.IntN(4) {
		g := group{Limit: str(lim.MaxNameBytes), Origin: str(lim.MaxNameBytes)}
		n := rng.IntN(left + 1)
		if big := rng.IntN(40) == 0 && left >= 20; big {
			n = left // array16 columns: 16 or more
		}
		left -= n
		if n > 0 || rng.IntN(2) == 0 {
			g.Keys, g.Starts, g.Counts = []string{}, []int64{}, []uint32{}
		}
		for range n {
			k := str(min(lim.MaxKeyBytes, 300))
			if last := len(g.Keys) - 1; last >= 0 && rng.IntN(2) == 0 {
				// A key sharing a prefix with the one before it, as a
				// tick's keys of one form do (coded in version 2), at
				// times past the 255 bytes a coded key can state, or all
				// of it: the same key again.
				prev := g.Keys[last]
				k = prev[:rng.IntN(len(prev)+1)] + k[:rng.IntN(len(k)+1)]
				if k == "" || len(k) > lim.MaxKeyBytes {
					k = prev
				}
			}
			g.Keys = append(g.Keys, k)
			g.Starts = append(g.Starts, anInt())
			g.Counts = append(g.Counts, uint32(uint64(anInt())))
		}
		m.Groups = append(m.Groups, g)
	}
	if rng.IntN(20) == 0 && lim.MaxKeyBytes >= 65536 {
		g := &m.Groups[0]
		g.Keys = append(g.Keys, str(lim.MaxKeyBytes)) // maybe str32
		g.Starts, g.Counts = append(g.Starts, 1), append(g.Counts, 1)
	}
	return m
}

// wideEncode writes kind and m as a conforming msgpack encoder could: each
// array length, string and integer in a width chosen at random among those
// that hold it (a string as str or bin), an empty column as nil or an
// empty array.
func wideEncode(rng *rand.Rand, kind byte, m *message) []byte {
	m = oracleCode(m)
	b := []byte{kind}
	arr := func(n int, isNil bool) {
		if isNil || n == 0 && rng.IntN(4) == 0 {
			b = append(b, mpNil)
			return
		}
		switch c := rng.IntN(3); {
		case c == 0 && n < 16:
			b = append(b, mpFixArray|byte(n))
		case c <= 1 && n < 1<<16:
			b = binary.BigEndian.AppendUint16(append(b, mpArray16), uint16(n))
		default:
			b = binary.BigEndian.AppendUint32(append(b, mpArray32), uint32(n))
		}
	}
	str := func(s string) {
		n := len(s)
		for {
			switch c := rng.IntN(7); {
			case c == 0 && n < 32:
				b = append(b, mpFixStr|byte(n))
			case c == 1 && n < 256:
				b = append(b, mpStr8, byte(n))
			case c == 2 && n < 256:
				b = append(b, mpBin8, byte(n))
			case c == 3 && n < 1<<16:
				b = binary.BigEndian.AppendUint16(append(b, mpStr16), uint16(n))
			case c == 4 && n < 1<<16:
				b = binary.BigEndian.AppendUint16(append(b, mpBin16), uint16(n))
			case c == 5:
				b = binary.BigEndian.AppendUint32(append(b, mpStr32), uint32(n))
			case c == 6:
				b = binary.BigEndian.AppendUint32(append(b, mpBin32), uint32(n))
			default:
				continue
			}
			b = append(b, s...)
			return
		}
	}
	integer := func(v int64) {
		for {
			switch c := rng.IntN(9); {
			case c == 0 && v >= -32 && v <= 127:
				b = append(b, byte(v))
			case c == 1 && v >= 0 && v <= math.MaxUint8:
				b = append(b, mpUint8, byte(v))
			case c == 2 && v >= 0 && v <= math.MaxUint16:
				b = binary.BigEndian.AppendUint16(append(b, mpUint16), uint16(v))
			case c == 3 && v >= 0 && v <= math.MaxUint32:
				b = binary.BigEndian.AppendUint32(append(b, mpUint32), uint32(v))
			case c == 4 && v >= 0:
				b = binary.BigEndian.AppendUint64(append(b, mpUint64), uint64(v))
			case c == 5 && v >= math.MinInt8 && v <= math.MaxInt8:
				b = append(b, mpInt8, byte(v))
			case c == 6 && v >= math.MinInt16 && v <= math.MaxInt16:
				b = binary.BigEndian.AppendUint16(append(b, mpInt16), uint16(v))
			case c == 7 && v >= math.MinInt32 && v <= math.MaxInt32:
				b = binary.BigEndian.AppendUint32(append(b, mpInt32), uint32(v))
			case c == 8:
				b = binary.BigEndian.AppendUint64(append(b, mpInt64), uint64(v))
			default:
				continue
			}
			return
		}
	}
	arr(4, false)
	integer(int64(m.Version))
	str(m.From)
	integer(m.SentMs)
	arr(len(m.Groups), m.Groups == nil)
	for _, g := range m.Groups {
		arr(5, false)
		str(g.Limit)
		str(g.Origin)
		arr(len(g.Keys), g.Keys == nil)
		for _, k := range g.Keys {
			str(k)
		}
		arr(len(g.Starts), g.Starts == nil)
		for _, s := range g.Starts {
			integer(s)
		}
		arr(len(g.Counts), g.Counts == nil)
		for _, c := range g.Counts {
			integer(int64(c))
		}
	}
	return b
}

// fuzzCorpus reads the inputs of a fuzz target's corpus under testdata/fuzz.
func fuzzCorpus(t testing.TB, target string) [][]byte {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("corpus of %s: %v, %d files", target, err, len(paths))
	}
	var out [][]byte
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "[]byte(") {
				continue // the header, "go test fuzz v1"
			}
			s, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(line, "[]byte("), ")"))
			if err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			out = append(out, []byte(s))
		}
		f.Close()
	}
	return out
}

// TestDecodeRefusesOutsideTheSchema: what go-msgpack took and the new
// decoder refuses, each on purpose, and what both refuse. No encoder of
// this format writes any of it, so no peer's message is lost.
func TestDecodeRefusesOutsideTheSchema(t *testing.T) {
	h := newHandle(1024)
	body := func(v any) []byte {
		var out []byte
		if err := codec.NewEncoderBytes(&out, h).Encode(v); err != nil {
			t.Fatal(err)
		}
		return append([]byte{kindDelta}, out...)
	}
	good := body(&message{Version: wireVersionPlain, From: "n1", SentMs: 5, Groups: []group{{Limit: "l", Origin: "n1", Keys: []string{"k"}, Starts: []int64{1}, Counts: []uint32{2}}}})
	for _, tc := range []struct {
		name   string
		b      []byte
		oracle bool // go-msgpack (and the checks after it) accepted it
	}{
		{"a group as a map of its fields", body([]any{wireVersionPlain, "n1", 5, []any{map[string]any{"Limit": "l", "Origin": "n1", "Keys": []string{"k"}, "Starts": []int64{1}, "Counts": []uint32{2}}}}), true},
		{"the message as a map", body(map[string]any{"Version": wireVersionPlain, "From": "n1"}), true},
		{"a short message: no send time, no groups", []byte("D\x92\x01\xa2n9"), true},
		{"a message of five fields", body([]any{wireVersionPlain, "n1", 5, nil, "more"}), true},
		{"a short group", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1"}}}), true},
		{"bytes after the message", append(slices.Clip(good), 0xc0), true},
		{"nil for the send time", body([]any{wireVersionPlain, "n1", nil, nil}), true},
		{"a start beyond int64, as uint64", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{"k"}, []uint64{math.MaxInt64 + 1}, []uint32{2}}}}), true},
		{"a float for a count", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{"k"}, []int64{1}, []float64{2}}}}), false},
		{"a negative count", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{"k"}, []int64{1}, []int64{-2}}}}), false},
		{"a count beyond uint32", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{"k"}, []int64{1}, []uint64{math.MaxUint32 + 1}}}}), false},
		{"version 3", body([]any{3, "n1", 5, nil}), false},
		{"version 2: a group's first key sharing a prefix", body([]any{wireVersion, "n1", 5, []any{[]any{"l", "n1", []string{"\x01k"}, []int64{1}, []uint32{2}}}}), false},
		{"version 2: a key sharing more than the key before it has", body([]any{wireVersion, "n1", 5, []any{[]any{"l", "n1", []string{"\x00k", "\x02j"}, []int64{1, 1}, []uint32{2, 2}}}}), false},
		{"version 2: a coded key without its prefix's byte", body([]any{wireVersion, "n1", 5, []any{[]any{"l", "n1", []string{""}, []int64{1}, []uint32{2}}}}), false},
		{"version 2: a key rebuilt empty", body([]any{wireVersion, "n1", 5, []any{[]any{"l", "n1", []string{"\x00"}, []int64{1}, []uint32{2}}}}), false},
		{"version 2: a key rebuilt longer than MaxKeyBytes", body([]any{wireVersion, "n1", 5, []any{[]any{"l", "n1",
			[]string{"\x00" + strings.Repeat("k", DefaultDecodeLimits().MaxKeyBytes), "\x01" + strings.Repeat("k", DefaultDecodeLimits().MaxKeyBytes)}, []int64{1, 1}, []uint32{2, 2}}}}), false},
		{"a key column longer than the message", []byte("D\x94\x01\xa2n1\x05\x91\x95\xa1l\xa2n1\xdd\xff\xff\xff\xff\xa1k"), false},
		{"columns of different lengths", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{"k", "j"}, []int64{1}, []uint32{2, 3}}}}), false},
		{"an empty key", body([]any{wireVersionPlain, "n1", 5, []any{[]any{"l", "n1", []string{""}, []int64{1}, []uint32{2}}}}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, werr := oracleDecode(tc.b, DefaultDecodeLimits())
			if (werr == nil) != tc.oracle {
				t.Fatalf("go-msgpack: %v, want accepted %v", werr, tc.oracle)
			}
			if _, m, err := decode(nil, tc.b, DefaultDecodeLimits()); err == nil {
				t.Fatalf("accepted: %+v", m)
			}
			if tc.oracle && wellFormed(tc.b) {
				// Then FuzzDecodeMatchesMsgpack would demand it be accepted.
				t.Fatal("wellFormed says it is in the schema")
			}
		})
	}
	// Every prefix of a message is refused by both, none panics.
	for n := range len(good) {
		if _, _, err := decode(nil, good[:n], DefaultDecodeLimits()); err == nil {
			t.Fatalf("a message cut at %d bytes accepted", n)
		}
	}
	if _, _, err := decode(nil, good, DefaultDecodeLimits()); err != nil {
		t.Fatal(err)
	}
}

// codecEntries returns a tick's worth of changes as the design load makes
// them: perTick keys of "client-NNNNNN" in one limit, counted here.
func codecEntries(perTick int) []counter.Entry {
	rng := rand.New(rand.NewPCG(3, 4))
	es := make([]counter.Entry, perTick)
	for i := range es {
		es[i] = counter.Entry{Limit: "default|60000|12", Origin: "n2", Key: "client-" + strconv.Itoa(100000+rng.IntN(200_000)),
			Start: 1_800_000_000_000 + int64(rng.IntN(60_000)), Count: uint32(1 + rng.IntN(3))}
	}
	return es
}

// TestCodecAllocs: in steady state decoding allocates nothing, however
// many entries (the strings alias the message, the columns are reused),
// and encoding allocates the messages it returns and nothing per entry.
func TestCodecAllocs(t *testing.T) {
	es := codecEntries(1000)
	w := newWire(nil)
	msgs, err := w.encodeEntries(kindDelta, wireVersion, "n2", 1_800_000_000_123, es, DefaultDatagramBytes)
	if err != nil || len(msgs) < 10 {
		t.Fatalf("%d messages, %v", len(msgs), err)
	}
	lim := DefaultDecodeLimits()
	decodeAll := func() {
		for _, b := range msgs {
			if _, m, err := w.decode(b, lim); err != nil {
				t.Fatal(err)
			} else {
				w.entries = m.entries(w.entries[:0])
			}
			w.release()
		}
	}
	if a := testing.AllocsPerRun(20, decodeAll); a != 0 {
		t.Errorf("decoding %d messages of %d entries: %v allocations, want 0", len(msgs), len(es), a)
	}
	// The messages, and the list of them growing.
	want := float64(len(msgs) + bitsLen(len(msgs)) + 1)
	if a := testing.AllocsPerRun(20, func() {
		if _, err := w.encodeEntries(kindDelta, wireVersion, "n2", 1_800_000_000_123, es, DefaultDatagramBytes); err != nil {
			t.Fatal(err)
		}
	}); a > want {
		t.Errorf("encoding %d entries into %d messages: %v allocations, want at most %v", len(es), len(msgs), a, want)
	}
}

func bitsLen(n int) int {
	k := 0
	for ; n > 0; n >>= 1 {
		k++
	}
	return k
}

// TestReceiveAllocs: Receive of a message whose entries the counter knows
// already (a re-sent slice, anti-entropy) allocates nothing: the decode
// does not, the sender's name is copied once, and Merge changes nothing.
func TestReceiveAllocs(t *testing.T) {
	a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
	up(t, 0, a, b)
	for i := range 100 {
		a.hit(t, 10, fmt.Sprint("client-", i), 1+i%3)
	}
	out, err := a.e.Tick(at(200))
	if err != nil {
		t.Fatal(err)
	}
	msgs := msgsTo(out, "b")
	deliver(t, b, at(200), msgs)
	receive := func() {
		for _, m := range msgs {
			if _, err := b.e.Receive(at(200), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	entries := 0
	if raceEnabled {
		// The race detector's sync.Pool drops a share of what is put back
		// at random (the engine's wires, the counter's merge scratch), and
		// what is made anew allocates: a few allocations a call there,
		// never one an entry. What Receive does with the wire it gets is
		// measured, with one wire held throughout, against the entries.
		w := newWire(b.e.h)
		for _, m := range msgs {
			_, dm, err := w.decode(m, b.e.cfg.Limits)
			if err != nil {
				t.Fatal(err)
			}
			entries += len(dm.entries(nil))
		}
		receive = func() {
			for _, m := range msgs {
				_, dm, err := w.decode(m, b.e.cfg.Limits)
				if err != nil {
					t.Fatal(err)
				}
				w.entries = dm.entries(w.entries[:0])
				b.c.Merge(at(200), w.entries)
				w.release()
			}
		}
	}
	n := testing.AllocsPerRun(20, receive)
	switch {
	case raceEnabled && n > float64(entries)/4:
		t.Errorf("receiving %d known messages of %d entries with -race: %v allocations, want well under one an entry", len(msgs), entries, n)
	case !raceEnabled && n != 0:
		t.Errorf("receiving %d known messages: %v allocations, want 0", len(msgs), n)
	}
}

// BenchmarkCodec measures the sync codec alone, no counter: a tick's 1,000
// changes encoded into datagrams and decoded back to entries.
//
//	go test ./cluster/engine -run '^$' -bench Codec -benchmem
func BenchmarkCodec(b *testing.B) {
	es := codecEntries(1000)
	enc, dec := newWire(nil), newWire(nil)
	lim := DefaultDecodeLimits()
	b.ReportAllocs()
	for b.Loop() {
		msgs, err := enc.encodeEntries(kindDelta, wireVersion, "n2", 1_800_000_000_123, es, DefaultDatagramBytes)
		if err != nil {
			b.Fatal(err)
		}
		for _, m := range msgs {
			_, d, err := dec.decode(m, lim)
			if err != nil {
				b.Fatal(err)
			}
			dec.entries = d.entries(dec.entries[:0])
			dec.release()
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(es)), "ns/entry")
}
