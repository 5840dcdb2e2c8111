package engine

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// The coordination codec (askcodec.go, askcodec_decode.go) is held to
// go-msgpack (askcodec_reflect_test.go) as the sync kinds' is
// (codec_test.go): the same bytes out, and the same asks, answers and
// releases in from every encoding a conforming encoder could write.

// coordField is the type of a field of a coordination message.
type coordField int

const (
	fUint8 coordField = iota
	fUint32
	fUint64
	fInt64
	fString
	fBool
	fStrings
	fInt64s
	fUint32s
	fBools
	fBytes // a []uint8: str, bin, an array of integers, or nil
)

// askLayout is the fields of a version 5 ask; versions 2, 3 and 4 are
// its first 13, 15 and 16.
func askLayout() []coordField {
	return []coordField{fUint8, fString, fInt64, fUint64, fString, fInt64, fStrings, fInt64s, fUint32s, fBytes, fInt64s, fUint32s, fUint64, fInt64, fUint32, fInt64s, fInt64}
}

// answerLayout is the fields of a version 3 answer; version 2 is its
// first 13.
func answerLayout() []coordField {
	return []coordField{fUint8, fString, fInt64, fUint64, fUint8, fBool, fBools, fInt64s, fInt64s, fInt64s, fInt64s, fInt64s, fInt64s, fInt64s, fUint32}
}

func releaseLayout() []coordField {
	return []coordField{fUint8, fString, fInt64, fUint64, fString, fStrings}
}

// coordSchema is the layouts a decoder reads: a full layout cut at each
// of the field counts.
type coordSchema struct {
	fields []coordField
	counts []int
}

func askSchema() coordSchema {
	return coordSchema{askLayout(), []int{askFieldsV2, askFieldsV3, askFieldsV4, askFieldsV5}}
}
func answerSchema() coordSchema {
	return coordSchema{answerLayout(), []int{answerFieldsV2, answerFields}}
}
func releaseSchema() coordSchema { return coordSchema{releaseLayout(), []int{releaseFields}} }

// schemaless decodes b's body as go-msgpack reads it without a schema,
// or reports false if it is not one value exactly.
func schemaless(b []byte) ([]any, bool) {
	v, ok := decodeSchemaless(b)
	if !ok {
		return nil, false
	}
	fields, ok := v.([]any)
	return fields, ok
}

// wellFormed reports whether b's body is, in msgpack's own terms, one of
// s's layouts: an array of one of its field counts, each field of its
// type (an integer in its type's range in any width, a string as str or
// bin, a column as an array or nil), nothing after it. That is what a
// conforming encoder writes; the decoders must accept all of it that
// go-msgpack accepts, and nothing else.
func (s coordSchema) wellFormed(b []byte) bool {
	fields, ok := schemaless(b)
	if !ok || !slices.Contains(s.counts, len(fields)) {
		return false
	}
	for i, v := range fields {
		if !fieldIs(s.fields[i], v) {
			return false
		}
	}
	return true
}

func fieldIs(f coordField, v any) bool {
	isInt := func(v any, lo, hi int64) bool {
		switch x := v.(type) {
		case int64:
			return x >= lo && x <= hi
		case uint64:
			return hi >= 0 && x <= uint64(hi)
		}
		return false
	}
	column := func(v any, elem coordField) bool {
		if v == nil {
			return true
		}
		a, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range a {
			if !fieldIs(elem, e) {
				return false
			}
		}
		return true
	}
	switch f {
	case fUint8:
		return isInt(v, 0, math.MaxUint8)
	case fUint32:
		return isInt(v, 0, math.MaxUint32)
	case fUint64:
		_, u := v.(uint64)
		return u || isInt(v, 0, math.MaxInt64)
	case fInt64:
		return isInt(v, math.MinInt64, math.MaxInt64)
	case fString:
		_, ok := v.(string)
		return ok
	case fBool:
		_, ok := v.(bool)
		return ok
	case fStrings:
		return column(v, fString)
	case fInt64s:
		return column(v, fInt64)
	case fUint32s:
		return column(v, fUint32)
	case fBools:
		return column(v, fBool)
	default: // fBytes
		_, ok := v.(string)
		return ok || column(v, fUint8)
	}
}

// sameAsk reports how two decoded asks differ, or "" (an empty column and
// nil are the same).
func sameAsk(a, b *counter.Ask) string {
	if a.Key != b.Key || a.Hits != b.Hits || a.Settled != b.Settled || a.Want != b.Want || a.Gen != b.Gen || a.Lead != b.Lead ||
		!slices.Equal(a.Limits, b.Limits) || !slices.Equal(a.Max, b.Max) || !slices.Equal(a.Preds, b.Preds) || !slices.Equal(a.Entries, b.Entries) {
		return fmt.Sprintf("%+v\n%+v", *a, *b)
	}
	return ""
}

