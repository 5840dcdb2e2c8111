package engine

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// askMemory is how long an ask's id is remembered against replays, and so
// the most Config.MaxMessageAge may be: an ask sent longer ago than
// MaxMessageAge (on its sender's clock, against ours) is stale, and one
// sent more recently is remembered for as long as it can be fresh. No
// check waits that long for an answer (the deadline is at most a second);
// the margin covers clock offsets far above the 100 ms alert.
const askMemory = 10 * time.Second

// maxAskIDs bounds the ids remembered per asker; past it, the expired
// ones go and, if none has, arbitrary ones (map order).
const maxAskIDs = 4096

// freshAsk reports whether an ask (from, id) sent at sentMs is one not
// decided already, and remembers it. The caller has checked that it is not
// stale (fresh).
func (e *Engine) freshAsk(now time.Time, from string, id uint64, sentMs int64) bool {
	nowMs := now.UnixMilli()
	if sentMs < nowMs-askMemory.Milliseconds() || sentMs > nowMs+askMemory.Milliseconds() {
		return false // its id could have been forgotten already
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.peer(from)
	if p.asks == nil {
		p.asks = make(map[uint64]int64)
	}
	if _, seen := p.asks[id]; seen {
		return false
	}
	if len(p.asks) >= maxAskIDs {
		for k, at := range p.asks {
			if at <= nowMs-askMemory.Milliseconds() || len(p.asks) >= maxAskIDs {
				delete(p.asks, k)
			}
		}
	}
	p.asks[id] = nowMs
	return true
}

// member reports whether messages from name are heard (Config.Members).
func (e *Engine) member(name string) bool {
	return e.cfg.Members == nil || e.cfg.Members(name)
}

// heard checks a coordination message from another node before any work:
// its sender must be a member and it must not be stale. It counts what it
// drops.
func (e *Engine) heard(now time.Time, kind byte, from string, sentMs int64) error {
	if !e.member(from) {
		e.Stats.NotMember.Add(1)
		return fmt.Errorf("%w: %.64q is no member here", ErrNotMember, from)
	}
	if age := now.UnixMilli() - sentMs; age > e.cfg.MaxMessageAge.Milliseconds() {
		e.Stats.Stale.Add(1)
		return fmt.Errorf("%w: a %q message from %.64q sent %d ms ago (at most %v)", ErrStale, kind, from, age, e.cfg.MaxMessageAge)
	}
	e.mu.Lock()
	if p := e.peers[from]; p != nil {
		p.misses = 0 // alive: asked again if it had been failed over
	}
	e.mu.Unlock()
	return nil
}

// isCoordKind reports whether a message is an ask, answer or release.
func isCoordKind(b []byte) bool {
	return len(b) > 0 && (b[0] == kindAsk || b[0] == kindAnswer || b[0] == kindRelease)
}

// receiveCoord handles an ask (decided here, the answer returned for the
// sender), an answer (returned if one of this node's asks awaits it) or a
// release.
func (e *Engine) receiveCoord(now time.Time, b []byte) (Received, error) {
	switch b[0] {
	case kindAsk:
		var a counter.Ask
		from, sentMs, id, version, err := decodeAsk(e.h, b, e.cfg.Limits, &a)
		if err != nil {
			e.countDecodeError(err)
			return Received{}, err
		}
		if from == e.cfg.Self {
			return Received{From: from}, nil
		}
		if err := e.heard(now, kindAsk, from, sentMs); err != nil {
			return Received{From: from}, err
		}
		if !e.freshAsk(now, from, id, sentMs) {
			// Deciding an ask twice would grant it twice: a grant nobody
			// counts, which over-counts until it expires.
			e.Stats.Replays.Add(1)
			return Received{From: from}, fmt.Errorf("%w: ask %d from %.64q sent at %d ms", ErrReplay, id, from, sentMs)
		}
		res := make([]counter.Result, len(a.Limits))
		status, allowed := answerUnable, false
		if e.skewedPeer(from) {
			// The ask carries the asker's newest slices, which deciding
			// would merge: on a clock beyond MaxClockOffset they cannot be
			// placed. Unable: the asker decides alone, with its budget, as
			// across a partition, and at once rather than at its deadline.
			e.Stats.SkewedMessages.Add(1)
		} else {
			e.Stats.AsksAnswered.Add(1)
			if d, cerr := e.c.Coordinate(now, from, id, &a, res); cerr == nil {
				status, allowed = answerDecided, d.Allowed
			}
		}
		msg, err := encodeAnswer(e.h, version, e.cfg.Self, now, id, status, allowed, res)
		if err != nil {
			return Received{From: from}, err
		}
		return Received{From: from, Out: []Outbound{{To: from, Purpose: PurposeAnswer, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}}, nil
	case kindAnswer:
		a, err := decodeAnswer(e.h, b, e.cfg.Limits)
		if err != nil {
			e.countDecodeError(err)
			return Received{}, err
		}
		if a.From == e.cfg.Self {
			return Received{From: a.From}, nil
		}
		if err := e.heard(now, kindAnswer, a.From, a.SentMs); err != nil {
			return Received{From: a.From}, err
		}
		if !e.answered(a) {
			return Received{From: a.From}, nil // late, or not ours: nobody waits for it
		}
		return Received{From: a.From, Answer: a, Answered: true}, nil
	default: // kindRelease
		m, err := decodeRelease(e.h, b, e.cfg.Limits)
		if err != nil {
			e.countDecodeError(err)
			return Received{}, err
		}
		if m.From == e.cfg.Self {
			return Received{From: m.From}, nil
		}
		if err := e.heard(now, kindRelease, m.From, m.SentMs); err != nil {
			return Received{From: m.From}, err
		}
		e.Stats.Releases.Add(1)
		e.c.Release(now, m.From, m.ID, m.Key, m.Limits)
		return Received{From: m.From}, nil
	}
}
