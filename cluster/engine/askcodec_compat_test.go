package engine

import (
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// The coordination codec's functions as the tests written against the
// reflective one call them, each with a fresh wire (h is unused, as
// newWire's). The engine calls the wire's methods, with a pooled wire.

func encodeAsk(h *codec.MsgpackHandle, from string, now time.Time, id uint64, a *counter.Ask) ([]byte, error) {
	return newWire(h).encodeAsk(from, now, id, a)
}

// decodeAsk fills a, whose strings then alias b.
func decodeAsk(h *codec.MsgpackHandle, b []byte, lim DecodeLimits, a *counter.Ask) (from string, sentMs int64, id uint64, version uint8, err error) {
	return newWire(h).decodeAsk(b, lim, a)
}

func encodeAnswer(h *codec.MsgpackHandle, version uint8, from string, now time.Time, id uint64, status uint8, allowed bool, res []counter.Result) ([]byte, error) {
	return newWire(h).encodeAnswer(version, from, now, id, status, allowed, res), nil
}

func encodeRelease(h *codec.MsgpackHandle, from string, now time.Time, id uint64, a *counter.Ask) ([]byte, error) {
	return newWire(h).encodeRelease(from, now, id, a.Key, a.Limits), nil
}

// decodeRelease returns a release whose strings alias b.
func decodeRelease(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (decodedRelease, error) {
	return newWire(h).decodeRelease(b, lim)
}