func sameAnswer(a, b Answer) string {
	if a.From != b.From || a.ID != b.ID || a.SentMs != b.SentMs || a.Decided != b.Decided || a.Allowed != b.Allowed || !slices.Equal(a.Results, b.Results) {
		return fmt.Sprintf("%+v\n%+v", a, b)
	}
	return ""
}

func sameRelease(a decodedRelease, b releaseMsg) string {
	if a.Version != b.Version || a.From != b.From || a.SentMs != b.SentMs || a.ID != b.ID || a.Key != b.Key || !slices.Equal(a.Limits, b.Limits) {
		return fmt.Sprintf("%+v\n%+v", a, b)
	}
	return ""
}

// judge compares the verdicts of a decoder (err) and of its oracle (werr)
// on b, of schema s: the decoder accepts only what the oracle accepts and
// is well-formed, refuses nothing well-formed that the oracle accepts,
// and refuses a well-formed message as the oracle does (ErrVersion or
// ErrMalformed). It reports whether both accepted.
func judge(t *testing.T, what string, s coordSchema, b []byte, err, werr error) bool {
	t.Helper()
	wf := s.wellFormed(b)
	switch {
	case err == nil && werr != nil:
		t.Fatalf("%s: accepted what go-msgpack refuses (%v): %x", what, werr, b)
	case err == nil && !wf:
		t.Fatalf("%s: accepted an input outside the schema: %x", what, b)
	case err != nil && werr == nil && wf:
		t.Fatalf("%s: refused a well-formed message go-msgpack accepts: %v: %x", what, err, b)
	case err != nil && werr != nil && wf && errors.Is(err, ErrVersion) != errors.Is(werr, ErrVersion):
		t.Fatalf("%s: refused as %v, go-msgpack as %v: %x", what, err, werr, b)
	}
	if err != nil && !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrVersion) {
		t.Fatalf("%s: an error of neither kind: %v", what, err)
	}
	return err == nil
}

// checkCoordAgainstOracle decodes b with each coordination decoder and
// its oracle under lim (with w, which may hold an earlier message's
// columns): each accepts exactly the well-formed inputs its oracle
// accepts, into the same message, which it encodes as go-msgpack does.
func checkCoordAgainstOracle(t *testing.T, w *wire, b []byte, lim DecodeLimits) {
	t.Helper()
	h := newHandle(1024)
	{
		a := &w.coord.ask
		from, sentMs, id, version, err := w.decodeAsk(b, lim, a)
		var want counter.Ask
		wfrom, wsentMs, wid, wversion, werr := oracleDecodeAsk(h, b, lim, &want)
		if judge(t, "ask", askSchema(), b, err, werr) {
			if from != wfrom || sentMs != wsentMs || id != wid || version != wversion {
				t.Fatalf("ask from %q at %d, id %d, version %d; go-msgpack %q at %d, id %d, version %d", from, sentMs, id, version, wfrom, wsentMs, wid, wversion)
			}
			if d := sameAsk(a, &want); d != "" {
				t.Fatalf("ask decoded differently from go-msgpack:\n%s\n%x", d, b)
			}
			enc, err := w.encodeAsk(from, time.UnixMilli(sentMs), id, a)
			wenc, werr := oracleEncodeAsk(h, from, time.UnixMilli(sentMs), id, &want)
			if err != nil || werr != nil || !bytes.Equal(enc, wenc) {
				t.Fatalf("ask encodes %x (%v), go-msgpack %x (%v)", enc, err, wenc, werr)
			}
		}
	}
	{
		a, err := w.decodeAnswer(b, lim)
		want, werr := oracleDecodeAnswer(h, b, lim)
		if judge(t, "answer", answerSchema(), b, err, werr) {
			if d := sameAnswer(a, want); d != "" {
				t.Fatalf("answer decoded differently from go-msgpack:\n%s\n%x", d, b)
			}
			status := answerDecided
			if !a.Decided {
				status = answerUnable
			}
			for _, v := range []uint8{coordVersionNoLeases, coordVersionLeases, coordVersionMax, coordVersion} {
				enc := w.encodeAnswer(v, a.From, time.UnixMilli(a.SentMs), a.ID, status, a.Allowed, a.Results)
				wenc, werr := oracleEncodeAnswer(h, v, a.From, time.UnixMilli(a.SentMs), a.ID, status, a.Allowed, a.Results)
				if werr != nil || !bytes.Equal(enc, wenc) {
					t.Fatalf("answer encodes %x, go-msgpack %x (%v)", enc, wenc, werr)
				}
			}
		}
	}
	{
		m, err := w.decodeRelease(b, lim)
		want, werr := oracleDecodeRelease(h, b, lim)
		if judge(t, "release", releaseSchema(), b, err, werr) {
			if d := sameRelease(m, want); d != "" {
				t.Fatalf("release decoded differently from go-msgpack:\n%s\n%x", d, b)
			}
			enc := w.encodeRelease(m.From, time.UnixMilli(m.SentMs), m.ID, m.Key, m.Limits)
			wenc, werr := oracleEncodeRelease(h, m.From, time.UnixMilli(m.SentMs), m.ID, &counter.Ask{Key: m.Key, Limits: m.Limits})
			if werr != nil || !bytes.Equal(enc, wenc) {
				t.Fatalf("release encodes %x, go-msgpack %x (%v)", enc, wenc, werr)
			}
		}
	}
	w.release()
}

