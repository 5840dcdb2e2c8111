package engine

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// The coordination messages as go-msgpack wrote and read them before the
// hand-written codec (askcodec.go, askcodec_decode.go): the structs that
// defined their layouts and the reflective encoders and decoders, kept
// verbatim but for their names as the oracle the new codec is held to
// (askcodec_oracle_test.go), as oracleDecode is for the sync kinds.

// askMsg is an ask's msgpack body: counter.Ask in columns, the entries'
// limits as indexes into Limits. Version 4 appends the stated maxes to a
// version 3 body (askV3, inlined: the array is one flat list of fields),
// version 5 the lead (askV4 is version 4's body alone).
type askMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	askV3
	Max    []int64 // counter.Ask.Max, parallel to Limits; version 4 (version 5: or nil)
	LeadMs int64   // counter.Ask.Lead in whole ms, 1 to maxLeadMs; version 5
}

// askV4 is a version 4 ask: what an ask that states a max and has no lead
// is sent as.
type askV4 struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	askV3
	Max []int64 // counter.Ask.Max, parallel to Limits
}

// v4 is m's version 4 body: m without its lead.
func (m *askMsg) v4() *askV4 { return &askV4{askV3: m.askV3, Max: m.Max} }

// askV3 is a version 3 ask (version 2 without Want and Gen): what an ask
// that states no max is sent as.
type askV3 struct {
	_struct     struct{} `codec:",toarray"` //nolint:unused
	Version     uint8
	From        string
	SentMs      int64
	ID          uint64
	Key         string
	Hits        int64
	Limits      []string
	PredStarts  []int64
	PredAfters  []uint32
	EntryLimits []uint8
	EntryStarts []int64
	EntryCounts []uint32
	Settled     uint64 // counter.Ask.Settled
	Want        int64  // counter.Ask.Want; version 3
	Gen         uint32 // counter.Ask.Gen; version 3
}

// answerMsg is an answer's body: the decision and the coordinator's view
// of each limit, in ask order. Version 3 appends the leases to a version
// 2 body (answerV2, inlined: the array is one flat list of fields);
// versions 4 and 5 are version 3's layout (an answer's Max was always the
// max decided with).
type answerMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	answerV2
	Leases   []int64 // per limit: counter.Result.Lease; version 3
	LeaseGen uint32  // counter.Result.LeaseGen, the same for every limit; version 3
}

// answerV2 is a version 2 answer, what a version 2 node is answered.
type answerV2 struct {
	_struct   struct{} `codec:",toarray"` //nolint:unused
	Version   uint8
	From      string
	SentMs    int64
	ID        uint64
	Status    uint8
	Allowed   bool
	Fits      []bool  // per limit: it had room
	Max       []int64 // the declared limit
	Counts    []int64
	Pending   []int64 // of Counts, grants the coordinator's merged slices do not show yet
	Remaining []int64
	RetryMs   []int64
	ResetMs   []int64
}

// releaseMsg is a release's body.
type releaseMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Version uint8
	From    string
	SentMs  int64
	ID      uint64
	Key     string
	Limits  []string
}

