package engine

import (
	"bytes"
	"fmt"
	"slices"
	"time"
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

// answersKept is how many of the last answers a coordinator keeps, for
// a repeat (AskAgain): an asker repeats an ask at half its deadline (2.5
// ms by default, at most half a second), so the last 256 answers of all
// askers cover that at any rate below about 100,000 asks a second for
// the default deadline. A repeat of an older one is dropped as a replay,
// and its asker decides alone at its deadline, as it would have without
// repeating. One ring for the node, not one per asker: on 1,000 nodes a
// ring per asker cost each node 2.5 MB (limitsim scale, fallback run).
const answersKept = 256

// answerRing is the last answersKept answers this node gave, by asker and
// ask id. Under Engine.mu.
type answerRing struct {
	from [answersKept]string
	ids  [answersKept]uint64
	msgs [answersKept][]byte
	next int
}

// rememberAnswer keeps msg, the answer to ask id of from, for a repeat.
func (e *Engine) rememberAnswer(from string, id uint64, msg []byte) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &e.answers
	r.from[r.next], r.ids[r.next], r.msgs[r.next] = from, id, msg
	r.next = (r.next + 1) % answersKept
}

// answerAgain returns the answer given to ask id of from, if it is kept.
func (e *Engine) answerAgain(from string, id uint64) []byte {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := &e.answers
	for i, got := range r.ids {
		if got == id && r.msgs[i] != nil && r.from[i] == from {
			return r.msgs[i]
		}
	}
	return nil
}

// member reports whether messages from name are heard (Config.Members).
func (e *Engine) member(name string) bool {
	return e.cfg.Members == nil || e.cfg.Members(name)
}

// heard checks a coordination message from another node before any work
// (admissible) and records that its sender is alive.
func (e *Engine) heard(now time.Time, kind byte, from string, sentMs int64) error {
	if err := e.admissible(now, kind, from, sentMs); err != nil {
		return err
	}
	e.mu.Lock()
	if p := e.peers[from]; p != nil {
		if p.misses > 0 || p.told {
			e.moved.Store(true) // it may have been failed over (Moved)
		}
		p.misses, p.told = 0, false // alive: asked again if it had been failed over
		p.lastCoord = now
	}
	e.mu.Unlock()
	return nil
}

// admissible checks a coordination message from another node before any
// work: its sender must be a member and it must not be stale. It counts
// what it drops.
func (e *Engine) admissible(now time.Time, kind byte, from string, sentMs int64) error {
	if !e.member(from) {
		e.Stats.NotMember.Add(1)
		return fmt.Errorf("%w: %.64q is no member here", ErrNotMember, from)
	}
	if age := now.UnixMilli() - sentMs; age > e.cfg.MaxMessageAge.Milliseconds() {
		e.Stats.Stale.Add(1)
		return fmt.Errorf("%w: a %q message from %.64q sent %d ms ago (at most %v)", ErrStale, kind, from, age, e.cfg.MaxMessageAge)
	}
	return nil
}

// relayTo returns the node an ask or release of key from asker is passed
// on to, or "" when this node handles it: a check of a routed limit
// (counter.Counter.Routed) whose coordinator (relayTarget) is another
// peer that this node hears. Only the coordinator holds a routed key's
// counts: any other node deciding the key decides on a part of them.
func (e *Engine) relayTo(now time.Time, asker, key string, limits []string) string {
	routed := e.c.Routed()
	if !slices.ContainsFunc(limits, func(id string) bool { return routed[id] }) {
		return ""
	}
	return e.relayTarget(now, asker, key)
}

// relayTarget returns the key's coordinator, the first node on the ring,
// when it is another peer than this node and the asker and it is not
// silent: heard from (any message, an answer it sent here to forward
// included: heardThrough) within FailoverSilence, or, while this node has
// not failed it over, within SilenceThreshold. "" otherwise.
//
// A failover here does not stop the relay by itself: it may come of
// another node's notice, or of this node's own asks lost under loss,
// while the asker and the coordinator still reach each other, and a
// runner-up that decided then would grant on the part of the counts that
// it holds (docs/faults.md, "On routed sync", measured it). Silence for
// FailoverSilence is what passes a coordinator over after a miss on
// every node (failedOver), so a failed-over coordinator is relayed to no
// longer than an asker would ask it. One that this node has not failed
// over is relayed to until it is silent by the engine's measure
// (SilenceThreshold: three missed heartbeats): a live one is heard at
// least every AntiEntropyInterval, a lost heartbeat or two is no sign
// that it stopped, and the askers' notices of a stopped one fail it over
// here within a tick of their misses.
func (e *Engine) relayTarget(now time.Time, asker, key string) string {
	threshold := e.SilenceThreshold()
	e.mu.Lock()
	to := e.ringLocked().first(key)
	p := e.peers[to]
	var silence time.Duration
	if p != nil {
		// Any message is a sign of life: a coordination message too,
		// which LastMessage, about sync, does not count.
		last := p.LastMessage
		if p.lastCoord.After(last) {
			last = p.lastCoord
		}
		silence = now.Sub(last)
	}
	fresh := p != nil && (silence <= e.cfg.FailoverSilence ||
		silence <= threshold && !e.failedOver(p, now))
	e.mu.Unlock()
	if to == e.cfg.Self || to == asker {
		return ""
	}
	if !fresh {
		return ""
	}
	return to
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
		return e.answerAsk(now, b, "")
	case kindAnswer:
		return e.takeAnswer(now, b, true)
	default: // kindRelease
		w := e.pool.Get().(*wire)
		defer e.putDecoded(w) // m's strings alias b and w
		m, err := w.decodeRelease(b, e.cfg.Limits)
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
		if to := e.relayTo(now, m.From, m.Key, m.Limits); to != "" {
			return Received{From: m.From, Out: []Outbound{{To: to, Purpose: PurposeRelease, Msgs: [][]byte{bytes.Clone(b)}}}}, nil
		}
		e.Stats.Releases.Add(1)
		e.c.Release(now, m.From, m.ID, m.Key, m.Limits)
		return Received{From: m.From}, nil
	}
}