// coordCase is a coordination message to encode: an ask, an answer in a
// version, or a release.
type coordCase struct {
	name    string
	kind    byte
	from    string
	sentMs  int64
	id      uint64
	ask     *counter.Ask // an ask's, a release's key and limits
	version uint8        // an answer's
	status  uint8
	allowed bool
	res     []counter.Result
}

// encode returns the case's message as the codec writes it and as
// go-msgpack does.
func (c *coordCase) encode(t testing.TB, w *wire) (got, want []byte) {
	t.Helper()
	h := newHandle(1024)
	sent := time.UnixMilli(c.sentMs)
	var err, werr error
	switch c.kind {
	case kindAsk:
		got, err = w.encodeAsk(c.from, sent, c.id, c.ask)
		want, werr = oracleEncodeAsk(h, c.from, sent, c.id, c.ask)
	case kindAnswer:
		got = w.encodeAnswer(c.version, c.from, sent, c.id, c.status, c.allowed, c.res)
		want, werr = oracleEncodeAnswer(h, c.version, c.from, sent, c.id, c.status, c.allowed, c.res)
	default:
		got = w.encodeRelease(c.from, sent, c.id, c.ask.Key, c.ask.Limits)
		want, werr = oracleEncodeRelease(h, c.from, sent, c.id, c.ask)
	}
	if err != nil || werr != nil {
		t.Fatalf("%s: %v, go-msgpack %v", c.name, err, werr)
	}
	return got, want
}

