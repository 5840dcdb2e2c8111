package engine

import (
	"bytes"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// Coordination message kinds: a check at the margin put to the key's
// coordinator, its answer, and the release of a grant the asker did not
// count. They carry coordVersion; the sync kinds keep wireVersion 1, so a
// node of the previous version still syncs with this one and merely drops
// these (an unknown kind, counted as a decode error): its asks never come
// and asks to it are never answered, so checks at the margin that involve
// it fall back to the budget after the deadline.
const (
	kindAsk     byte = 'Q'
	kindAnswer  byte = 'A'
	kindRelease byte = 'R'
)

// coordVersion is the version of the coordination messages this node
// sends when it needs it. Version 3 added leases: an ask's Want and an
// answer's Leases. Version 4 adds the max an ask states per limit
// (counter.Ask.Max: a limit the caller stated, a family's), and is sent
// only for an ask that states one: an ask that states none is encoded as
// version 3, byte for byte, so that a version 3 coordinator decides it,
// and a release is always version 3 (its layout is unchanged). Version 5
// adds the lead the asker measured of the coordinator's clock
// (counter.Ask.Lead), and is sent only for an ask that has one, to a
// coordinator that states it decodes version 5 (SetPeerCoordVersion). A
// receiver decodes versions 2 to 5 and answers an ask in the ask's
// version, so a node of version 2, 3 or 4 still gets its answers; a
// version 3 node drops the version 4 asks of newer nodes, and a version 4
// node never gets a version 5 ask (doc.go, "Wire format and versions").
const coordVersion = 5

// coordVersionMax is the last version without a lead: what an ask that
// states a max and has no lead is sent as.
const coordVersionMax = 4

// coordVersionLeases is the last version without stated maxes: what an
// ask that states none and has no lead, and every release, is sent as.
const coordVersionLeases = 3

// coordVersionNoLeases is the last version without leases.
const coordVersionNoLeases = 2

// knownCoordVersion reports whether v is a coordination version this node decodes.
func knownCoordVersion(v uint8) bool {
	return v >= coordVersionNoLeases && v <= coordVersion
}

// Answer status values.
const (
	answerDecided uint8 = 0 // Allowed is the coordinator's decision
	answerUnable  uint8 = 1 // it could not decide (an unknown limit): decide alone at once
)

// The coordination messages are the kind byte and a msgpack array of
// fields, written (appendAsk, appendAnswer, appendRelease) and read
// (askcodec_decode.go) by hand, with msgpack.go's writer and reader, byte
// for byte as go-msgpack wrote the structs that defined them; those
// structs and the reflective codec are kept in askcodec_reflect_test.go
// as the oracle of askcodec_oracle_test.go. The field counts are those of
// each version's layout; a later version appends fields.
//
// An ask, version 2 (13 fields): Version uint8, From string, SentMs
// int64, ID uint64, Key string, Hits int64, Limits []string, PredStarts
// []int64, PredAfters []uint32 (counter.Ask.Preds, parallel to Limits),
// EntryLimits []uint8 (the entries' limits as indexes into Limits,
// written as a string), EntryStarts []int64, EntryCounts []uint32,
// Settled uint64. Version 3 (15) appends Want int64 and Gen uint32; it is
// what an ask that states no max and has no lead is sent as. Version 4
// (16) appends Max []int64, parallel to Limits. Version 5 (17) appends
// LeadMs int64 (counter.Ask.Lead, at least 1); its Max is parallel to
// Limits or nil (states none).
//
// An answer, version 2 (13 fields): Version uint8, From string, SentMs
// int64, ID uint64, Status uint8, Allowed bool, then per limit, in ask
// order: Fits []bool (it had room), Max []int64 (the declared limit),
// Counts, Pending (of Counts, grants the coordinator's merged slices do
// not show yet), Remaining, RetryMs, ResetMs, all []int64. Version 3 (15)
// appends Leases []int64 (counter.Result.Lease) and LeaseGen uint32 (the
// same for every limit); versions 4 and 5 are version 3's layout (an
// answer's Max was always the max decided with).
//
// A release (6 fields, every version): Version uint8, From string, SentMs
// int64, ID uint64, Key string, Limits []string.
//
// As go-msgpack writes them: integers in their shortest form (a signed
// one signed: int16 for 600, not uint16), strings and a []uint8 as
// fixstr, str16 or str32 (never str8), a bool as true or false, a nil
// slice as nil and an empty one as an empty array. The columns an encoder builds (the predictions, entries and
// results) are nil when empty; Limits and Max are written as given.
const (
	askFieldsV2    = 13
	askFieldsV3    = 15
	askFieldsV4    = 16
	askFieldsV5    = 17
	answerFieldsV2 = 13
	answerFields   = 15
	releaseFields  = 6
)

// decodedRelease is a decoded release. Its Key and Limits alias the message
// (wire.decodeRelease).
type decodedRelease struct {
	Version uint8
	From    string
	SentMs  int64
	ID      uint64
	Key     string
	Limits  []string
}

// Answer is a coordinator's answer to this node's ask ID, as the engine
// decoded it (Config.OnAnswer).
type Answer struct {
	From string
	ID   uint64
	// SentMs is when the coordinator sent it, unix ms on its clock.
	SentMs int64
	// Decided is false when the coordinator could not decide the ask (its
	// rules lack a limit of it): the asker decides alone at once.
	Decided bool
	Allowed bool
	// Results are the coordinator's view of each limit, in ask order.
	Results []counter.Result
}

// maxLeadMs bounds a decoded ask's lead: an hour, far past any window a
// lead is judged within (counter.Ask.Lead takes more than the window as
// the window) and past MaxClockOffset's default.
const maxLeadMs = int64(time.Hour / time.Millisecond)

// maxAskEntriesWire bounds the entries of a decoded ask: counter.PrepareAsk
// sends at most counter.MaxAskEntries (8 per limit of the most a check
// has, which releases before 2026-12-05 sent at most per limit).
const maxAskEntriesWire = counter.MaxAskEntries

// encodeBody returns kind followed by go-msgpack's encoding of v: the
// codec of the reset messages (resetcodec.go), rare enough to keep it.
// The sync and coordination messages have their own (msgpack.go).
func encodeBody(h *codec.MsgpackHandle, kind byte, v any) ([]byte, error) {
	var body []byte
	if err := codec.NewEncoderBytes(&body, h).Encode(v); err != nil {
		return nil, fmt.Errorf("engine: encode: %w", err)
	}
	out := make([]byte, 1+len(body))
	out[0] = kind
	copy(out[1:], body)
	return out, nil
}

// decodeBody decodes b[1:] into v, containing the codec's panics.
func decodeBody(h *codec.MsgpackHandle, b []byte, v any) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	if err := codec.NewDecoderBytes(b[1:], h).Decode(v); err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	return nil
}