// oracleEncodeAsk encodes a as version 5 if it has a lead (counter.Ask.Lead
// of a millisecond or more: its Max written if it states one, else nil),
// else as version 4 if it states a max (counter.Ask.Max), else as version 3.
func oracleEncodeAsk(h *codec.MsgpackHandle, from string, now time.Time, id uint64, a *counter.Ask) ([]byte, error) {
	m := askMsg{askV3: askV3{Version: coordVersionLeases, From: from, SentMs: now.UnixMilli(), ID: id, Key: a.Key, Hits: a.Hits, Limits: a.Limits, Settled: a.Settled, Want: a.Want, Gen: a.Gen}}
	for _, p := range a.Preds {
		m.PredStarts = append(m.PredStarts, p.Start)
		m.PredAfters = append(m.PredAfters, p.After)
	}
	for _, e := range a.Entries {
		i := indexOf(a.Limits, e.Limit)
		if i < 0 || e.Key != a.Key {
			continue
		}
		m.EntryLimits = append(m.EntryLimits, uint8(i))
		m.EntryStarts = append(m.EntryStarts, e.Start)
		m.EntryCounts = append(m.EntryCounts, e.Count)
	}
	states := statesMax(a)
	if states && len(a.Max) != len(a.Limits) {
		return nil, fmt.Errorf("engine: encode: an ask of %d limits states %d maxes", len(a.Limits), len(a.Max))
	}
	if states {
		m.Max = a.Max
	}
	switch {
	case a.Lead >= time.Millisecond:
		m.Version, m.LeadMs = coordVersion, a.Lead.Milliseconds()
		return encodeBody(h, kindAsk, &m)
	case states:
		m.Version = coordVersionMax
		return encodeBody(h, kindAsk, m.v4())
	}
	return encodeBody(h, kindAsk, &m.askV3)
}

// arrayFields returns the length of the msgpack array that starts b's
// body, or -1 if it does not start with an array. go-msgpack decodes a
// short array into a struct leaving the missing fields zero, so an ask's
// LeadMs of 0 does not tell a 17-field ask from a shorter one: the oracle
// reads the count from the array's header.
func arrayFields(b []byte) int {
	switch {
	case len(b) >= 2 && b[1]&0xf0 == 0x90:
		return int(b[1] & 0x0f)
	case len(b) >= 4 && b[1] == 0xdc:
		return int(binary.BigEndian.Uint16(b[2:]))
	case len(b) >= 6 && b[1] == 0xdd:
		return int(binary.BigEndian.Uint32(b[2:]))
	}
	return -1
}