// coordCases are the table of TestCoordinationMatchesMsgpack: every
// version, nil and empty columns, the largest values of every field,
// multi-limit asks with entries (some of them not sent: another key's, a
// limit not asked), stated maxes and leads (under a millisecond, not
// sent; up to and past the most a decoder takes).
func coordCases() []coordCase {
	name := func(c byte, n int) string { return strings.Repeat(string(c), n) }
	lim := DefaultDecodeLimits()
	big := func() *counter.Ask {
		a := &counter.Ask{Key: name('k', lim.MaxKeyBytes), Hits: counter.MaxLimit, Settled: math.MaxUint64, Want: counter.MaxLimit, Gen: math.MaxUint32}
		for i := range counter.MaxLimitsPerCall {
			id := fmt.Sprintf("%d%s", i, name('l', lim.MaxNameBytes-1))
			a.Limits = append(a.Limits, id)
			a.Preds = append(a.Preds, counter.Pred{Start: math.MaxInt64 - int64(i), After: math.MaxUint32})
			a.Max = append(a.Max, counter.MaxLimit-int64(i))
			for j := range 8 {
				a.Entries = append(a.Entries, counter.Entry{Limit: id, Key: a.Key, Origin: "n1", Start: math.MinInt64 + int64(j), Count: math.MaxUint32 - uint32(j)})
			}
		}
		return a
	}
	mixed := func() *counter.Ask {
		a := goldenAskV4()
		a.Max = []int64{0, 300}
		a.Entries = append(a.Entries,
			counter.Entry{Limit: "api|1000|10", Key: "other", Origin: "n1", Start: 5, Count: 1}, // another key's: not sent
			counter.Entry{Limit: "unasked|1|1", Key: "api:k", Origin: "n1", Start: 5, Count: 1}, // a limit not asked: not sent
			counter.Entry{Limit: "api|60000|12", Key: "api:k", Origin: "n1", Start: -40, Count: 0},
		)
		return a
	}
	bare := func() *counter.Ask {
		return &counter.Ask{Key: "k", Hits: 1, Limits: []string{"l"}, Preds: []counter.Pred{{}}}
	}
	allLeases := goldenResults()
	allLeases[0].LeaseGen, allLeases[1].LeaseGen = 9, 4
	bigRes := make([]counter.Result, counter.MaxLimitsPerCall)
	for i := range bigRes {
		bigRes[i] = counter.Result{Allowed: i%2 == 0, Limit: counter.MaxLimit, Count: math.MaxInt64, Pending: math.MaxInt64 - 1, Remaining: math.MaxInt64,
			RetryAfter: counter.MaxWindow, Reset: counter.MaxWindow + time.Hour, Lease: counter.MaxLimit, LeaseGen: math.MaxUint32}
	}
	cases := []coordCase{
		{name: "ask", ask: goldenAsk()},
		{name: "ask v4", ask: goldenAskV4()},
		{name: "ask v4, a max for the second limit only, entries not sent", ask: mixed()},
		{name: "ask v5, a lead, no max", ask: goldenAskV5()},
		{name: "ask v5, a lead and a max", ask: func() *counter.Ask { a := goldenAskV4(); a.Lead = 180 * time.Millisecond; return a }()},
		{name: "ask v5, a lead and all zero maxes: no max", ask: func() *counter.Ask { a := goldenAskV5(); a.Max = []int64{0, 0}; return a }()},
		{name: "ask v5, the longest lead, entries not sent", ask: func() *counter.Ask { a := mixed(); a.Lead = time.Hour; return a }()},
		{name: "ask, a lead under a millisecond: version 3", ask: func() *counter.Ask { a := goldenAsk(); a.Lead = 999 * time.Microsecond; return a }()},
		{name: "ask, a lead under a millisecond and a max: version 4", ask: func() *counter.Ask { a := goldenAskV4(); a.Lead = 500 * time.Microsecond; return a }()},
		{name: "ask, a negative lead: version 3", ask: func() *counter.Ask { a := goldenAsk(); a.Lead = -time.Second; return a }()},
		{name: "ask v5, a lead beyond an hour", ask: func() *counter.Ask { a := goldenAskV5(); a.Lead = time.Hour + time.Millisecond; return a }()},
		{name: "ask of one limit, no entries, nothing else", ask: bare()},
		{name: "ask with empty columns", ask: &counter.Ask{Key: "k", Hits: 1, Limits: []string{}, Preds: []counter.Pred{}, Entries: []counter.Entry{}, Max: []int64{}}},
		{name: "ask with nil columns", ask: &counter.Ask{Key: "k", Hits: 1}},
		{name: "ask, all zero maxes: version 3", ask: &counter.Ask{Key: "k", Hits: 1, Limits: []string{"a", "b"}, Preds: make([]counter.Pred, 2), Max: []int64{0, 0}}},
		{name: "ask at every maximum", ask: big(), sentMs: math.MaxInt64, id: math.MaxUint64},
		{name: "ask at every maximum, version 5", ask: func() *counter.Ask { a := big(); a.Lead = time.Duration(maxLeadMs) * time.Millisecond; return a }(), sentMs: math.MaxInt64, id: math.MaxUint64},
		{name: "ask at every maximum, version 3", ask: func() *counter.Ask { a := big(); a.Max = nil; return a }(), sentMs: math.MinInt64},
		{name: "ask of negative figures", ask: &counter.Ask{Key: "k", Hits: -5, Limits: []string{"a"}, Preds: []counter.Pred{{Start: -1}}, Want: math.MinInt64, Max: []int64{-7}}},
		{name: "answer", kind: kindAnswer, version: coordVersionLeases, res: goldenResults()},
		{name: "answer v2", kind: kindAnswer, version: coordVersionNoLeases, res: goldenResults()},
		{name: "answer v4, allowed", kind: kindAnswer, version: coordVersionMax, allowed: true, res: goldenResults()},
		{name: "answer v5, allowed", kind: kindAnswer, version: coordVersion, allowed: true, res: goldenResults()},
		{name: "answer, lease generations differ", kind: kindAnswer, version: coordVersion, res: allLeases},
		{name: "answer, unable, no results", kind: kindAnswer, version: coordVersion, status: answerUnable},
		{name: "answer v2, no results", kind: kindAnswer, version: coordVersionNoLeases, res: []counter.Result{}},
		{name: "answer at every maximum", kind: kindAnswer, version: coordVersion, id: math.MaxUint64, sentMs: math.MaxInt64, status: math.MaxUint8, res: bigRes},
		{name: "answer of a later version", kind: kindAnswer, version: coordVersion + 1, res: goldenResults()},
		{name: "answer of negative figures", kind: kindAnswer, version: coordVersion, res: []counter.Result{{Limit: -1, Count: math.MinInt64, RetryAfter: -time.Second, Lease: -3}}},
		{name: "release", kind: kindRelease, ask: goldenAsk()},
		{name: "release of no limits", kind: kindRelease, ask: &counter.Ask{Key: "k"}},
		{name: "release of empty limits", kind: kindRelease, ask: &counter.Ask{Key: "k", Limits: []string{}}},
		{name: "release at every maximum", kind: kindRelease, ask: big(), id: math.MaxUint64, sentMs: math.MinInt64},
	}
	for i := range cases {
		c := &cases[i]
		if c.kind == 0 {
			c.kind = kindAsk
		}
		if c.from == "" {
			c.from = "n1"
			if strings.Contains(c.name, "maximum") {
				c.from = name('n', lim.MaxNameBytes)
			}
		}
		if c.sentMs == 0 {
			c.sentMs = 1_800_000_000_123
		}
		if c.id == 0 {
			c.id = 42
		}
	}
	return cases
}

