package engine

import (
	"fmt"
	"strings"

	"github.com/limiterd/limiterd/counter"
)

// The sync kinds, the first byte of their messages, for callers of
// EncodeEntries and DecodeEntries.
const (
	KindDelta = kindDelta // a tick's changes
	KindState = kindState // anti-entropy, catch-up, hello reply; empty, a heartbeat
	KindHello = kindHello // a new process asking for what it had counted
)

// SyncVersion is the newest sync message version this release writes
// and decodes; it decodes every older one too. A node states it in its
// membership metadata, and its peers write it only once every member
// states it (Engine.SetPeerSyncVersion).
const SyncVersion = wireVersion

// EncodeEntries encodes entries as sync messages of kind (KindDelta,
// KindState or KindHello) from the node named from, sent at sentMs (unix
// ms on its clock), none longer than maxBytes unless one entry alone is.
// It is the codec an Engine uses, for the transport's tests and tools that
// speak the protocol without an Engine (a peer that is not one, a forged
// or replayed message). It sorts entries in place.
func EncodeEntries(kind byte, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	return encodeEntries(newHandle(1024), kind, from, sentMs, entries, maxBytes)
}

// DecodeEntries decodes one sync message within lim: its kind, sender,
// send time and entries. An error wraps ErrMalformed.
func DecodeEntries(b []byte, lim DecodeLimits) (kind byte, from string, sentMs int64, entries []counter.Entry, err error) {
	kind, m, err := decode(newHandle(1024), b, lim)
	if err != nil {
		return kind, "", 0, nil, err
	}
	// The decoded strings alias b (wire.decode); the caller's entries own
	// theirs. One copy of each group's names serves all its entries.
	for i := range m.Groups {
		g := &m.Groups[i]
		g.Limit, g.Origin = strings.Clone(g.Limit), strings.Clone(g.Origin)
		for j := range g.Keys {
			g.Keys[j] = strings.Clone(g.Keys[j])
		}
	}
	return kind, m.From, m.SentMs, m.entries(nil), nil
}

// DecodeAnswer decodes a coordinator's answer within lim, for a tool that
// must read one no ask awaits (a simulation's oracle of lost answers);
// the engine returns the awaited ones from Receive. An error wraps
// ErrMalformed.
func DecodeAnswer(b []byte, lim DecodeLimits) (Answer, error) {
	if len(b) == 0 || b[0] != kindAnswer {
		return Answer{}, fmt.Errorf("%w: not an answer", ErrMalformed)
	}
	return decodeAnswer(newHandle(1024), b, lim)
}
