package engine

import (
	"slices"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// The asking side of coordination: a check at the margin becomes an ask
// (Ask), its answer comes back through Receive (Received.Answer), and an
// ask whose deadline passes first is given up (AskExpired), which returns
// the release for its coordinator. The engine keeps the ids, the settled
// watermark and each coordinator's misses; the transport only sends and
// waits, so a simulation drives the same protocol as a node.

// Asked is what Ask returns: a check decided here, or an ask to send.
type Asked struct {
	// Local is true when this node is the key's coordinator: the check
	// was decided and, if allowed, counted here (Decision), and nothing is
	// sent.
	Local    bool
	Decision counter.Decision
	// Alone is true when every node placed above this one for the key has
	// missed its asks (failed over) and no node can carry an ask around
	// to them (Around): nothing is sent, and the caller decides alone with
	// the budget (counter.AllowFallback) at once, without waiting. This
	// node does not take the key's coordination on itself: every node that
	// lost its peers that way would, and each would admit up to the limit
	// (a partition's bound) instead of the budget's.
	Alone bool
	// Around is true when every node placed above this one is failed over
	// and the ask goes, in an envelope, to the next node on the ring,
	// which passes it on to the key's coordinator if it hears it, and
	// answers "unable" otherwise (relay.go).
	Around bool
	// ID and Out, when not Local: the ask, to send at once to Out.To (as
	// one datagram, or over a stream when Out.Reliable). Its answer comes
	// back from Receive with this ID; without one by the deadline, call
	// AskExpired(ID).
	ID uint64
	// RunnerUp is true when the key's coordinator was passed over for
	// missing its asks (Config.FailoverMisses, FailoverSilence) and Out.To
	// is the next member on the ring.
	RunnerUp bool
	Out      Outbound
}

// pendingAsk is an ask sent and neither answered nor given up.
type pendingAsk struct {
	to     string
	key    string
	limits []string // for the release
	// around is the node the ask went around to (Asked.Around): its
	// release goes to it directly, not through to, which would keep a
	// release of a broadcast limit's ask (relay.go).
	around string
}

// Ask starts the check of ask at now, which counter.PrepareAsk filled for
// a check the counter left to the key's coordinator (results has one
// place per limit). The coordinator is the key's node on the ring (CoordinatorOf) among
// this node and its up peers that have not missed their asks (see
// Coordinator). When that is this node, it decides at once, as the
// coordinator of its own check. Otherwise it sets ask.Settled and returns
// the ask message. Safe for concurrent use.
func (e *Engine) Ask(now time.Time, ask *counter.Ask, results []counter.Result) (Asked, error) {
	to, runnerUp := e.coordinator(now, ask.Key)
	via, around := "", ""
	if to == e.cfg.Self && runnerUp {
		// Every node above this one is failed over here. One may be
		// silent to this node alone (a cut one way): ask it through the
		// next node, which passes the ask on if it hears it (relay.go).
		e.mu.Lock()
		via = e.aroundVia(now, ask.Key)
		around = e.ringLocked().first(ask.Key)
		e.mu.Unlock()
		if via == "" {
			e.Stats.AsksAlone.Add(1)
			return Asked{Alone: true}, nil
		}
		to = via
	}
	switch {
	case to == e.cfg.Self:
		d, err := e.c.Coordinate(now, to, 0, ask, results)
		return Asked{Local: true, Decision: d}, err
	}
	// The lead of the clocks of the nodes that may decide the ask: the
	// one asked, and the key's first node on the ring, to which it may
	// pass the ask on (relay.go; around, when set, is that node).
	e.mu.Lock()
	ask.Lead = e.leadOf(now, to, e.ringLocked().first(ask.Key))
	e.mu.Unlock()
	e.askMu.Lock()
	e.askSeq++
	id := e.askSeq
	// Settled: every ask at or below it is over (answered or given up),
	// so a grant of such an id that the asker's slices do not show was
	// never counted, and the coordinator stops counting it.
	settled := id - 1
	for other := range e.pending {
		settled = min(settled, other-1)
	}
	e.pending[id] = pendingAsk{to: to, key: ask.Key, limits: slices.Clone(ask.Limits), around: around}
	e.askMu.Unlock()
	ask.Settled = settled
	w := e.pool.Get().(*wire)
	msg, err := w.encodeAsk(e.cfg.Self, now, id, ask)
	e.pool.Put(w)
	if err == nil && via != "" {
		msg, err = encodeRelay(e.h, kindPassed, via, msg)
	}
	if err != nil {
		e.askMu.Lock()
		delete(e.pending, id)
		e.askMu.Unlock()
		return Asked{}, err
	}
	switch {
	case via != "":
		e.Stats.AsksAround.Add(1)
	case runnerUp:
		e.Stats.AsksToRunnerUp.Add(1)
	default:
		e.Stats.AsksToCoordinator.Add(1)
	}
	return Asked{ID: id, RunnerUp: runnerUp, Around: via != "", Out: Outbound{To: to, Purpose: PurposeAsk, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}, nil
}

// AskExpired gives up on ask id at now: no answer came by the deadline,
// or it could not be sent. It counts a miss against the coordinator asked
// and returns the release to send it (Outbound.To: the node asked, or for
// an ask sent around, the node it went around to) (ok false when the ask is not
// pending: answered meanwhile, or given up already), so that a grant it
// may have made, and this node did not count, stops counting at once. The
// release is best effort: an unreleased grant expires anyway, and the
// next ask's Settled tells the coordinator it was never counted.
func (e *Engine) AskExpired(now time.Time, id uint64) (release Outbound, ok bool, err error) {
	e.askMu.Lock()
	p, ok := e.pending[id]
	delete(e.pending, id)
	e.askMu.Unlock()
	if !ok {
		return Outbound{}, false, nil
	}
	e.Stats.AsksExpired.Add(1)
	e.mu.Lock()
	if pr := e.peers[p.to]; pr != nil {
		pr.misses++
		e.moved.Store(true)
		pr.AsksExpired++
	}
	e.mu.Unlock()
	w := e.pool.Get().(*wire)
	msg := w.encodeRelease(e.cfg.Self, now, id, p.key, p.limits)
	e.pool.Put(w)
	to := p.to
	if p.around != "" {
		to = p.around
	}
	return Outbound{To: to, Purpose: PurposeRelease, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}, true, nil
}

// AskAgain reports whether ask id is still pending (neither answered nor
// given up), and counts it as asked again when it is: the caller sends
// the ask's message again, the same bytes and id, because no answer came
// within part of its deadline (cluster.Node: half of it) and one lost
// datagram, either way, would explain that. The coordinator decides an ask
// once: a repeat of one it answered gets the same answer again
// (answerAgain), and of one it never got is decided as the first. Either
// answer, whichever comes first, is taken; the other finds nothing
// pending.
func (e *Engine) AskAgain(id uint64) bool {
	e.askMu.Lock()
	_, ok := e.pending[id]
	e.askMu.Unlock()
	if ok {
		e.Stats.AsksRetried.Add(1)
	}
	return ok
}

// answered takes the pending ask an answer is for: it must come from the
// node asked. It reports whether the answer is awaited.
func (e *Engine) answered(a Answer) bool {
	e.askMu.Lock()
	defer e.askMu.Unlock()
	// From the node asked, or from the coordinator it passed the ask on
	// to (a routed key's, relayTo): any member may answer, as any member
	// may send counts.
	if _, ok := e.pending[a.ID]; !ok {
		return false
	}
	delete(e.pending, a.ID)
	return true
}

// Pending returns the number of asks sent and neither answered nor given up.
func (e *Engine) Pending() int {
	e.askMu.Lock()
	defer e.askMu.Unlock()
	return len(e.pending)
}

// Coordinator returns the node this engine asks about key at now: the
// key's node on the ring (CoordinatorOf) of this node and its up peers,
// passing over a peer that missed its asks (failed over, see
// Config.FailoverMisses) until it is heard from again. Nodes that see the
// same members and the same misses agree. It is this node when every peer
// placed above it is failed over, in which case Ask decides nothing.
func (e *Engine) Coordinator(now time.Time, key string) string {
	name, _ := e.coordinator(now, key)
	return name
}

// coordinator returns the node to ask about key, and whether it is a
// runner-up: a better placed peer was passed over for missing its asks.
func (e *Engine) coordinator(now time.Time, key string) (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	r := e.ringLocked()
	top := r.first(key)
	if p := e.peers[top]; top == e.cfg.Self || p != nil && !e.failedOver(p, now) {
		return top, false // the common case: no walk
	}
	best := e.cfg.Self
	r.walk(key, func(name string) bool {
		if name == e.cfg.Self {
			return false // never failed over: this node can always decide alone
		}
		if p := e.peers[name]; p != nil && !e.failedOver(p, now) {
			best = name
			return false
		}
		return true
	})
	return best, true
}

// ringLocked returns the ring of this node and its up peers, rebuilt if
// membership changed since it was built. Under e.mu.
func (e *Engine) ringLocked() *ring {
	if e.ring == nil {
		members := []string{e.cfg.Self}
		for name, p := range e.peers {
			if p.Up {
				members = append(members, name)
			}
		}
		e.ring = newRing(members)
	}
	return e.ring
}

// failedOver reports whether peer p is passed over as a coordinator at
// now: it missed FailoverMisses asks in a row, or it missed one and has
// been silent (no message at all) for FailoverSilence. Any message from it
// ends that (heard). A peer whose clock is beyond MaxClockOffset ahead
// (Skewed) is passed over too, until it is back within: this node does
// not merge its slices, so the two count each other's requests as across
// a partition (doc.go, "Clock skew"), and that must hold for the keys it
// coordinates as well. Asked, it would decide them on its clock, where
// this node's slices leave its window early and its own stay late; and
// a routed key's changes would go to it. Under e.mu.
func (e *Engine) failedOver(p *peer, now time.Time) bool {
	switch {
	case p.Skewed:
		return true
	case p.misses == 0:
		return false
	case p.misses >= e.cfg.FailoverMisses:
		return true
	}
	return now.Sub(p.LastMessage) >= e.cfg.FailoverSilence
}

// heard records a message from p at now: it is alive, so it is asked
// again if it had been failed over. It reports whether p had missed asks
// or been told of (it may have been failed over). Under e.mu.
func (p *peer) heard(now time.Time) bool {
	was := p.misses > 0 || p.told
	p.LastMessage = now
	p.misses, p.told = 0, false
	return was
}

// FailedOver returns the up peers currently passed over as coordinators,
// sorted.
func (e *Engine) FailedOver(now time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for name, p := range e.peers {
		if p.Up && e.failedOver(p, now) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