// answerAsk decides ask b, or passes it on (relayTo), and returns the
// answer for its asker. via, when not "", is the node that passed it on
// in an envelope (relay.go): the answer also goes there, forwarded, and
// the ask is not passed on again.
func (e *Engine) answerAsk(now time.Time, b []byte, via string) (Received, error) {
	w := e.pool.Get().(*wire)
	defer e.putDecoded(w) // a's strings alias b
	a := &w.coord.ask
	from, sentMs, id, version, err := w.decodeAsk(b, e.cfg.Limits, a)
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
	if to := e.relayTo(now, from, a.Key, a.Limits); to != "" && via == "" {
		// Not this node's key: the asker reached it instead of the key's
		// coordinator, which it failed over though this node reaches it
		// (a cut one way). Deciding here, without the counts only the
		// coordinator holds of a routed key, would make two coordinators
		// that each miss the other's grants. The coordinator answers the
		// asker directly, and through this node when it decodes the
		// envelope (relay.go); it alone tells a repeat (AskAgain) from a
		// replay.
		e.Stats.AsksRelayed.Add(1)
		msg := bytes.Clone(b)
		if e.relays(to) {
			if msg, err = encodeRelay(e.h, kindPassed, e.cfg.Self, b); err != nil {
				return Received{From: from}, err
			}
		}
		return Received{From: from, Out: []Outbound{{To: to, Purpose: PurposeAsk, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}}, nil
	}
	var msg []byte
	if !e.freshAsk(now, from, id, sentMs) {
		if msg = e.answerAgain(from, id); msg == nil {
			// Deciding an ask twice would grant it twice: a grant nobody
			// counts, which over-counts until it expires.
			e.Stats.Replays.Add(1)
			return Received{From: from}, fmt.Errorf("%w: ask %d from %.64q sent at %d ms", ErrReplay, id, from, sentMs)
		}
		// A repeat of an ask answered here, whose answer was lost or is
		// late: the same answer again, not a second decision.
		e.Stats.AnswersRepeated.Add(1)
	} else {
		res := w.coord.results(len(a.Limits))
		status, allowed := answerUnable, false
		if e.skewedPeer(from) {
			// The ask carries the asker's newest slices, which deciding
			// would merge: on a clock beyond MaxClockOffset they cannot be
			// placed. Unable: the asker decides alone, with its budget, as
			// across a partition, and at once rather than at its deadline.
			e.Stats.SkewedMessages.Add(1)
		} else {
			e.Stats.AsksAnswered.Add(1)
			e.noteLead(now, from, a.Lead)
			if d, cerr := e.c.Coordinate(now, from, id, a, res); cerr == nil {
				status, allowed = answerDecided, d.Allowed
			}
		}
		msg = w.encodeAnswer(version, e.cfg.Self, now, id, status, allowed, res)
		e.rememberAnswer(from, id, msg)
	}
	out := []Outbound{{To: from, Purpose: PurposeAnswer, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}
	if via != "" && via != from {
		fwd, err := encodeRelay(e.h, kindForward, from, msg)
		if err != nil {
			return Received{From: from}, err
		}
		out = append(out, Outbound{To: via, Purpose: PurposeAnswer, Msgs: [][]byte{fwd}, Reliable: len(fwd) > e.cfg.DatagramBytes})
	}
	return Received{From: from, Out: out}, nil
}

// takeAnswer takes answer b: returned if one of this node's asks awaits
// it. direct is whether it came from the coordinator itself, which then
// counts as a message from it (heard); a forwarded one does not.
func (e *Engine) takeAnswer(now time.Time, b []byte, direct bool) (Received, error) {
	w := e.pool.Get().(*wire)
	a, err := w.decodeAnswer(b, e.cfg.Limits) // a owns its strings and results
	e.putDecoded(w)
	if err != nil {
		e.countDecodeError(err)
		return Received{}, err
	}
	if a.From == e.cfg.Self {
		return Received{From: a.From}, nil
	}
	if direct {
		err = e.heard(now, kindAnswer, a.From, a.SentMs)
	} else {
		err = e.admissible(now, kindAnswer, a.From, a.SentMs)
	}
	if err != nil {
		return Received{From: a.From}, err
	}
	if !e.answered(a) {
		return Received{From: a.From}, nil // late, or not ours: nobody waits for it
	}
	return Received{From: a.From, Answer: a, Answered: true}, nil
}
