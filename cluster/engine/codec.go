package engine

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// Message kinds, the first byte of every sync message.
const (
	kindDelta byte = 'D' // changes since the sender's last tick
	kindState byte = 'S' // anti-entropy or catch-up: a set of live slices
	kindHello byte = 'H' // "I (re)started: send me what I had counted"
)

// wireVersion is the message format version; a receiver drops others.
const wireVersion = 1

// message is the msgpack body after the kind byte.
type message struct {
	_struct struct{} `codec:",toarray"` //nolint:unused // msgpack: encode as an array, no field names
	Version uint8
	From    string // sender's node name
	SentMs  int64  // sender's clock when it sent, unix ms: for the offset metric
	Groups  []group
}

// group holds the entries of one (limit, origin) as parallel columns.
type group struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Limit   string
	Origin  string
	Keys    []string
	Starts  []int64
	Counts  []uint32
}

// DecodeLimits bound what a decoder accepts; a message beyond them is
// dropped whole (and counted), never half-applied.
type DecodeLimits struct {
	MaxMessageBytes int // default 1 MiB
	MaxEntries      int // per message, default 100,000
	MaxKeyBytes     int // default 1024, as limiter.MaxKeyBytes
	MaxNameBytes    int // node and limit names, default 512
}

// DefaultDecodeLimits returns the defaults documented on DecodeLimits.
func DefaultDecodeLimits() DecodeLimits {
	return DecodeLimits{MaxMessageBytes: 1 << 20, MaxEntries: 100_000, MaxKeyBytes: 1024, MaxNameBytes: 512}
}

// ErrMalformed wraps every decode error.
var ErrMalformed = errors.New("engine: malformed message")

func newHandle(maxInit int) *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = maxInit // a lying length prefix cannot make us allocate much
	h.RawToString = true
	return h
}

// wire is the reusable state of encoding and decoding messages: the codec's
// encoder and decoder, their buffers, and the decoded message whose columns
// the next decode fills again. An Engine pools them, so the sync path's
// garbage is the messages it sends and the keys it decodes, not buffers
// regrown for every message. A wire is used by one goroutine at a time.
type wire struct {
	h       *codec.MsgpackHandle
	enc     *codec.Encoder
	dec     *codec.Decoder
	body    []byte          // the encoder's output, before the kind byte
	groups  []group         // being encoded
	m       message         // last decoded
	entries []counter.Entry // last decoded, flattened
}

func newWire(h *codec.MsgpackHandle) *wire {
	w := &wire{h: h}
	w.enc = codec.NewEncoderBytes(&w.body, h)
	w.dec = codec.NewDecoderBytes(nil, h)
	return w
}

// encodeEntries encodes entries into messages of kind with a fresh wire.
func encodeEntries(h *codec.MsgpackHandle, kind byte, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	return newWire(h).encodeEntries(kind, from, sentMs, entries, maxBytes)
}

