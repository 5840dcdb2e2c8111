package engine

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// A reset of a key (the admin listener's DELETE) makes every node forget
// the key's counts under some of its limits (counter.ApplyReset has the
// argument). It is ordered through the key's coordinator: the node asked,
// the asker, sends the reset to the coordinator (Reset), which applies it
// under the key's lock at its own instant R, so that the reset falls
// between two of the checks it decides, and sends it, with R, to every up
// peer over a stream; each applies it with that R and acknowledges it to
// the asker, and the coordinator answers the asker with R and the peers it
// told. The engine keeps no state of a reset: the asker's transport waits
// for the answer (Received.Reset) and the acknowledgements, and decides
// how long; ids come from the asks' sequence, so an ask's replay guard
// covers resets too (a reset asked again would erase what was counted
// since).

// ResetStarted is what Reset returns: a reset applied here, as the key's
// coordinator, with the messages that tell the peers; or a reset to send
// to the coordinator.
type ResetStarted struct {
	// ID names the reset in its answer and acknowledgements
	// (ResetReply.ID).
	ID uint64
	// Coordinator is the node that orders the reset: the key's
	// coordinator as Ask would pick it.
	Coordinator string
	// Local is true when Coordinator is this node: the reset was applied
	// here at At, and Out sends it to Told, every up peer (a stream each).
	Local bool
	At    int64
	Told  []string
	// Out is what to send: the reset to every peer in Told when Local,
	// else the reset for Coordinator (one datagram, or a stream when
	// Reliable; its answer comes back from Receive).
	Out []Outbound
}

// ResetReply is a reply to one of this node's resets, as Receive returns
// it (Received.Reset): the coordinator's answer, or a node's
// acknowledgement. The transport hands it to whoever waits for ID; one
// nobody waits for is dropped there.
type ResetReply struct {
	ID   uint64
	From string
	// Answer: From is the coordinator, and At and Told are set when it
	// applied the reset. Otherwise From acknowledges that it received the
	// reset (Applied says whether it applied it).
	Answer  bool
	Applied bool
	// Reason says why From did not apply the reset ("" when it did).
	Reason string
	At     int64
	Told   []string
}

