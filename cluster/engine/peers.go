package engine

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// PeerState is what an Engine knows of one peer.
type PeerState struct {
	// Up is whether the peer is a live member (PeerUp without PeerDown
	// since): it is sent deltas and anti-entropy and counted by SetNodes.
	Up bool
	// LastMessage is when the last message from the peer was received; the
	// zero time if none was.
	LastMessage time.Time
	// Offset is the peer's clock minus ours, estimated from its last
	// message's send time (so it includes the one-way network delay).
	Offset time.Duration
	// AsksExpired counts this node's asks to the peer given up without an
	// answer by their deadline (AskExpired), since the peer was first
	// known: a coordinator's misses, which fail it over (ask.go).
	AsksExpired uint64
	// Skewed is whether the peer's clock was beyond MaxClockOffset as of
	// its last sync message (judged on the largest offset of the last one
	// to two anti-entropy intervals): the slices of its own that it sends
	// are not merged.
	Skewed bool
}

// peer is the engine's state of one peer, under Engine.mu.
type peer struct {
	PeerState
	greeted     bool             // this engine sent it a hello
	asks        map[uint64]int64 // ids of its asks decided here, and when (freshAsk)
	helloSet    bool             // lastHelloMs is set
	lastHelloMs int64            // send time of the last hello answered (the sender's clock)
	caughtUp    bool             // lastCatchUp is set
	lastCatchUp time.Time        // when it was last sent a catch-up
	replied     bool             // lastReply is set
	lastReply   time.Time        // when a hello of its was last answered
	stateDue    bool             // owed a full state that a rate limit held back (Tick sends it)
	clock       clockEstimate    // its clock offset, for MaxClockOffset (skew.go)
	misses      int              // asks to it given up in a row since it was last heard (ask.go)
	told        bool             // its failover was told to the peers, or by one, since it was last heard (silence.go)
	toldAt      time.Time        // when this node last told the peers it failed it over
	noRelay     bool             // it does not decode the relay envelopes (SetPeerRelays)
	noLead      bool             // it does not decode version 5 asks, which state a lead (SetPeerCoordVersion)
	leadSet     bool             // leadMs is set
	leadMs      int64            // the lead of this node's clock its last ask decided here reported (counter.Ask.Lead)
	leadAtMs    int64            // when that ask was decided, unix ms
	lastCoord   time.Time        // its last coordination message, answers forwarded through this node included (heard)
	// decodes is the newest sync version it decodes (SetPeerSyncVersion);
	// 0 when not told, taken as wireVersion.
	decodes uint8
}

// peer returns name's state, created if new. Under e.mu.
func (e *Engine) peer(name string) *peer {
	p := e.peers[name]
	if p == nil {
		p = &peer{}
		e.peers[name] = p
	}
	return p
}

// mayCatchUp reports whether p may be sent a catch-up at now, and if so
// records it. Under e.mu. A peer that flaps (falsely declared dead, back a
// moment later) must not cost a full state transfer each time: within
// RejoinInterval of its last catch-up it missed at most that long of
// deltas, and anti-entropy re-sends the keys near their limit anyway. A
// catch-up refused only by the total limit (MaxStateSends) is owed.
func (e *Engine) mayCatchUp(p *peer, now time.Time, empty bool) bool {
	if p.caughtUp && now.Sub(p.lastCatchUp) < e.cfg.RejoinInterval {
		return false
	}
	if !empty && !e.takeState(now) {
		e.owe(p)
		return false
	}
	p.caughtUp, p.lastCatchUp = true, now
	return e.stateSent(p, empty, &e.Stats.CatchUps)
}

// mayReply reports whether p's new process may have its hello answered at
// now, and if so records it; if not, the state is owed. Under e.mu. A
// process that really started gets its state within a RejoinInterval
// whatever the limits; a flood of forged hellos naming a real member
// (without a gossip key anyone can make one) costs one full state per
// peer per RejoinInterval, and MaxStateSends per RejoinInterval in all.
func (e *Engine) mayReply(p *peer, now time.Time, empty bool) bool {
	if p.replied && now.Sub(p.lastReply) < e.cfg.RejoinInterval || !empty && !e.takeState(now) {
		e.owe(p)
		return false
	}
	p.replied, p.lastReply = true, now
	return e.stateSent(p, empty, &e.Stats.Replies)
}