// decode decodes one message with a fresh wire.
func decode(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (byte, message, error) {
	kind, m, err := newWire(h).decode(b, lim)
	if m == nil {
		return kind, message{}, err
	}
	return kind, *m, err
}

// encodeEntries encodes entries into messages of kind, none longer than
// maxBytes. Entries are grouped by (limit, origin) so names are sent once a
// group; a group that does not fit is split across messages. It sorts
// entries in place.
func (w *wire) encodeEntries(kind byte, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	slices.SortStableFunc(entries, func(a, b counter.Entry) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Origin, b.Origin))
	})
	var out [][]byte
	groups := w.groups[:0]
	defer func() { w.groups = groups[:0] }()
	size := 16 + len(from) // kind, array header, version, time, from
	flush := func() error {
		if len(groups) == 0 {
			return nil
		}
		b, err := w.encode(kind, message{Version: wireVersion, From: from, SentMs: sentMs, Groups: groups})
		if err != nil {
			return err
		}
		out = append(out, b)
		for i := range groups {
			clear(groups[i].Keys) // drop key references while the wire waits in the pool
		}
		groups, size = groups[:0], 16+len(from)
		return nil
	}
	for _, e := range entries {
		esize := len(e.Key) + 18 // string header (<=3), int64 (9), uint32 (<=5), slack
		var g *group
		if n := len(groups); n > 0 && groups[n-1].Limit == e.Limit && groups[n-1].Origin == e.Origin {
			g = &groups[n-1]
		}
		gsize := 0
		if g == nil {
			gsize = len(e.Limit) + len(e.Origin) + 24
		}
		if size+esize+gsize > maxBytes && len(groups) > 0 {
			if err := flush(); err != nil {
				return nil, err
			}
			g, gsize = nil, len(e.Limit)+len(e.Origin)+24
		}
		if g == nil {
			// Reuse the columns of a group an earlier message left behind.
			n := len(groups)
			if n < cap(groups) {
				groups = groups[:n+1]
			} else {
				groups = append(groups, group{})
			}
			g = &groups[n]
			g.Limit, g.Origin = e.Limit, e.Origin
			g.Keys, g.Starts, g.Counts = g.Keys[:0], g.Starts[:0], g.Counts[:0]
		}
		g.Keys = append(g.Keys, e.Key)
		g.Starts = append(g.Starts, e.Start)
		g.Counts = append(g.Counts, e.Count)
		size += esize + gsize
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if kind == kindHello && len(out) == 0 {
		b, err := w.encode(kind, message{Version: wireVersion, From: from, SentMs: sentMs})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// encode returns kind followed by m's encoding, in a slice of its own (the
// transport keeps it until every peer's copy is sent).
func (w *wire) encode(kind byte, m message) ([]byte, error) {
	w.body = w.body[:0] // the encoder writes from the start of its buffer
	w.enc.ResetBytes(&w.body)
	if err := w.enc.Encode(&m); err != nil {
		return nil, fmt.Errorf("engine: encode: %w", err)
	}
	out := make([]byte, 1+len(w.body))
	out[0] = kind
	copy(out[1:], w.body)
	return out, nil
}

// decode parses and checks one message into w.m, reusing its columns. It
// never panics on any input. The message is valid until w's next decode.
func (w *wire) decode(b []byte, lim DecodeLimits) (kind byte, m *message, err error) {
	if len(b) > lim.MaxMessageBytes {
		return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), lim.MaxMessageBytes)
	}
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	kind = b[0]
	if kind != kindDelta && kind != kindState && kind != kindHello {
		return 0, nil, fmt.Errorf("%w: unknown kind %q", ErrMalformed, kind)
	}
	defer func() {
		if r := recover(); r != nil { // the codec panics on some inputs; contain it
			kind, m, err = 0, nil, fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	// The decoder fills what the input has and leaves the rest: a short
	// array (or a map) would keep fields of the message decoded before,
	// maybe another peer's. Zero every field, keeping only the columns'
	// capacity for reuse (FuzzDecode found it).
	m = &w.m
	groups := m.Groups[:cap(m.Groups)]
	for i := range groups {
		g := &groups[i]
		*g = group{Keys: g.Keys[:0], Starts: g.Starts[:0], Counts: g.Counts[:0]}
	}
	*m = message{Groups: groups[:0]}
	w.dec.ResetBytes(b[1:])
	if err := w.dec.Decode(m); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Version != wireVersion {
		return 0, nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, m.Version, wireVersion)
	}
	if m.From == "" || len(m.From) > lim.MaxNameBytes {
		return 0, nil, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	}
	n := 0
	for _, g := range m.Groups {
		switch {
		case len(g.Limit) == 0 || len(g.Limit) > lim.MaxNameBytes || len(g.Origin) == 0 || len(g.Origin) > lim.MaxNameBytes:
			return 0, nil, fmt.Errorf("%w: limit or origin name out of bounds", ErrMalformed)
		case len(g.Keys) != len(g.Starts) || len(g.Keys) != len(g.Counts):
			return 0, nil, fmt.Errorf("%w: columns of %d keys, %d starts, %d counts", ErrMalformed, len(g.Keys), len(g.Starts), len(g.Counts))
		}
		for _, k := range g.Keys {
			if k == "" || len(k) > lim.MaxKeyBytes {
				return 0, nil, fmt.Errorf("%w: key of %d bytes", ErrMalformed, len(k))
			}
		}
		if n += len(g.Keys); n > lim.MaxEntries {
			return 0, nil, fmt.Errorf("%w: more than %d entries", ErrMalformed, lim.MaxEntries)
		}
	}
	return kind, m, nil
}

// entries flattens a decoded message's groups.
func (m *message) entries(dst []counter.Entry) []counter.Entry {
	for _, g := range m.Groups {
		for i, k := range g.Keys {
			dst = append(dst, counter.Entry{Limit: g.Limit, Key: k, Origin: g.Origin, Start: g.Starts[i], Count: g.Counts[i]})
		}
	}
	return dst
}

// onlyFrom reports whether every group's origin is a or b.
func (m *message) onlyFrom(a, b string) bool {
	for _, g := range m.Groups {
		if g.Origin != a && g.Origin != b {
			return false
		}
	}
	return true
}

// dropOthers removes the groups whose origin is neither a nor b and
// returns how many entries they held.
func (m *message) dropOthers(a, b string) int {
	n := 0
	m.Groups = slices.DeleteFunc(m.Groups, func(g group) bool {
		if g.Origin != a && g.Origin != b {
			n += len(g.Keys)
			return true
		}
		return false
	})
	return n
}
