package engine

import (
	"fmt"
	"time"
)

// Receive decodes a message that arrived at now and merges its entries.
// It returns the sender and what to send back: for a hello the sender's
// state (StateFor), and for any other message from an up peer that was
// silent for longer than SilenceThreshold a catch-up (at most one per
// RejoinInterval per peer), since what it sent while cut off, and what we
// sent it, was lost. A malformed, oversized or other-version message is
// dropped whole, counted, and returned as an error wrapping ErrMalformed;
// the caller only logs it. Safe for concurrent use: only the peer table is
// locked, decoding and merging are not serialized.
func (e *Engine) Receive(now time.Time, b []byte) (Received, error) {
	e.Stats.MessagesReceived.Add(1)
	e.Stats.BytesReceived.Add(uint64(len(b)))
	if isCoordKind(b) {
		return e.receiveCoord(now, b)
	}
	if isResetKind(b) {
		return e.receiveReset(now, b) // reset.go
	}
	if len(b) > 0 && b[0] == kindSilent {
		return e.receiveSilent(now, b) // silence.go
	}
	if len(b) > 0 && b[0] == kindPassed {
		return e.receivePassed(now, b) // relay.go
	}
	if len(b) > 0 && b[0] == kindForward {
		return e.receiveForward(now, b) // relay.go
	}
	from, out, err := e.receiveSync(now, b)
	return Received{From: from, Out: out}, err
}

// IsSync reports whether b is a sync message: a delta, a state (anti-entropy,
// catch-up, hello reply) or a hello. Receive merges a sync message's entries,
// or answers a hello with a full state, which take far longer than the
// other kinds, and nothing waits on it with a deadline. The others (asks,
// answers, resets, notices) are waited on for a few milliseconds. A
// transport that delivers every message on one goroutine, in order, can
// hand the sync messages to another, so that a tick's deltas from every
// peer do not hold back the asks and answers that arrive behind them
// (cluster.Node does). Receive is safe for concurrent use, and the
// protocol takes messages in any order, as datagrams come.
func IsSync(b []byte) bool {
	return len(b) > 0 && (b[0] == kindDelta || b[0] == kindState || b[0] == kindHello)
}

// Received is what Receive returns for one message.
type Received struct {
	// From is the sender ("" when the message could not be decoded).
	From string
	// Out is what to send back: a hello's reply, a catch-up, an answer
	// to an ask.
	Out []Outbound
	// Answer, with Answered, is the answer to one of this node's pending
	// asks (Ask), from the node asked: the transport hands it to the
	// check waiting for Answer.ID. An answer nobody waits for (late, or
	// after AskExpired) is dropped here.
	Answer   Answer
	Answered bool
	// Reset, when set, is a reply to one of this node's resets: the
	// transport hands it to whoever waits for Reset.ID (reset.go).
	Reset *ResetReply
}

