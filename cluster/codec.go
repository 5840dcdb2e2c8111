package cluster

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
var ErrMalformed = errors.New("cluster: malformed message")

func newHandle(maxInit int) *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = maxInit // a lying length prefix cannot make us allocate much
	h.RawToString = true
	return h
}

// encodeEntries encodes entries into messages of kind, none longer than
// maxBytes. Entries are grouped by (limit, origin) so names are sent once a
// group; a group that does not fit is split across messages.
func encodeEntries(h *codec.MsgpackHandle, kind byte, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	slices.SortStableFunc(entries, func(a, b counter.Entry) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Origin, b.Origin))
	})
	var out [][]byte
	var groups []group
	size := 16 + len(from) // kind, array header, version, time, from
	flush := func() error {
		if len(groups) == 0 {
			return nil
		}
		b, err := encode(h, kind, message{Version: wireVersion, From: from, SentMs: sentMs, Groups: groups})
		if err != nil {
			return err
		}
		out = append(out, b)
		groups, size = nil, 16+len(from)
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
			groups = append(groups, group{Limit: e.Limit, Origin: e.Origin})
			g = &groups[len(groups)-1]
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
		b, err := encode(h, kind, message{Version: wireVersion, From: from, SentMs: sentMs})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

func encode(h *codec.MsgpackHandle, kind byte, m message) ([]byte, error) {
	var body []byte // the encoder writes from the start of its buffer
	if err := codec.NewEncoderBytes(&body, h).Encode(&m); err != nil {
		return nil, fmt.Errorf("cluster: encode: %w", err)
	}
	return append([]byte{kind}, body...), nil
}

// decode parses and checks one message. It never panics on any input.
func decode(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (kind byte, m message, err error) {
	if len(b) > lim.MaxMessageBytes {
		return 0, m, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), lim.MaxMessageBytes)
	}
	if len(b) < 2 {
		return 0, m, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	kind = b[0]
	if kind != kindDelta && kind != kindState && kind != kindHello {
		return 0, m, fmt.Errorf("%w: unknown kind %q", ErrMalformed, kind)
	}
	defer func() {
		if r := recover(); r != nil { // the codec panics on some inputs; contain it
			err = fmt.Errorf("%w: %v", ErrMalformed, r)
		}
	}()
	if err := codec.NewDecoderBytes(b[1:], h).Decode(&m); err != nil {
		return 0, m, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Version != wireVersion {
		return 0, m, fmt.Errorf("%w: version %d, want %d", ErrMalformed, m.Version, wireVersion)
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
			return 0, m, fmt.Errorf("%w: columns of %d keys, %d starts, %d counts", ErrMalformed, len(g.Keys), len(g.Starts), len(g.Counts))
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

// entries flattens a decoded message's groups.
func (m *message) entries(dst []counter.Entry) []counter.Entry {
	for _, g := range m.Groups {
		for i, k := range g.Keys {
			dst = append(dst, counter.Entry{Limit: g.Limit, Key: k, Origin: g.Origin, Start: g.Starts[i], Count: g.Counts[i]})
		}
	}
	return dst
}