// encodeAsk returns the ask message of a, in a slice of its own (the
// transport keeps it): version 5 if it has a lead (counter.Ask.Lead of a
// millisecond or more), else version 4 if it states a max
// (counter.Ask.Max), else version 3.
func (w *wire) encodeAsk(from string, now time.Time, id uint64, a *counter.Ask) ([]byte, error) {
	b, err := appendAsk(w.body[:0], from, now.UnixMilli(), id, a)
	w.body = b[:0]
	if err != nil {
		return nil, err
	}
	return bytes.Clone(b), nil
}

// encodeAnswer returns an answer message, in a slice of its own, in
// version (that of the ask it answers): a version 2 answer has no leases.
func (w *wire) encodeAnswer(version uint8, from string, now time.Time, id uint64, status uint8, allowed bool, res []counter.Result) []byte {
	b := appendAnswer(w.body[:0], version, from, now.UnixMilli(), id, status, allowed, res)
	w.body = b[:0]
	return bytes.Clone(b)
}

// encodeRelease returns the release message of ask id (key, limits), in
// a slice of its own: version 3, whatever the ask's, since its layout is
// unchanged since and a version 3 coordinator decodes it.
func (w *wire) encodeRelease(from string, now time.Time, id uint64, key string, limits []string) []byte {
	b := appendRelease(w.body[:0], from, now.UnixMilli(), id, key, limits)
	w.body = b[:0]
	return bytes.Clone(b)
}

// appendAsk appends the ask message of a (kind byte first): version 5 if
// it has a lead, else version 4 if it states a max, else version 3.
// Entries of another key or of a limit not in a.Limits are left out.
func appendAsk(b []byte, from string, sentMs int64, id uint64, a *counter.Ask) ([]byte, error) {
	version, fields := uint8(coordVersionLeases), askFieldsV3
	states := statesMax(a)
	if states && len(a.Max) != len(a.Limits) {
		return b, fmt.Errorf("engine: encode: an ask of %d limits states %d maxes", len(a.Limits), len(a.Max))
	}
	lead := a.Lead.Milliseconds()
	switch {
	case lead > 0:
		version, fields = coordVersion, askFieldsV5
	case states:
		version, fields = coordVersionMax, askFieldsV4
	}
	b = appendArrayLen(append(b, kindAsk), fields)
	b = appendUint(b, uint64(version))
	b = appendString(b, from)
	b = appendInt(b, sentMs)
	b = appendUint(b, id)
	b = appendString(b, a.Key)
	b = appendInt(b, a.Hits)
	b = appendArray(b, a.Limits, appendString)
	if len(a.Preds) == 0 {
		b = append(b, mpNil, mpNil)
	} else {
		b = appendArrayLen(b, len(a.Preds))
		for _, p := range a.Preds {
			b = appendInt(b, p.Start)
		}
		b = appendArrayLen(b, len(a.Preds))
		for _, p := range a.Preds {
			b = appendUint(b, uint64(p.After))
		}
	}
	b = appendEntries(b, a)
	b = appendUint(b, a.Settled)
	b = appendInt(b, a.Want)
	b = appendUint(b, uint64(a.Gen))
	switch {
	case fields >= askFieldsV4 && states:
		b = appendArray(b, a.Max, appendInt)
	case fields >= askFieldsV4:
		b = append(b, mpNil) // a version 5 ask that states no max
	}
	if fields == askFieldsV5 {
		b = appendInt(b, lead)
	}
	return b, nil
}