// receiveSync handles a sync message (delta, state, hello).
func (e *Engine) receiveSync(now time.Time, b []byte) (from string, out []Outbound, err error) {
	w := e.pool.Get().(*wire)
	// Then w keeps nothing of b, whose strings the decoded message
	// aliases (wire.decode): the transport may reuse b once we return.
	defer e.putDecoded(w)
	kind, m, err := w.decode(b, e.cfg.Limits)
	if err != nil {
		e.countDecodeError(err)
		return "", nil, err
	}
	from = m.From
	catchUp, reply, skewed, pull := false, false, false, false
	empty := kind == kindHello && e.holdsNothing()
	if from != e.cfg.Self {
		quiet := e.SilenceThreshold()
		if !e.member(from) {
			// Only a current member is heard: a forged or departed sender
			// costs no merge, no reply and no memory (its name is not kept).
			e.Stats.NotMember.Add(1)
			return from, nil, fmt.Errorf("%w: %.64q is no member here", ErrNotMember, from)
		}
		if age := now.UnixMilli() - m.SentMs; age > e.cfg.MaxMessageAge.Milliseconds() {
			// A captured message replayed, or a peer whose clock is far
			// behind: either way nothing it says can be placed in time.
			e.Stats.Stale.Add(1)
			return from, nil, fmt.Errorf("%w: a %q message from %.64q sent %d ms ago (at most %v)", ErrStale, kind, from, age, e.cfg.MaxMessageAge)
		}
		e.mu.Lock()
		p := e.peer(from)
		prev := p.LastMessage
		if p.heard(now) {
			e.moved.Store(true)
		}
		p.Offset = time.Duration(m.SentMs-now.UnixMilli()) * time.Millisecond
		note := e.updateSkew(p, now, m.SentMs)
		if kind == kindDelta {
			e.observeDelay(note.offset.Milliseconds() - (m.SentMs - now.UnixMilli()))
		}
		skewed = p.Skewed
		replay := false
		switch {
		case kind == kindHello && p.helloSet && m.SentMs <= p.lastHelloMs:
			// A hello costs a full state reply: one sent no later than the
			// last one answered is a replay (a process greets each peer
			// once, and a restarted one later than the process before it).
			// With a gossip key nobody can make a new one.
			replay = true
		case kind == kindHello:
			// A new process, which has had no catch-up yet. Answered now
			// if it is up here (else its PeerUp, which gives the transport
			// a way to reach it, sends it the same state) and the rate
			// limits allow; otherwise the state is owed, and a later Tick
			// sends it.
			p.helloSet, p.lastHelloMs = true, m.SentMs
			p.caughtUp = false
			if p.Up {
				reply = e.mayReply(p, now, empty)
			} else {
				e.owe(p)
			}
		case p.Up && !prev.IsZero() && now.Sub(prev) > quiet:
			catchUp = e.mayCatchUp(p, now, false)
		}
		// Back within MaxClockOffset: the slices of the peer's refused
		// meanwhile are missing as after a partition, and anti-entropy
		// re-sends only its hot keys. A hello asks for them: the peer
		// answers it with its state, under the limits of any hello. A
		// pull, not a catch-up pushed: the peer, which saw our clock as
		// far off, may not merge again yet (each side judges the
		// largest offset of the last two buckets, and a clock set back
		// leaves the larger one there for that long); it asks in turn.
		pull = p.Up && note.resumed && kind != kindHello
		e.mu.Unlock()
		e.logSkew(from, note)
		if replay {
			e.Stats.Replays.Add(1)
			return from, nil, fmt.Errorf("%w: a hello from %.64q sent at %d ms", ErrReplay, from, m.SentMs)
		}
	}
	if kind == kindHello {
		if !reply {
			return from, nil, nil
		}
		msgs, err := e.StateFor(now, from)
		if err != nil || len(msgs) == 0 {
			return from, nil, err
		}
		return from, []Outbound{{To: from, Purpose: PurposeReply, Msgs: msgs, Reliable: true}}, nil
	}
	if from != e.cfg.Self && !m.onlyFrom(from, e.cfg.Self) {
		// A node sends its own slices and, in a catch-up, the receiver's:
		// a slice of a third node's in its message is forged.
		n := m.dropOthers(from, e.cfg.Self)
		e.Stats.EntriesRefused.Add(uint64(n))
	}
	if skewed {
		// Its slices start on a clock too far from ours to place them in
		// our windows: not merged, so that each side counts the other's
		// requests as across a partition (doc.go). Our own slices, which
		// a catch-up or reply carries back, are on our clock and merged.
		e.Stats.SkewedMessages.Add(1)
		e.Stats.EntriesSkewed.Add(uint64(m.dropOrigin(from)))
	}
	w.entries = m.entries(w.entries[:0])
	ms := e.c.Merge(now, w.entries) // copies what it keeps (counter.Entry)
	e.Stats.EntriesMerged.Add(uint64(ms.Merged))
	e.Stats.EntriesIgnored.Add(uint64(ms.Unchanged + ms.Expired + ms.Unknown + ms.NoRoom + ms.Erased))
	e.Stats.EntriesRefused.Add(uint64(ms.Refused))
	if pull {
		msgs, err := e.encode(kindHello, now, nil, e.cfg.DatagramBytes)
		if err != nil {
			return from, nil, err
		}
		out = append(out, Outbound{To: from, Purpose: PurposeHello, Msgs: msgs, Reliable: true})
	}
	if !catchUp {
		return from, out, nil
	}
	// After the merge, so that the catch-up carries what just arrived.
	e.Stats.SilenceCatchUps.Add(1)
	msgs, err := e.StateFor(now, from)
	if err != nil || len(msgs) == 0 {
		return from, out, err
	}
	return from, append(out, Outbound{To: from, Purpose: PurposeCatchUp, Msgs: msgs, Reliable: true}), nil
}
