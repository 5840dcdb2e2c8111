package engine

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// The coordination messages' decoders. Like wire.decode they never panic
// on any input and read exactly the layouts of askcodec.go: an array of
// one of its field counts (a map, nil or an array of another length is
// refused, though go-msgpack took a short one, leaving the missing fields
// zero, and a long one, dropping the extra), every integer and string in
// any msgpack width, an entry-limits column as str, bin or an array, nil
// for an empty column, and nothing after the message. The version is read
// first: a message of a version this node does not decode is refused as
// ErrVersion whatever its layout (a later version may have more fields).
// Then come the checks the reflective decoders made, with the same
// errors.
//
// The strings decoded alias the message, as wire.decode's do, except the
// sender's name, a copy kept per name and wire (wire.name): Receive
// returns it and keeps it in the peer table. An ask's key, limits and
// entries go to counter.Coordinate and a release's to counter.Release,
// which copy what they keep (counter.Ask); w.release drops them before
// the wire goes back to the pool.

// coordBufs is a wire's reused state for the coordination messages.
type coordBufs struct {
	ask         counter.Ask             // an ask being decided (receiveCoord)
	res         []counter.Result        // its results
	limits      []string                // the last release's limits
	entryLimits [maxAskEntriesWire]byte // an ask's entry limits sent as an array
}

// release drops the references to the last message's bytes (the
// strings of ask and limits, up to their capacity).
func (c *coordBufs) release() {
	a := &c.ask
	clear(a.Limits[:cap(a.Limits)])
	clear(a.Entries[:cap(a.Entries)])
	clear(c.limits[:cap(c.limits)])
	a.Key, a.Limits, a.Entries, c.limits = "", a.Limits[:0], a.Entries[:0], c.limits[:0]
}

// results returns n zero results, reusing c's.
func (c *coordBufs) results(n int) []counter.Result {
	c.res = slices.Grow(c.res[:0], n)[:n]
	clear(c.res)
	return c.res
}

// coordHeader starts reading a coordination message of b: it returns a
// reader past its version, the number of fields (the version one of
// them) and the version, which this node decodes.
func coordHeader(b []byte, what string) (r reader, fields int, version uint8, err error) {
	if len(b) < 2 {
		return r, 0, 0, fmt.Errorf("%w: %s of %d bytes", ErrMalformed, what, len(b))
	}
	r = reader{b: b, off: 1}
	if fields, err = r.arrayLen(); err != nil {
		return r, 0, 0, err
	}
	if fields < 1 {
		return r, 0, 0, fmt.Errorf("%w: %s of %d fields (-1: nil)", ErrMalformed, what, fields)
	}
	v, err := r.uint(math.MaxUint8)
	if err != nil {
		return r, 0, 0, err
	}
	if version = uint8(v); !knownCoordVersion(version) {
		return r, 0, 0, fmt.Errorf("%w: %s version %d, want %d to %d", ErrVersion, what, version, coordVersionNoLeases, coordVersion)
	}
	return r, fields, version, nil
}

// end checks that nothing follows the message.
func (r *reader) end() error {
	if r.off != len(r.b) {
		return fmt.Errorf("%w: %d bytes after the message", ErrMalformed, len(r.b)-r.off)
	}
	return nil
}

// column reads the header of an array column of want elements (nil: an
// empty one), refusing another length with the error of what.
func (r *reader) column(want int, what string) error {
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n = max(n, 0); n != want {
		return fmt.Errorf("%w: %d %s for %d limits", ErrMalformed, n, what, want)
	}
	return nil
}

// ints reads an array column of len(dst) integers (nil: an empty one)
// into dst, refusing another length.
func (r *reader) ints(dst []int64) (err error) {
	if err := r.column(len(dst), "figures"); err != nil {
		return err
	}
	for i := range dst {
		if dst[i], err = r.int(); err != nil {
			return err
		}
	}
	return nil
}