// stateSent records that p is sent a full state now and reports whether
// there is one to send, counted in sent. An empty one (holdsNothing) is
// recorded as sent, but neither sent nor counted. Under e.mu.
func (e *Engine) stateSent(p *peer, empty bool, sent *atomic.Uint64) bool {
	e.paid(p)
	if empty {
		return false
	}
	sent.Add(1)
	return true
}

// holdsNothing reports whether the counter tracks no key: a full state
// would then be empty, so a catch-up or hello reply is recorded as done
// but not sent, and takes no full-state send. Else a cluster started all at once
// would owe each node N − 1 states past MaxStateSends, which later Ticks
// send, each a scan of a table full by then, carrying what the deltas
// have carried meanwhile. Not under e.mu: it locks the counter's shards.
func (e *Engine) holdsNothing() bool {
	return e.c.Stats().Keys == 0
}

// takeState takes one full-state send from the MaxStateSends bucket. Under e.mu.
func (e *Engine) takeState(now time.Time) bool {
	return e.states.take(now, float64(e.cfg.MaxStateSends), e.cfg.RejoinInterval)
}

// owe records that p is owed a full state. Under e.mu.
func (e *Engine) owe(p *peer) {
	if !p.stateDue {
		p.stateDue = true
		e.owed++
		e.Stats.StatesDeferred.Add(1)
	}
}

// paid records that p was sent a full state. Under e.mu.
func (e *Engine) paid(p *peer) {
	if p.stateDue {
		p.stateDue = false
		e.owed--
	}
}

// owedStates returns the full states owed to up peers that the rate
// limits now allow, for Tick. Its cost is one check when none is owed.
func (e *Engine) owedStates(now time.Time) ([]Outbound, error) {
	e.mu.Lock()
	var due []string
	if e.owed > 0 {
		for name, p := range e.peers {
			if p.stateDue && p.Up && e.mayReply(p, now, false) {
				due = append(due, name)
			}
		}
	}
	e.mu.Unlock()
	slices.Sort(due)
	var out []Outbound
	for _, name := range due {
		msgs, err := e.StateFor(now, name)
		if err != nil {
			return out, err
		}
		if len(msgs) > 0 {
			out = append(out, Outbound{To: name, Purpose: PurposeReply, Msgs: msgs, Reliable: true})
		}
	}
	return out, nil
}

// PeerUp records that name joined, came back, or was seen joining again
// (a join event for a peer already up is not an error: it may have
// restarted between two membership events). It returns a catch-up for it
// (this node's slices and the peer's own that it holds, rate-limited per
// peer by RejoinInterval) and, once per engine and peer, a hello, which
// the peer answers with the slices this node had sent it: so a node that
// restarts under its name learns back what it had counted, even when the
// cluster had not noticed it was gone.
func (e *Engine) PeerUp(now time.Time, name string) ([]Outbound, error) {
	if name == e.cfg.Self {
		return nil, nil
	}
	empty := e.holdsNothing()
	e.mu.Lock()
	p := e.peer(name)
	changed := !p.Up
	p.Up = true
	hello := !p.greeted
	p.greeted = true
	catchUp := e.mayCatchUp(p, now, empty)
	nodes := e.recount()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
	var out []Outbound
	if catchUp {
		msgs, err := e.StateFor(now, name)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			out = append(out, Outbound{To: name, Purpose: PurposeCatchUp, Msgs: msgs, Reliable: true})
		}
	}
	if hello {
		msgs, err := e.encode(kindHello, now, nil, e.cfg.DatagramBytes)
		if err != nil {
			return out, err
		}
		out = append(out, Outbound{To: name, Purpose: PurposeHello, Msgs: msgs, Reliable: true})
	}
	return out, nil
}

// PeerDown records that name is no longer a live member (failed or left):
// it is sent nothing more and no longer counted among the nodes. What it
// counted keeps counting until its slices leave the window.
func (e *Engine) PeerDown(now time.Time, name string) {
	e.mu.Lock()
	p := e.peers[name]
	changed := p != nil && p.Up
	if changed {
		p.Up = false
	}
	nodes := e.recount()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
}

// Forget drops everything known of a peer that left the cluster for good
// (its hello and catch-up history included); a peer of that name is then
// new again.
func (e *Engine) Forget(name string) {
	e.mu.Lock()
	p := e.peers[name]
	changed := p != nil && p.Up
	if p != nil {
		e.paid(p) // nothing is owed to a peer that left for good
	}
	delete(e.peers, name)
	nodes := e.recount()
	e.resetSends()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
}