// TestCoordinationMatchesMsgpack: the table's messages, and random ones,
// encode to go-msgpack's bytes, and they and every encoding of them a
// conforming encoder could write (each length, string and integer in any
// width that holds it, str or bin, the entry limits as an array too, nil
// or an empty array for an empty column) decode with each decoder as with
// go-msgpack, or are refused by both.
func TestCoordinationMatchesMsgpack(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	w := newWire(nil)
	check := func(t *testing.T, c *coordCase) {
		got, want := c.encode(t, w)
		if !bytes.Equal(got, want) {
			t.Fatalf("encodes as\n%x\ngo-msgpack\n%x", got, want)
		}
		s := map[byte]coordSchema{kindAsk: askSchema(), kindAnswer: answerSchema(), kindRelease: releaseSchema()}[c.kind]
		if !s.wellFormed(got) {
			t.Fatalf("not wellFormed: %x", got)
		}
		for range 8 {
			wide := wideCoord(rng, got)
			if !s.wellFormed(wide) {
				t.Fatalf("a conforming encoding is not wellFormed: %x", wide)
			}
			checkCoordAgainstOracle(t, w, wide, DefaultDecodeLimits())
		}
		checkCoordAgainstOracle(t, w, got, DefaultDecodeLimits())
		checkCoordAgainstOracle(t, w, got, tightCoordLimits())
	}
	for _, c := range coordCases() {
		t.Run(c.name, func(t *testing.T) { check(t, &c) })
	}
	for _, name := range []string{"ask", "ask_v2", "ask_v4", "ask_v5", "answer", "answer_v2", "answer_v4", "answer_v5", "release"} {
		b := readWireGolden(t, name)
		checkCoordAgainstOracle(t, w, b, DefaultDecodeLimits())
		for range 8 {
			checkCoordAgainstOracle(t, w, wideCoord(rng, b), DefaultDecodeLimits())
		}
	}
	for i := range 2000 {
		c := randomCoordCase(rng)
		t.Run(fmt.Sprint("random ", i), func(t *testing.T) { check(t, &c) })
	}
}

// tightCoordLimits make the name and key bounds reachable by small inputs.
func tightCoordLimits() DecodeLimits {
	return DecodeLimits{MaxMessageBytes: 4096, MaxEntries: 6, MaxKeyBytes: 3, MaxNameBytes: 2}
}