// oracleDecodeAsk decodes and checks an ask, filling a; the entries' origin is
// the sender. version is the ask's, in which it is answered.
func oracleDecodeAsk(h *codec.MsgpackHandle, b []byte, lim DecodeLimits, a *counter.Ask) (from string, sentMs int64, id uint64, version uint8, err error) {
	var m askMsg
	if err := decodeBody(h, b, &m); err != nil {
		return "", 0, 0, 0, err
	}
	switch {
	case !knownCoordVersion(m.Version):
		return "", 0, 0, 0, fmt.Errorf("%w: ask version %d, want %d to %d", ErrVersion, m.Version, coordVersionNoLeases, coordVersion)
	case m.Version == coordVersionNoLeases && (m.Want != 0 || m.Gen != 0), m.Want < 0 || m.Want > counter.MaxLimit:
		return "", 0, 0, 0, fmt.Errorf("%w: want %d", ErrMalformed, m.Want)
	case m.Version < coordVersionMax && len(m.Max) != 0, m.Version == coordVersionMax && len(m.Max) != len(m.Limits),
		m.Version == coordVersion && len(m.Max) != 0 && len(m.Max) != len(m.Limits):
		return "", 0, 0, 0, fmt.Errorf("%w: %d maxes for %d limits in a version %d ask", ErrMalformed, len(m.Max), len(m.Limits), m.Version)
	case m.Version == coordVersion && (m.LeadMs < 1 || m.LeadMs > maxLeadMs), m.Version < coordVersion && m.LeadMs != 0:
		return "", 0, 0, 0, fmt.Errorf("%w: lead of %d ms in a version %d ask", ErrMalformed, m.LeadMs, m.Version)
	case (arrayFields(b) == askFieldsV5) != (m.Version == coordVersion):
		return "", 0, 0, 0, fmt.Errorf("%w: a version %d ask of %d fields", ErrMalformed, m.Version, arrayFields(b))
	case m.From == "" || len(m.From) > lim.MaxNameBytes:
		return "", 0, 0, 0, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	case m.Key == "" || len(m.Key) > lim.MaxKeyBytes:
		return "", 0, 0, 0, fmt.Errorf("%w: key of %d bytes", ErrMalformed, len(m.Key))
	case m.Hits < 1 || m.Hits > counter.MaxLimit:
		return "", 0, 0, 0, fmt.Errorf("%w: hits %d", ErrMalformed, m.Hits)
	case len(m.Limits) == 0 || len(m.Limits) > counter.MaxLimitsPerCall:
		return "", 0, 0, 0, fmt.Errorf("%w: %d limits", ErrMalformed, len(m.Limits))
	case len(m.PredStarts) != len(m.Limits) || len(m.PredAfters) != len(m.Limits):
		return "", 0, 0, 0, fmt.Errorf("%w: %d predictions for %d limits", ErrMalformed, len(m.PredStarts), len(m.Limits))
	case len(m.EntryLimits) != len(m.EntryStarts) || len(m.EntryLimits) != len(m.EntryCounts) || len(m.EntryLimits) > maxAskEntriesWire:
		return "", 0, 0, 0, fmt.Errorf("%w: entry columns of %d, %d, %d", ErrMalformed, len(m.EntryLimits), len(m.EntryStarts), len(m.EntryCounts))
	}
	for _, l := range m.Limits {
		if l == "" || len(l) > lim.MaxNameBytes {
			return "", 0, 0, 0, fmt.Errorf("%w: limit name of %d bytes", ErrMalformed, len(l))
		}
	}
	for _, x := range m.Max {
		if x < 0 || x > counter.MaxLimit {
			return "", 0, 0, 0, fmt.Errorf("%w: stated max %d", ErrMalformed, x)
		}
	}
	a.Key, a.Hits, a.Limits, a.Settled, a.Want, a.Gen, a.Max = m.Key, m.Hits, m.Limits, m.Settled, m.Want, m.Gen, m.Max
	a.Lead = time.Duration(m.LeadMs) * time.Millisecond
	a.Preds, a.Entries = a.Preds[:0], a.Entries[:0]
	for i := range m.Limits {
		a.Preds = append(a.Preds, counter.Pred{Start: m.PredStarts[i], After: m.PredAfters[i]})
	}
	for i, li := range m.EntryLimits {
		if int(li) >= len(m.Limits) {
			return "", 0, 0, 0, fmt.Errorf("%w: entry of limit %d of %d", ErrMalformed, li, len(m.Limits))
		}
		a.Entries = append(a.Entries, counter.Entry{Limit: m.Limits[li], Key: m.Key, Origin: m.From, Start: m.EntryStarts[i], Count: m.EntryCounts[i]})
	}
	return m.From, m.SentMs, m.ID, m.Version, nil
}

// oracleEncodeAnswer encodes an answer in version (that of the ask it answers):
// a version 2 answer has no leases.
func oracleEncodeAnswer(h *codec.MsgpackHandle, version uint8, from string, now time.Time, id uint64, status uint8, allowed bool, res []counter.Result) ([]byte, error) {
	m := answerMsg{answerV2: answerV2{Version: version, From: from, SentMs: now.UnixMilli(), ID: id, Status: status, Allowed: allowed}}
	for _, r := range res {
		m.Fits = append(m.Fits, r.Allowed)
		m.Max = append(m.Max, r.Limit)
		m.Counts = append(m.Counts, r.Count)
		m.Pending = append(m.Pending, r.Pending)
		m.Remaining = append(m.Remaining, r.Remaining)
		m.RetryMs = append(m.RetryMs, r.RetryAfter.Milliseconds())
		m.ResetMs = append(m.ResetMs, r.Reset.Milliseconds())
		m.Leases = append(m.Leases, r.Lease)
		m.LeaseGen = max(m.LeaseGen, r.LeaseGen)
	}
	if version == coordVersionNoLeases {
		return encodeBody(h, kindAnswer, &m.answerV2)
	}
	return encodeBody(h, kindAnswer, &m)
}