// recount updates e.nodes and returns it. Under e.mu.
func (e *Engine) recount() int {
	e.ring = nil
	e.moved.Store(true)
	n := 1
	for _, p := range e.peers {
		if p.Up {
			n++
		}
	}
	e.nodes = n
	return n
}

// nodesChanged tells the counter and the callback, outside e.mu: the
// callback may call back into the engine.
func (e *Engine) nodesChanged(nodes int) {
	if err := e.c.SetNodes(nodes); err != nil {
		return // nodes >= 1 always: SetNodes cannot refuse it
	}
	if e.cfg.OnNodesChanged != nil {
		e.cfg.OnNodesChanged(nodes)
	}
}

// Nodes returns the up peers plus one: what the counter was last given.
func (e *Engine) Nodes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nodes
}

// Peers returns a copy of what is known of each peer that is up, sent a
// message, or missed an ask.
func (e *Engine) Peers() map[string]PeerState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]PeerState, len(e.peers))
	for k, v := range e.peers {
		if v.Up || !v.LastMessage.IsZero() || v.AsksExpired > 0 {
			out[k] = v.PeerState
		}
	}
	return out
}

// Unheard appends to dst, sorted, the live peers (PeerUp without PeerDown
// since) from which this engine has had no sync message. A peer sends a
// member it sees up a heartbeat at least every AntiEntropyInterval, and
// first what it owes it (a catch-up, the reply to its hello); one that
// has not seen it up yet sends it nothing, not even the answers to its
// asks. So a new process that still has unheard peers decides on counts
// that lack theirs, and its asks to them go unanswered and fall back to
// its budget, which trusts those counts: cluster.Node.Ready holds it
// back from taking checks until none is left (or for at most a while).
// Coordination messages do not count: an ask passed on by another node
// (relay.go) names a sender that may not see this one.
func (e *Engine) Unheard(dst []string) []string {
	e.mu.Lock()
	n := len(dst)
	for name, p := range e.peers {
		if p.Up && p.LastMessage.IsZero() {
			dst = append(dst, name)
		}
	}
	e.mu.Unlock()
	slices.Sort(dst[n:])
	return dst
}

// Ready reports nil once a node whose engine this is, which joined its
// cluster at since, may take checks: every live peer has been heard from
// (Unheard), or CatchUpWait has passed since since. Otherwise an error
// wrapping ErrUnheard that names the peers (a few of them) it still
// waits for. cluster.Node.Ready answers with it, and so /readyz.
func (e *Engine) Ready(now, since time.Time) error {
	if now.Sub(since) >= e.cfg.CatchUpWait {
		return nil
	}
	unheard := e.Unheard(nil)
	if len(unheard) == 0 {
		return nil
	}
	more := ""
	if len(unheard) > 3 {
		more = fmt.Sprintf(" and %d more", len(unheard)-3)
		unheard = unheard[:3]
	}
	return fmt.Errorf("%w: %s%s, %v after joining (at most %v)", ErrUnheard, strings.Join(unheard, ", "), more, now.Sub(since).Round(time.Millisecond), e.cfg.CatchUpWait)
}

// Suspect reports whether peer name, a member since since, has sent
// nothing (not even a heartbeat) for longer than SilenceThreshold: still
// sent to and counted as a node, but likely cut off or overloaded.
func (e *Engine) Suspect(now time.Time, name string, since time.Time) bool {
	heard := since
	e.mu.Lock()
	if p := e.peers[name]; p != nil && p.LastMessage.After(heard) {
		heard = p.LastMessage
	}
	e.mu.Unlock()
	return now.Sub(heard) > e.SilenceThreshold()
}

// StateFor returns state messages for peer: all of this node's live
// slices, and all the peer's own slices this node holds (which is how a
// restarted peer learns back what it had counted). Catch-ups and hello
// replies carry it.
func (e *Engine) StateFor(now time.Time, peer string) ([][]byte, error) {
	es := e.routedFor(now, peer, e.c.AppendState(nil, now, e.cfg.Self, 0))
	if peer != e.cfg.Self {
		es = e.c.AppendState(es, now, peer, 0)
	}
	return e.encode(kindState, now, es, e.cfg.StreamBytes)
}