// randomCoordCase returns an ask, answer or release of random figures,
// most in range, some not (which both decoders must refuse alike).
func randomCoordCase(rng *rand.Rand) coordCase {
	str := func() string {
		n := []int{0, 1, 1 + rng.IntN(31), 32 + rng.IntN(224), 256 + rng.IntN(1000)}[rng.IntN(5)]
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	ints := []int64{0, 1, -1, 31, -32, -33, 127, 128, -128, -129, 255, 256, 32767, 32768, -32768, -32769, 65535, 65536,
		math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1, math.MaxUint32, math.MaxUint32 + 1,
		math.MaxInt64, math.MinInt64, 1_800_000_000_000, counter.MaxLimit}
	anInt := func() int64 {
		if rng.IntN(2) == 0 {
			return ints[rng.IntN(len(ints))]
		}
		return int64(rng.Uint64()) >> rng.IntN(64)
	}
	small := func() int64 { // in range mostly: a count, a max
		if rng.IntN(8) == 0 {
			return anInt()
		}
		return rng.Int64N(counter.MaxLimit) + 1
	}
	c := coordCase{from: str(), sentMs: anInt(), id: rng.Uint64() >> rng.IntN(64)}
	if rng.IntN(10) > 0 && c.from == "" {
		c.from = "n1"
	}
	switch rng.IntN(3) {
	case 0:
		c.kind, c.name = kindAsk, "ask"
		a := &counter.Ask{Key: str(), Hits: small(), Settled: rng.Uint64() >> rng.IntN(64), Want: small() - 1, Gen: rng.Uint32()}
		n := rng.IntN(counter.MaxLimitsPerCall + 2)
		if n > 0 || rng.IntN(2) == 0 {
			a.Limits, a.Preds = []string{}, []counter.Pred{}
		}
		for range n {
			a.Limits = append(a.Limits, str())
			a.Preds = append(a.Preds, counter.Pred{Start: anInt(), After: uint32(anInt())})
			if rng.IntN(3) == 0 {
				a.Max = append(a.Max, small()-1)
			} else {
				a.Max = append(a.Max, 0)
			}
		}
		if rng.IntN(4) == 0 {
			a.Max = nil
		}
		// A lead: none, under a millisecond (not sent), a few ms, about
		// the most a decoder takes (maxLeadMs), up to twice that, anything.
		switch rng.IntN(8) {
		case 0:
			a.Lead = time.Duration(rng.Int64N(int64(time.Millisecond)))
		case 1:
			a.Lead = time.Duration(1+rng.Int64N(20))*time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
		case 2:
			a.Lead = time.Duration(maxLeadMs-1+rng.Int64N(3))*time.Millisecond + time.Duration(rng.Int64N(int64(time.Millisecond)))
		case 3:
			a.Lead = time.Duration(rng.Int64N(2 * maxLeadMs * int64(time.Millisecond)))
		case 4:
			a.Lead = time.Duration(anInt())
		}
		if n > 0 {
			for range rng.IntN(maxAskEntriesWire + 2) {
				e := counter.Entry{Limit: a.Limits[rng.IntN(n)], Key: a.Key, Start: anInt(), Count: uint32(anInt())}
				if rng.IntN(10) == 0 {
					e.Key = "x" + e.Key // not sent
				}
				a.Entries = append(a.Entries, e)
			}
		}
		c.ask = a
	case 1:
		c.kind, c.name = kindAnswer, "answer"
		c.version = []uint8{coordVersionNoLeases, coordVersionLeases, coordVersionMax, coordVersion, coordVersion + 1, 0}[rng.IntN(6)]
		c.status = uint8(rng.IntN(3))
		c.allowed = rng.IntN(2) == 0
		n := rng.IntN(counter.MaxLimitsPerCall + 2)
		if n > 0 || rng.IntN(2) == 0 {
			c.res = []counter.Result{}
		}
		for range n {
			count := small() - 1
			c.res = append(c.res, counter.Result{Allowed: rng.IntN(2) == 0, Limit: small(), Count: count, Pending: min(count, small()-1), Remaining: small() - 1,
				RetryAfter: time.Duration(rng.Int64N(int64(2 * counter.MaxWindow))).Truncate(time.Millisecond),
				Reset:      time.Duration(rng.Int64N(int64(2 * counter.MaxWindow))).Truncate(time.Millisecond),
				Lease:      small() - 1, LeaseGen: uint32(rng.IntN(5))})
		}
	default:
		c.kind, c.name = kindRelease, "release"
		a := &counter.Ask{Key: str()}
		n := rng.IntN(counter.MaxLimitsPerCall + 2)
		if n > 0 || rng.IntN(2) == 0 {
			a.Limits = []string{}
		}
		for range n {
			a.Limits = append(a.Limits, str())
		}
		c.ask = a
	}
	return c
}

// wideCoord re-encodes a coordination message b as a conforming msgpack
// encoder could: each array length, string and integer in a width chosen
// at random among those that hold it (a string as str or bin), the bytes
// of a string field that holds a []uint8 (an ask's entry limits) as an
// array of integers at times, an empty column as nil or an empty array.
func wideCoord(rng *rand.Rand, b []byte) []byte {
	fields, ok := schemaless(b)
	if !ok {
		panic(fmt.Sprintf("not a message: %x", b))
	}
	out := []byte{b[0]}
	arr := func(n int, isNil bool) {
		if isNil || n == 0 && rng.IntN(4) == 0 {
			out = append(out, mpNil)
			return
		}
		switch c := rng.IntN(3); {
		case c == 0 && n < 16:
			out = append(out, mpFixArray|byte(n))
		case c <= 1 && n < 1<<16:
			out = binary.BigEndian.AppendUint16(append(out, mpArray16), uint16(n))
		default:
			out = binary.BigEndian.AppendUint32(append(out, mpArray32), uint32(n))
		}
	}
	str := func(s string) {
		n := len(s)
		for {
			switch c := rng.IntN(7); {
			case c == 0 && n < 32:
				out = append(out, mpFixStr|byte(n))
			case c == 1 && n < 256:
				out = append(out, mpStr8, byte(n))
			case c == 2 && n < 256:
				out = append(out, mpBin8, byte(n))
			case c == 3 && n < 1<<16:
				out = binary.BigEndian.AppendUint16(append(out, mpStr16), uint16(n))
			case c == 4 && n < 1<<16:
				out = binary.BigEndian.AppendUint16(append(out, mpBin16), uint16(n))
			case c == 5:
				out = binary.BigEndian.AppendUint32(append(out, mpStr32), uint32(n))
			case c == 6:
				out = binary.BigEndian.AppendUint32(append(out, mpBin32), uint32(n))
			default:
				continue
			}
			out = append(out, s...)
			return
		}
	}
	integer := func(v int64, unsigned bool) {
		if unsigned && v < 0 { // a uint64 beyond an int64's range
			out = binary.BigEndian.AppendUint64(append(out, mpUint64), uint64(v))
			return
		}
		for {
			switch c := rng.IntN(9); {
			case c == 0 && v >= -32 && v <= 127:
				out = append(out, byte(v))
			case c == 1 && v >= 0 && v <= math.MaxUint8:
				out = append(out, mpUint8, byte(v))
			case c == 2 && v >= 0 && v <= math.MaxUint16:
				out = binary.BigEndian.AppendUint16(append(out, mpUint16), uint16(v))
			case c == 3 && v >= 0 && v <= math.MaxUint32:
				out = binary.BigEndian.AppendUint32(append(out, mpUint32), uint32(v))
			case c == 4 && v >= 0:
				out = binary.BigEndian.AppendUint64(append(out, mpUint64), uint64(v))
			case c == 5 && v >= math.MinInt8 && v <= math.MaxInt8:
				out = append(out, mpInt8, byte(v))
			case c == 6 && v >= math.MinInt16 && v <= math.MaxInt16:
				out = binary.BigEndian.AppendUint16(append(out, mpInt16), uint16(v))
			case c == 7 && v >= math.MinInt32 && v <= math.MaxInt32:
				out = binary.BigEndian.AppendUint32(append(out, mpInt32), uint32(v))
			case c == 8:
				out = binary.BigEndian.AppendUint64(append(out, mpInt64), uint64(v))
			default:
				continue
			}
			return
		}
	}
	var value func(v any, bytesField bool)
	value = func(v any, bytesField bool) {
		switch x := v.(type) {
		case nil:
			out = append(out, mpNil)
		case int64:
			integer(x, false)
		case uint64:
			integer(int64(x), true)
		case bool:
			out = appendBool(out, x)
		case string:
			if bytesField && rng.IntN(3) == 0 {
				arr(len(x), false)
				for i := range len(x) {
					integer(int64(x[i]), true)
				}
				return
			}
			str(x)
		case []any:
			arr(len(x), false)
			for _, e := range x {
				value(e, false)
			}
		default:
			panic(fmt.Sprintf("%T in a coordination message", v))
		}
	}
	arr(len(fields), false)
	for i, f := range fields {
		// The tenth field of an ask is its entry limits, a []uint8.
		value(f, b[0] == kindAsk && i == 9)
	}
	return out
}

// FuzzCoordinationMatchesMsgpack holds the coordination decoders to
// go-msgpack on any input: each accepts exactly the well-formed inputs
// its oracle accepts, decodes them to the same message, refuses a
// well-formed one as its oracle does, and encodes what it accepts to
// go-msgpack's bytes. Seeded with FuzzDecodeCoordination's corpus, the
// table of TestCoordinationMatchesMsgpack and wide encodings of both.
func FuzzCoordinationMatchesMsgpack(f *testing.F) {
	rng := rand.New(rand.NewPCG(9, 10))
	seeds := fuzzCorpus(f, "FuzzDecodeCoordination")
	w := newWire(nil)
	for _, c := range coordCases() {
		if b, _ := c.encode(f, w); len(b) < 2048 {
			seeds = append(seeds, b)
		}
	}
	for _, b := range seeds {
		f.Add(b)
		if _, ok := schemaless(b); ok && isCoordKind(b) {
			f.Add(wideCoord(rng, b))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		checkCoordAgainstOracle(t, w, b, DefaultDecodeLimits())
		checkCoordAgainstOracle(t, w, b, tightCoordLimits())
	})
}

// TestCoordinationRefusesOutsideTheSchema: what go-msgpack took and the
// new decoders refuse, each on purpose, and what both refuse. No encoder
// of these formats writes any of it, so no peer's message is lost.
func TestCoordinationRefusesOutsideTheSchema(t *testing.T) {
	h := newHandle(1024)
	body := func(kind byte, v any) []byte {
		var out []byte
		if err := codec.NewEncoderBytes(&out, h).Encode(v); err != nil {
			t.Fatal(err)
		}
		return append([]byte{kind}, out...)
	}
	// The golden ask's fields, to edit.
	askFields := func() []any {
		fields, _ := schemaless(readWireGolden(t, "ask"))
		return fields
	}
	edit := func(i int, v any) []byte {
		f := askFields()
		f[i] = v
		return body(kindAsk, f)
	}
	good, _ := encodeAsk(h, "n1", time.UnixMilli(1_800_000_000_123), 42, goldenAsk())
	ans, _ := encodeAnswer(h, coordVersion, "k", time.UnixMilli(1_800_000_000_123), 42, answerDecided, true, goldenResults())
	rel, _ := encodeRelease(h, "n1", time.UnixMilli(1_800_000_000_123), 42, goldenAsk())
	for _, tc := range []struct {
		name    string
		b       []byte
		oracle  bool // go-msgpack (and the checks after it) accepted it
		version bool // the new decoder refuses it as ErrVersion
	}{
		{"an ask as a map of its fields", body(kindAsk, map[string]any{"Version": 3, "From": "n1", "SentMs": 5, "ID": 1, "Key": "k", "Hits": 1, "Limits": []string{"l"}, "PredStarts": []int64{1}, "PredAfters": []uint32{1}}), true, false},
		{"a short ask: no entries, no settled", body(kindAsk, askFields()[:9]), true, false},
		{"an ask of 14 fields: a want, no generation", body(kindAsk, askFields()[:14]), true, false},
		{"an ask of 18 fields", body(kindAsk, append(askFields(), nil, 0, "more")), true, false},
		{"a version 3 ask of 17 fields, its lead 0", body(kindAsk, append(askFields(), nil, 0)), false, false},
		{"a version 3 ask of 17 fields, a lead", body(kindAsk, append(askFields(), nil, 180)), false, false},
		{"a version 5 ask of 16 fields", func() []byte { f := askFields(); f[0] = coordVersion; return body(kindAsk, append(f, nil)) }(), false, false},
		{"bytes after the ask", append(slices.Clip(good), 0xc0), true, false},
		{"nil for the send time", edit(2, nil), true, false},
		{"nil for the hits", edit(5, nil), false, false},
		{"a send time beyond int64, as uint64", edit(2, uint64(math.MaxInt64+1)), true, false},
		{"the key as an array of integers", edit(4, []any{'a', 'p', 'i', ':', 'k'}), true, false},
		{"the entry limits beyond a byte", edit(9, []int{0, 256}), false, false},
		{"an answer's bool as the integer 1", func() []byte { f, _ := schemaless(ans); f[5] = 1; return body(kindAnswer, f) }(), true, false},
		{"an answer's fits as integers", func() []byte { f, _ := schemaless(ans); f[6] = []int{0, 1}; return body(kindAnswer, f) }(), true, false},
		{"an answer as nil", []byte{kindAnswer, mpNil}, false, false},
		{"a release of 5 fields: no limits", func() []byte { f, _ := schemaless(rel); return body(kindRelease, f[:5]) }(), true, false},
		{"a release's limit nil", func() []byte { f, _ := schemaless(rel); f[5] = []any{"a", nil}; return body(kindRelease, f) }(), true, false},
		{"a version 9 ask of 20 fields", body(kindAsk, append([]any{9}, make([]any, 19)...)), false, true},
		{"a version 9 ask, its body cut", edit(0, 9)[:20], false, true},
		{"an ask cut in its version", []byte{kindAsk, 0x9f, mpUint8}, false, false},
		{"an ask of limits longer than the message", []byte("Q\x9f\x03\xa2n1\x05\x01\xa1k\x01\xdd\xff\xff\xff\xff\xa1l"), false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var werr error
			var err error
			switch tc.b[0] {
			case kindAsk:
				var a counter.Ask
				_, _, _, _, werr = oracleDecodeAsk(h, tc.b, DefaultDecodeLimits(), &a)
				_, _, _, _, err = decodeAsk(h, tc.b, DefaultDecodeLimits(), &a)
			case kindAnswer:
				_, werr = oracleDecodeAnswer(h, tc.b, DefaultDecodeLimits())
				_, err = decodeAnswer(h, tc.b, DefaultDecodeLimits())
			default:
				_, werr = oracleDecodeRelease(h, tc.b, DefaultDecodeLimits())
				_, err = decodeRelease(h, tc.b, DefaultDecodeLimits())
			}
			if (werr == nil) != tc.oracle {
				t.Fatalf("go-msgpack: %v, want accepted %v", werr, tc.oracle)
			}
			if err == nil || errors.Is(err, ErrVersion) != tc.version || !errors.Is(err, ErrVersion) && !errors.Is(err, ErrMalformed) {
				t.Fatalf("decoded: %v, want ErrVersion %v or else ErrMalformed", err, tc.version)
			}
			s := map[byte]coordSchema{kindAsk: askSchema(), kindAnswer: answerSchema(), kindRelease: releaseSchema()}[tc.b[0]]
			if tc.oracle && s.wellFormed(tc.b) {
				// Then FuzzCoordinationMatchesMsgpack would demand it be accepted.
				t.Fatal("wellFormed says it is in the schema")
			}
		})
	}
	// Every prefix of a message is refused, none panics.
	for _, b := range [][]byte{good, ans, rel} {
		for n := range len(b) {
			checkCoordAgainstOracle(t, newWire(nil), b[:n], DefaultDecodeLimits())
			var a counter.Ask
			_, _, _, _, aerr := decodeAsk(h, b[:n], DefaultDecodeLimits(), &a)
			_, nerr := decodeAnswer(h, b[:n], DefaultDecodeLimits())
			_, rerr := decodeRelease(h, b[:n], DefaultDecodeLimits())
			if aerr == nil || nerr == nil || rerr == nil {
				t.Fatalf("%q cut at %d bytes accepted: %v %v %v", b[0], n, aerr, nerr, rerr)
			}
		}
	}
}