// decodeAsk decodes and checks an ask, filling a, whose slices it reuses
// (its strings alias b); the entries' origin is the sender. version is
// the ask's, in which it is answered. a is left partly filled by an error.
func (w *wire) decodeAsk(b []byte, lim DecodeLimits, a *counter.Ask) (from string, sentMs int64, id uint64, version uint8, err error) {
	r, fields, version, err := coordHeader(b, "ask")
	if err != nil {
		return "", 0, 0, 0, err
	}
	if fields != askFieldsV2 && fields != askFieldsV3 && fields != askFieldsV4 && fields != askFieldsV5 {
		return "", 0, 0, 0, fmt.Errorf("%w: ask of %d fields", ErrMalformed, fields)
	}
	if from, err = r.str(lim.MaxNameBytes); err != nil {
		return "", 0, 0, 0, err
	}
	if from == "" {
		return "", 0, 0, 0, fmt.Errorf("%w: sender name of 0 bytes", ErrMalformed)
	}
	if sentMs, err = r.int(); err != nil {
		return "", 0, 0, 0, err
	}
	if id, err = r.uint(math.MaxUint64); err != nil {
		return "", 0, 0, 0, err
	}
	if err := w.readAsk(&r, fields, version, lim, a); err != nil {
		return "", 0, 0, 0, err
	}
	from = w.name(from)
	for i := range a.Entries {
		a.Entries[i].Origin = from
	}
	return from, sentMs, id, version, nil
}

// readAsk reads an ask's fields after its ID into a, and checks them.
func (w *wire) readAsk(r *reader, fields int, version uint8, lim DecodeLimits, a *counter.Ask) (err error) {
	if a.Key, err = r.str(lim.MaxKeyBytes); err != nil {
		return err
	}
	if a.Key == "" {
		return fmt.Errorf("%w: key of 0 bytes", ErrMalformed)
	}
	if a.Hits, err = r.int(); err != nil {
		return err
	}
	if a.Hits < 1 || a.Hits > counter.MaxLimit {
		return fmt.Errorf("%w: hits %d", ErrMalformed, a.Hits)
	}
	n, err := r.arrayLen()
	if err != nil {
		return err
	}
	if n < 1 || n > counter.MaxLimitsPerCall {
		return fmt.Errorf("%w: %d limits", ErrMalformed, max(n, 0))
	}
	a.Limits = slices.Grow(a.Limits[:0], n)[:n]
	for i := range a.Limits {
		if a.Limits[i], err = r.str(lim.MaxNameBytes); err != nil {
			return err
		}
		if a.Limits[i] == "" {
			return fmt.Errorf("%w: limit name of 0 bytes", ErrMalformed)
		}
	}
	a.Preds = slices.Grow(a.Preds[:0], n)[:n]
	if err := r.column(n, "prediction starts"); err != nil {
		return err
	}
	for i := range a.Preds {
		if a.Preds[i].Start, err = r.int(); err != nil {
			return err
		}
	}
	if err := r.column(n, "predictions"); err != nil {
		return err
	}
	for i := range a.Preds {
		after, err := r.uint(math.MaxUint32)
		if err != nil {
			return err
		}
		a.Preds[i].After = uint32(after)
	}
	if err := w.readEntries(r, a); err != nil {
		return err
	}
	if a.Settled, err = r.uint(math.MaxUint64); err != nil {
		return err
	}
	a.Want, a.Gen, a.Max, a.Lead = 0, 0, a.Max[:0], 0
	if fields >= askFieldsV3 {
		if a.Want, err = r.int(); err != nil {
			return err
		}
		gen, err := r.uint(math.MaxUint32)
		if err != nil {
			return err
		}
		a.Gen = uint32(gen)
	}
	if version == coordVersionNoLeases && (a.Want != 0 || a.Gen != 0) || a.Want < 0 || a.Want > counter.MaxLimit {
		return fmt.Errorf("%w: want %d", ErrMalformed, a.Want)
	}
	nm := 0
	if fields >= askFieldsV4 {
		if nm, err = r.arrayLen(); err != nil {
			return err
		}
		nm = max(nm, 0)
	}
	// Version 4 states a max for each limit; version 5 for each or none.
	if version < coordVersionMax && nm != 0 || version == coordVersionMax && nm != n || version == coordVersion && nm != 0 && nm != n {
		return fmt.Errorf("%w: %d maxes for %d limits in a version %d ask", ErrMalformed, nm, n, version)
	}
	if nm > 0 {
		a.Max = slices.Grow(a.Max, nm)[:nm]
		for i := range a.Max {
			if a.Max[i], err = r.int(); err != nil {
				return err
			}
			if a.Max[i] < 0 || a.Max[i] > counter.MaxLimit {
				return fmt.Errorf("%w: stated max %d", ErrMalformed, a.Max[i])
			}
		}
	}
	if fields == askFieldsV5 {
		lead, err := r.int()
		if err != nil {
			return err
		}
		// At least a millisecond (an ask without a lead is version 3 or
		// 4), and no more than an hour: counter.Ask.Lead takes more than
		// the window as the window anyway.
		if lead < 1 || lead > maxLeadMs {
			return fmt.Errorf("%w: lead of %d ms", ErrMalformed, lead)
		}
		a.Lead = time.Duration(lead) * time.Millisecond
	}
	if (fields == askFieldsV5) != (version == coordVersion) {
		return fmt.Errorf("%w: a version %d ask of %d fields", ErrMalformed, version, fields)
	}
	return r.end()
}