// appendEntries appends an ask's entry columns: the limits (indexes into
// a.Limits, as a []uint8 is written: a string), starts and counts of the
// entries of a.Key and of a limit of the ask, nil when there is none.
func appendEntries(b []byte, a *counter.Ask) []byte {
	sent := func(e *counter.Entry) int {
		if e.Key != a.Key {
			return -1
		}
		return indexOf(a.Limits, e.Limit)
	}
	n := 0
	for i := range a.Entries {
		if sent(&a.Entries[i]) >= 0 {
			n++
		}
	}
	if n == 0 {
		return append(b, mpNil, mpNil, mpNil)
	}
	b = appendStrLen(b, n)
	for i := range a.Entries {
		if li := sent(&a.Entries[i]); li >= 0 {
			b = append(b, uint8(li))
		}
	}
	b = appendArrayLen(b, n)
	for i := range a.Entries {
		if sent(&a.Entries[i]) >= 0 {
			b = appendInt(b, a.Entries[i].Start)
		}
	}
	b = appendArrayLen(b, n)
	for i := range a.Entries {
		if sent(&a.Entries[i]) >= 0 {
			b = appendUint(b, uint64(a.Entries[i].Count))
		}
	}
	return b
}

// statesMax reports whether a states a max for one of its limits: only
// then is it sent as version 4 (or 5, with a lead), Max and all.
func statesMax(a *counter.Ask) bool {
	for _, m := range a.Max {
		if m != 0 {
			return true
		}
	}
	return false
}

func indexOf(ss []string, s string) int {
	for i, x := range ss {
		if x == s {
			return i
		}
	}
	return -1
}

// appendAnswer appends an answer message (kind byte first) in version: a
// version 2 answer has no leases. Its LeaseGen is the highest of res.
func appendAnswer(b []byte, version uint8, from string, sentMs int64, id uint64, status uint8, allowed bool, res []counter.Result) []byte {
	fields := answerFields
	if version == coordVersionNoLeases {
		fields = answerFieldsV2
	}
	b = appendArrayLen(append(b, kindAnswer), fields)
	b = appendUint(b, uint64(version))
	b = appendString(b, from)
	b = appendInt(b, sentMs)
	b = appendUint(b, id)
	b = appendUint(b, uint64(status))
	b = appendBool(b, allowed)
	if len(res) == 0 {
		b = append(b, mpNil, mpNil, mpNil, mpNil, mpNil, mpNil, mpNil)
	} else {
		b = appendArrayLen(b, len(res))
		for i := range res {
			b = appendBool(b, res[i].Allowed)
		}
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Limit })
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Count })
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Pending })
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Remaining })
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.RetryAfter.Milliseconds() })
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Reset.Milliseconds() })
	}
	if fields == answerFieldsV2 {
		return b
	}
	var gen uint32
	if len(res) == 0 {
		b = append(b, mpNil)
	} else {
		b = appendResults(b, res, func(r *counter.Result) int64 { return r.Lease })
		for i := range res {
			gen = max(gen, res[i].LeaseGen)
		}
	}
	return appendUint(b, uint64(gen))
}

// appendResults appends the column of one figure of res (not empty).
func appendResults(b []byte, res []counter.Result, figure func(*counter.Result) int64) []byte {
	b = appendArrayLen(b, len(res))
	for i := range res {
		b = appendInt(b, figure(&res[i]))
	}
	return b
}

// appendRelease appends a release message (kind byte first), version 3.
func appendRelease(b []byte, from string, sentMs int64, id uint64, key string, limits []string) []byte {
	b = appendArrayLen(append(b, kindRelease), releaseFields)
	b = appendUint(b, coordVersionLeases)
	b = appendString(b, from)
	b = appendInt(b, sentMs)
	b = appendUint(b, id)
	b = appendString(b, key)
	return appendArray(b, limits, appendString)
}

// appendArray appends xs as go-msgpack writes a slice, each element with
// elem: nil as msgpack nil, else an array.
func appendArray[T any](b []byte, xs []T, elem func([]byte, T) []byte) []byte {
	if xs == nil {
		return append(b, mpNil)
	}
	b = appendArrayLen(b, len(xs))
	for _, x := range xs {
		b = elem(b, x)
	}
	return b
}
