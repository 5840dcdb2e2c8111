package engine

import (
	"bytes"
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// Answers around a cut one way. A node A that hears nothing from a key's
// coordinator F, which still hears A and the others (a one-way cut, or a
// path that loses F's datagrams to A), fails F over. Its asks of F's keys
// then go to the runner-up R, which passes them on to F (relayTo) since R
// still hears F; and when A is the runner-up itself it used to ask nobody
// and decide alone with the budget, whose floor admits about a limit per
// window whatever the others admit (docs/faults.md, "On routed sync"). In
// both cases F's answer to A is lost on the cut. So an ask passed on goes
// in an envelope naming the relay ('P', passed), and F answers both A and,
// in a second envelope ('W', forward), the relay, which forwards it to A:
// an answer goes around the cut by the path the ask came. A node that is
// the runner-up of a key whose coordinator it failed over, while that
// coordinator is still a member, asks it through the next node on the
// ring (AsksAround) instead of deciding alone; that node passes the ask on
// if it hears the coordinator, and answers "unable" otherwise (the asker
// then decides alone, at once, as before).
//
// An ask sent around and given up is released to the node it went
// around to, directly (this node reaches it: only the other way is cut),
// not through the relay, which passes releases on for routed limits only.
//
// A forwarded answer is taken as an answer, not as a message from the
// coordinator: the asker still hears nothing from F itself, so F stays
// failed over there (else every forwarded answer would end the failover
// and the next ask would go to F directly, and be lost).
//
// Mixed versions: a node states in its membership metadata that it
// decodes the envelopes ("relay=1", SetPeerRelays). A node passes an ask
// on in an envelope only to a coordinator that decodes it, raw otherwise,
// as before; it asks around only through a node that decodes it.
const (
	kindPassed  byte = 'P' // an ask passed on: Node is the relay
	kindForward byte = 'W' // an answer to forward: Node is the asker
)

// relayVersion is the version of the envelopes this node sends and the
// only one it decodes.
const relayVersion = 1

// relayMsg is the body of both envelopes.
type relayMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Version uint8
	Node    string // 'P': the relay the answer also goes to; 'W': the asker
	Inner   []byte // 'P': an ask; 'W': an answer
}

func encodeRelay(h *codec.MsgpackHandle, kind byte, node string, inner []byte) ([]byte, error) {
	return encodeBody(h, kind, &relayMsg{Version: relayVersion, Node: node, Inner: inner})
}