// readEntries reads an ask's entry columns into a.Entries: each entry's
// limit, an index into a.Limits, and key a.Key (decodeAsk sets the
// origin).
func (w *wire) readEntries(r *reader, a *counter.Ask) error {
	lis, err := r.bytes(w.coord.entryLimits[:0], maxAskEntriesWire)
	if err != nil {
		return err
	}
	n := len(lis)
	a.Entries = slices.Grow(a.Entries[:0], n)[:n]
	if err := r.column(n, "entry starts"); err != nil {
		return err
	}
	for i := range a.Entries {
		e := &a.Entries[i]
		if int(lis[i]) >= len(a.Limits) {
			return fmt.Errorf("%w: entry of limit %d of %d", ErrMalformed, lis[i], len(a.Limits))
		}
		e.Limit, e.Key = a.Limits[lis[i]], a.Key
		if e.Start, err = r.int(); err != nil {
			return err
		}
	}
	if err := r.column(n, "entry counts"); err != nil {
		return err
	}
	for i := range a.Entries {
		c, err := r.uint(math.MaxUint32)
		if err != nil {
			return err
		}
		a.Entries[i].Count = uint32(c)
	}
	return nil
}

// decodeAnswer decodes an answer with a fresh wire (DecodeAnswer).
func decodeAnswer(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (Answer, error) {
	return newWire(h).decodeAnswer(b, lim)
}

// decodeAnswer decodes and checks an answer. Its Results are its own, and
// From is the copy of the sender's name.
func (w *wire) decodeAnswer(b []byte, lim DecodeLimits) (Answer, error) {
	r, fields, version, err := coordHeader(b, "answer")
	if err != nil {
		return Answer{}, err
	}
	if fields != answerFieldsV2 && fields != answerFields {
		return Answer{}, fmt.Errorf("%w: answer of %d fields", ErrMalformed, fields)
	}
	from, err := r.str(lim.MaxNameBytes)
	if err != nil {
		return Answer{}, err
	}
	if from == "" {
		return Answer{}, fmt.Errorf("%w: sender name of 0 bytes", ErrMalformed)
	}
	a := Answer{From: w.name(from)}
	if a.SentMs, err = r.int(); err != nil {
		return Answer{}, err
	}
	if a.ID, err = r.uint(math.MaxUint64); err != nil {
		return Answer{}, err
	}
	status, err := r.uint(math.MaxUint8)
	if err != nil {
		return Answer{}, err
	}
	if status != uint64(answerDecided) && status != uint64(answerUnable) {
		return Answer{}, fmt.Errorf("%w: answer status %d", ErrMalformed, status)
	}
	if a.Allowed, err = r.bool(); err != nil {
		return Answer{}, err
	}
	a.Decided = status == uint64(answerDecided)
	a.Allowed = a.Allowed && a.Decided
	var res [counter.MaxLimitsPerCall]counter.Result
	n, err := r.arrayLen()
	if err != nil {
		return Answer{}, err
	}
	if n = max(n, 0); n > counter.MaxLimitsPerCall {
		return Answer{}, fmt.Errorf("%w: answer columns of %d limits", ErrMalformed, n)
	}
	for i := range n {
		if res[i].Allowed, err = r.bool(); err != nil {
			return Answer{}, err
		}
	}
	// The figures, column by column: maxes, counts, pending counts,
	// remaining counts, retry and reset times (ms), then the leases.
	var figs [7][counter.MaxLimitsPerCall]int64
	for c := range 6 {
		if err := r.ints(figs[c][:n]); err != nil {
			return Answer{}, err
		}
	}
	wantLeases, nl, gen := n, 0, uint64(0)
	if version == coordVersionNoLeases {
		wantLeases = 0
	}
	if fields == answerFields {
		if nl, err = r.arrayLen(); err != nil {
			return Answer{}, err
		}
		if nl = max(nl, 0); nl != wantLeases {
			return Answer{}, fmt.Errorf("%w: %d leases for %d limits in a version %d answer", ErrMalformed, nl, n, version)
		}
		for i := range nl {
			if figs[6][i], err = r.int(); err != nil {
				return Answer{}, err
			}
		}
		if gen, err = r.uint(math.MaxUint32); err != nil {
			return Answer{}, err
		}
	}
	if err := r.end(); err != nil {
		return Answer{}, err
	}
	if nl != wantLeases || version == coordVersionNoLeases && gen != 0 {
		return Answer{}, fmt.Errorf("%w: %d leases for %d limits in a version %d answer", ErrMalformed, nl, n, version)
	}
	maxMs := int64(counter.MaxWindow / time.Millisecond)
	for i := range n {
		x := &res[i]
		x.Limit, x.Count, x.Pending, x.Remaining, x.Lease = figs[0][i], figs[1][i], figs[2][i], figs[3][i], figs[6][i]
		retryMs, resetMs := figs[4][i], figs[5][i]
		if x.Limit < 0 || x.Count < 0 || x.Pending < 0 || x.Pending > x.Count || x.Remaining < 0 || retryMs < 0 || resetMs < 0 {
			return Answer{}, fmt.Errorf("%w: negative figure in an answer", ErrMalformed)
		}
		if x.Lease < 0 || x.Lease > counter.MaxLimit {
			return Answer{}, fmt.Errorf("%w: lease %d in an answer", ErrMalformed, x.Lease)
		}
		x.RetryAfter = time.Duration(min(retryMs, maxMs)) * time.Millisecond
		x.Reset = time.Duration(min(resetMs, maxMs)) * time.Millisecond
		x.LeaseGen = uint32(gen)
	}
	if n > 0 {
		a.Results = append([]counter.Result(nil), res[:n]...)
	}
	return a, nil
}

// decodeRelease decodes and checks a release. Its Key and Limits alias b
// and w (w.coord.limits): valid until w's next decode or release.
func (w *wire) decodeRelease(b []byte, lim DecodeLimits) (decodedRelease, error) {
	var m decodedRelease
	r, fields, version, err := coordHeader(b, "release")
	if err != nil {
		return m, err
	}
	if fields != releaseFields {
		return m, fmt.Errorf("%w: release of %d fields", ErrMalformed, fields)
	}
	m.Version = version
	if m.From, err = r.str(lim.MaxNameBytes); err != nil {
		return m, err
	}
	if m.SentMs, err = r.int(); err != nil {
		return m, err
	}
	if m.ID, err = r.uint(math.MaxUint64); err != nil {
		return m, err
	}
	if m.Key, err = r.str(lim.MaxKeyBytes); err != nil {
		return m, err
	}
	if m.From == "" || m.Key == "" {
		return m, fmt.Errorf("%w: release names out of bounds", ErrMalformed)
	}
	n, err := r.arrayLen()
	if err != nil {
		return m, err
	}
	if n > counter.MaxLimitsPerCall {
		return m, fmt.Errorf("%w: %d limits", ErrMalformed, n)
	}
	if n >= 0 {
		// Any length: the reflective decoder checked none, and
		// counter.Release ignores a limit it does not know.
		m.Limits = slices.Grow(w.coord.limits[:0], n)[:n]
		w.coord.limits = m.Limits
		for i := range m.Limits {
			if r.off < len(r.b) && r.b[r.off] == mpNil {
				return m, r.errorf("limit name expected, nil")
			}
			if m.Limits[i], err = r.str(len(b)); err != nil {
				return m, err
			}
		}
	}
	if err := r.end(); err != nil {
		return m, err
	}
	m.From = w.name(m.From)
	return m, nil
}