func oracleDecodeAnswer(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (Answer, error) {
	var m answerMsg
	if err := decodeBody(h, b, &m); err != nil {
		return Answer{}, err
	}
	n := len(m.Counts)
	switch {
	case !knownCoordVersion(m.Version):
		return Answer{}, fmt.Errorf("%w: answer version %d, want %d to %d", ErrVersion, m.Version, coordVersionNoLeases, coordVersion)
	case m.Version > coordVersionNoLeases && len(m.Leases) != n, m.Version == coordVersionNoLeases && (len(m.Leases) != 0 || m.LeaseGen != 0):
		return Answer{}, fmt.Errorf("%w: %d leases for %d limits in a version %d answer", ErrMalformed, len(m.Leases), n, m.Version)
	case m.From == "" || len(m.From) > lim.MaxNameBytes:
		return Answer{}, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	case n > counter.MaxLimitsPerCall || len(m.Fits) != n || len(m.Max) != n || len(m.Pending) != n || len(m.Remaining) != n || len(m.RetryMs) != n || len(m.ResetMs) != n:
		return Answer{}, fmt.Errorf("%w: answer columns of unequal length", ErrMalformed)
	case m.Status != answerDecided && m.Status != answerUnable:
		return Answer{}, fmt.Errorf("%w: answer status %d", ErrMalformed, m.Status)
	}
	a := Answer{From: m.From, ID: m.ID, SentMs: m.SentMs, Decided: m.Status == answerDecided, Allowed: m.Allowed && m.Status == answerDecided}
	for i := range n {
		if m.Max[i] < 0 || m.Counts[i] < 0 || m.Pending[i] < 0 || m.Pending[i] > m.Counts[i] || m.Remaining[i] < 0 || m.RetryMs[i] < 0 || m.ResetMs[i] < 0 {
			return Answer{}, fmt.Errorf("%w: negative figure in an answer", ErrMalformed)
		}
		var lease int64
		if len(m.Leases) > 0 {
			if lease = m.Leases[i]; lease < 0 || lease > counter.MaxLimit {
				return Answer{}, fmt.Errorf("%w: lease %d in an answer", ErrMalformed, lease)
			}
		}
		retry := time.Duration(min(m.RetryMs[i], int64(counter.MaxWindow/time.Millisecond))) * time.Millisecond
		a.Results = append(a.Results, counter.Result{
			Allowed:    m.Fits[i],
			Limit:      m.Max[i],
			Count:      m.Counts[i],
			Pending:    m.Pending[i],
			Remaining:  m.Remaining[i],
			RetryAfter: retry,
			Reset:      time.Duration(min(m.ResetMs[i], int64(counter.MaxWindow/time.Millisecond))) * time.Millisecond,
			Lease:      lease,
			LeaseGen:   m.LeaseGen,
		})
	}
	return a, nil
}

// oracleEncodeRelease encodes a release as version 3, whatever the ask's: its
// layout is unchanged since, and a version 3 coordinator decodes it.
func oracleEncodeRelease(h *codec.MsgpackHandle, from string, now time.Time, id uint64, a *counter.Ask) ([]byte, error) {
	return encodeBody(h, kindRelease, &releaseMsg{Version: coordVersionLeases, From: from, SentMs: now.UnixMilli(), ID: id, Key: a.Key, Limits: a.Limits})
}

func oracleDecodeRelease(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (releaseMsg, error) {
	var m releaseMsg
	if err := decodeBody(h, b, &m); err != nil {
		return m, err
	}
	switch {
	case !knownCoordVersion(m.Version):
		return m, fmt.Errorf("%w: release version %d, want %d to %d", ErrVersion, m.Version, coordVersionNoLeases, coordVersion)
	case m.From == "" || len(m.From) > lim.MaxNameBytes || m.Key == "" || len(m.Key) > lim.MaxKeyBytes:
		return m, fmt.Errorf("%w: release names out of bounds", ErrMalformed)
	case len(m.Limits) > counter.MaxLimitsPerCall:
		return m, fmt.Errorf("%w: %d limits", ErrMalformed, len(m.Limits))
	}
	return m, nil
}