// decodeRelay decodes and checks an envelope: its inner message must be
// of the kind it carries (an ask in 'P', an answer in 'W').
func decodeRelay(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (m relayMsg, err error) {
	if err := decodeBody(h, b, &m); err != nil {
		return m, err
	}
	want := kindAsk
	if b[0] == kindForward {
		want = kindAnswer
	}
	switch {
	case m.Version != relayVersion:
		return m, fmt.Errorf("%w: relay envelope version %d, want %d", ErrVersion, m.Version, relayVersion)
	case m.Node == "" || len(m.Node) > lim.MaxNameBytes:
		return m, fmt.Errorf("%w: node name of %d bytes in a relay envelope", ErrMalformed, len(m.Node))
	case len(m.Inner) == 0 || m.Inner[0] != want:
		return m, fmt.Errorf("%w: a %q envelope that does not hold a %q message", ErrMalformed, b[0], want)
	}
	return m, nil
}

// SetPeerRelays records whether the peer name decodes the relay
// envelopes, as its membership metadata states it (false for a release
// before them). A peer never told is taken to decode them (the
// simulator's and the tests' engines are all of this release).
func (e *Engine) SetPeerRelays(name string, ok bool) {
	if name == e.cfg.Self {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.peer(name).noRelay = !ok
}

// relays reports whether peer name decodes the relay envelopes.
func (e *Engine) relays(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.peers[name]
	return p != nil && !p.noRelay
}

// aroundVia returns the node through which this node asks about key when
// it is the key's runner-up (every node above it failed over here): the
// next up peer on the ring, not failed over, that decodes the envelopes;
// "" when there is none, and when no node above this one is a member
// still (they left or died: nothing to reach around). Under e.mu.
func (e *Engine) aroundVia(now time.Time, key string) string {
	r := e.ringLocked()
	if r.first(key) == e.cfg.Self {
		return ""
	}
	via, past := "", false
	r.walk(key, func(name string) bool {
		if name == e.cfg.Self {
			past = true
			return true
		}
		p := e.peers[name]
		if !past || p == nil || e.failedOver(p, now) || p.noRelay {
			return true
		}
		via = name
		return false
	})
	return via
}

// receivePassed takes an ask passed on in an envelope. For the node the
// envelope names (asked to pass it on, by an asker that is the key's
// runner-up), it passes it on to the key's coordinator when it hears that
// one, and answers "unable" otherwise; for any other node, it is an ask
// to decide, whose answer goes to the asker and, forwarded, to the relay.
func (e *Engine) receivePassed(now time.Time, b []byte) (Received, error) {
	m, err := decodeRelay(e.h, b, e.cfg.Limits)
	if err != nil {
		e.countDecodeError(err)
		return Received{}, err
	}
	if m.Node != e.cfg.Self {
		return e.answerAsk(now, m.Inner, m.Node)
	}
	w := e.pool.Get().(*wire)
	defer e.putDecoded(w) // a's strings alias b
	a := &w.coord.ask
	from, sentMs, id, version, err := w.decodeAsk(m.Inner, e.cfg.Limits, a)
	if err != nil {
		e.countDecodeError(err)
		return Received{}, err
	}
	if from == e.cfg.Self {
		return Received{From: from}, nil
	}
	if err := e.heard(now, kindPassed, from, sentMs); err != nil {
		return Received{From: from}, err
	}
	// Of any limit, routed or not: the asker, the key's runner-up, has
	// failed every node above it over and would decide alone.
	if to := e.relayTarget(now, from, a.Key); to != "" && e.relays(to) {
		e.Stats.AsksRelayed.Add(1)
		return Received{From: from, Out: []Outbound{{To: to, Purpose: PurposeAsk, Msgs: [][]byte{bytes.Clone(b)}, Reliable: len(b) > e.cfg.DatagramBytes}}}, nil
	}
	// Nobody to pass it to: the asker decides alone, now.
	msg := w.encodeAnswer(version, e.cfg.Self, now, id, answerUnable, false, w.coord.results(len(a.Limits)))
	return Received{From: from, Out: []Outbound{{To: from, Purpose: PurposeAnswer, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}}, nil
}

// receiveForward takes an answer forwarded by the node an ask was passed
// on by: for the asker it names, an answer (taken without counting as a
// message from the coordinator, see above); for the relay, to forward.
func (e *Engine) receiveForward(now time.Time, b []byte) (Received, error) {
	m, err := decodeRelay(e.h, b, e.cfg.Limits)
	if err != nil {
		e.countDecodeError(err)
		return Received{}, err
	}
	if m.Node != e.cfg.Self {
		if !e.member(m.Node) {
			e.Stats.NotMember.Add(1)
			return Received{}, fmt.Errorf("%w: an answer to forward to %.64q, no member here", ErrNotMember, m.Node)
		}
		e.Stats.AnswersForwarded.Add(1)
		e.heardThrough(now, m.Inner)
		return Received{Out: []Outbound{{To: m.Node, Purpose: PurposeAnswer, Msgs: [][]byte{bytes.Clone(b)}, Reliable: len(b) > e.cfg.DatagramBytes}}}, nil
	}
	return e.takeAnswer(now, m.Inner, false)
}

// heardThrough records the coordinator of an answer this node forwards as
// heard: it sent the envelope here, so it is alive and reaches this node,
// and this node reaches it (the ask went through here). A node that passes
// asks on thus keeps hearing the coordinator as long as it answers them
// (relayTarget), whatever its sync traffic. An answer that does not decode
// is still forwarded: the asker judges it.
func (e *Engine) heardThrough(now time.Time, answer []byte) {
	w := e.pool.Get().(*wire)
	defer e.putDecoded(w) // a's strings alias answer and w
	a, err := w.decodeAnswer(answer, e.cfg.Limits)
	if err != nil || a.From == e.cfg.Self {
		return
	}
	_ = e.heard(now, kindAnswer, a.From, a.SentMs) // a stale or foreign one is counted and not heard
}