// Reset starts a reset of key's counts under limits (counter.LimitID) at
// now. When this node coordinates the key (Coordinator; a node whose every
// better placed peer is failed over coordinates it too, since a reset must
// be ordered somewhere and those peers are silent), it applies the reset
// here and returns the messages that tell every up peer. Otherwise it
// returns the reset for the coordinator. An error from the counter
// (counter.ErrTooManyResets) is returned as it is, and nothing is sent.
// Safe for concurrent use.
func (e *Engine) Reset(now time.Time, key string, limits []string) (ResetStarted, error) {
	to, _ := e.coordinator(now, key)
	e.askMu.Lock()
	e.askSeq++
	id := e.askSeq
	e.askMu.Unlock()
	st := ResetStarted{ID: id, Coordinator: to}
	if to == e.cfg.Self {
		r, cst, err := e.c.Reset(now, key, limits)
		if err == nil && cst.Unknown == len(limits) {
			err = fmt.Errorf("%w: none of the limits %q is registered here", counter.ErrUnknownLimit, limits)
		}
		if err != nil {
			return st, err
		}
		st.Local, st.At = true, r.At
		st.Told, st.Out, err = e.tellPeers(now, e.cfg.Self, id, &r)
		return st, err
	}
	msg, err := encodeReset(e.h, kindResetAsk, e.cfg.Self, now, id, e.cfg.Self, &counter.Reset{Key: key, Limits: limits})
	if err != nil {
		return st, err
	}
	st.Out = []Outbound{{To: to, Purpose: PurposeReset, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}
	return st, nil
}

// tellPeers returns the reset r, applied here, for every up peer: over a
// stream, since a reset lost is counts not erased on that node.
func (e *Engine) tellPeers(now time.Time, asker string, id uint64, r *counter.Reset) ([]string, []Outbound, error) {
	peers := e.upPeers()
	if len(peers) == 0 {
		return nil, nil, nil
	}
	msg, err := encodeReset(e.h, kindResetApply, e.cfg.Self, now, id, asker, r)
	if err != nil {
		return nil, nil, err
	}
	out := make([]Outbound, 0, len(peers))
	for _, p := range peers {
		out = append(out, Outbound{To: p, Purpose: PurposeReset, Msgs: [][]byte{msg}, Reliable: true})
	}
	return peers, out, nil
}

// resetStatus is the status of a reset applied by the counter.
func resetStatus(st counter.ResetStats, limits int, err error) uint8 {
	switch {
	case errors.Is(err, counter.ErrTooManyResets):
		return resetTooMany
	case err != nil || st.Unknown == limits:
		return resetUnknown
	}
	return resetApplied
}

// receiveReset handles a reset asked (applied here as the coordinator,
// sent on to the peers, answered), a reset applied by the coordinator
// (applied here, acknowledged), and an answer or an acknowledgement of
// this node's own reset (returned for the transport to deliver).
func (e *Engine) receiveReset(now time.Time, b []byte) (Received, error) {
	switch b[0] {
	case kindResetAsk, kindResetApply:
		var r counter.Reset
		m, err := decodeReset(e.h, b, e.cfg.Limits, &r)
		if err != nil {
			e.countDecodeError(err)
			return Received{}, err
		}
		if m.From == e.cfg.Self {
			return Received{From: m.From}, nil
		}
		if err := e.heard(now, b[0], m.From, m.SentMs); err != nil {
			return Received{From: m.From}, err
		}
		if b[0] == kindResetAsk {
			return e.coordinateReset(now, m, r)
		}
		return e.applyReset(now, m, r)
	default: // kindResetDone, kindResetAck
		m, err := decodeResetReply(e.h, b, e.cfg.Limits)
		if err != nil {
			e.countDecodeError(err)
			return Received{}, err
		}
		if m.From == e.cfg.Self {
			return Received{From: m.From}, nil
		}
		if err := e.heard(now, b[0], m.From, m.SentMs); err != nil {
			return Received{From: m.From}, err
		}
		return Received{From: m.From, Reset: &ResetReply{
			ID: m.ID, From: m.From, Answer: b[0] == kindResetDone, Applied: m.Status == resetApplied,
			Reason: resetReason(m.Status), At: m.At, Told: m.Told,
		}}, nil
	}
}

// coordinateReset makes a peer's reset here as the key's coordinator, at
// now (counter.Reset picks R), and returns the answer for the asker and the reset for every up
// peer (the asker among them, which applies it as any peer does).
func (e *Engine) coordinateReset(now time.Time, m resetMsg, r counter.Reset) (Received, error) {
	if !e.freshAsk(now, m.From, m.ID, m.SentMs) {
		// Applied again, it would erase what was counted since the first.
		e.Stats.Replays.Add(1)
		return Received{From: m.From}, fmt.Errorf("%w: reset %d from %.64q sent at %d ms", ErrReplay, m.ID, m.From, m.SentMs)
	}
	r, st, err := e.c.Reset(now, r.Key, r.Limits)
	status := resetStatus(st, len(r.Limits), err)
	var told []string
	var out []Outbound
	if status == resetApplied {
		// Decoded strings may alias the message; the peers' messages are
		// encoded now, and the counter keeps copies.
		if told, out, err = e.tellPeers(now, m.From, m.ID, &r); err != nil {
			return Received{From: m.From}, err
		}
	}
	ans, err := encodeResetReply(e.h, kindResetDone, e.cfg.Self, now, m.ID, status, r.At, told)
	if err != nil {
		return Received{From: m.From}, err
	}
	// The answer first: the asker waits for it.
	out = slices.Insert(out, 0, Outbound{To: m.From, Purpose: PurposeAnswer, Msgs: [][]byte{ans}, Reliable: len(ans) > e.cfg.DatagramBytes})
	return Received{From: m.From, Out: out}, nil
}

// applyReset applies the coordinator's reset here, with its instant, and
// returns the acknowledgement for the asker (or, when the asker is this
// node, the acknowledgement itself). A coordinator whose clock is beyond
// MaxClockOffset ahead is not followed: its R is in this node's future by
// more than the offset the counter's clamp is meant for, and its slices
// are not merged here anyway.
func (e *Engine) applyReset(now time.Time, m resetMsg, r counter.Reset) (Received, error) {
	status := resetSkewed
	if !e.skewedPeer(m.From) {
		st, err := e.c.ApplyReset(now, r)
		status = resetStatus(st, len(r.Limits), err)
	}
	if m.Asker == e.cfg.Self {
		return Received{From: m.From, Reset: &ResetReply{ID: m.ID, From: e.cfg.Self, Applied: status == resetApplied, Reason: resetReason(status)}}, nil
	}
	ack, err := encodeResetReply(e.h, kindResetAck, e.cfg.Self, now, m.ID, status, 0, nil)
	if err != nil {
		return Received{From: m.From}, err
	}
	return Received{From: m.From, Out: []Outbound{{To: m.Asker, Purpose: PurposeAnswer, Msgs: [][]byte{ack}, Reliable: len(ack) > e.cfg.DatagramBytes}}}, nil
}
