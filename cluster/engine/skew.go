package engine

import (
	"context"
	"log/slog"
	"slices"
	"time"
)

// skewLogEvery is the least time between two warnings about one peer's
// clock: a skewed peer sends a message every sync interval, and one line a
// minute says as much as five a second.
const skewLogEvery = time.Minute

// clockEstimate is what the engine knows of one peer's clock offset: the
// largest offset its messages showed in the current bucket of time
// (AntiEntropyInterval long, on our clock) and in the one before. A
// message's own offset is the clocks' difference less its delay, and a
// message can be late (a sender's queue, a long catch-up, a stalled
// stream) but never early, so the largest of recent messages is the one
// nearest the truth: one late message alone does not make a peer look
// skewed. Anti-entropy (hot keys, or a heartbeat) puts a message of
// every peer that is heard at all in every bucket.
type clockEstimate struct {
	set      bool
	bucket   int64 // our unix ms / bucket length, of cur
	cur      int64 // largest offset (ms) seen in bucket
	prev     int64 // largest offset (ms) seen in bucket-1; valid with prevSet
	prevSet  bool
	warned   bool      // lastWarn is set
	lastWarn time.Time // when the last warning about this peer was logged
	noted    bool      // this skewed spell was logged, so its end is too
}

// observe adds one message's offset (ms) seen at now, and returns the
// estimate: the largest offset of this bucket and the one before.
func (c *clockEstimate) observe(now time.Time, every time.Duration, offsetMs int64) int64 {
	b := floorDivInt(now.UnixMilli(), max(every.Milliseconds(), 1))
	switch {
	case c.set && b == c.bucket:
		c.cur = max(c.cur, offsetMs)
	case c.set && b == c.bucket+1:
		c.prev, c.prevSet = c.cur, true
		c.bucket, c.cur = b, offsetMs
	default: // the first message, a gap of more than a bucket, or our clock went back
		c.set, c.prevSet = true, false
		c.bucket, c.cur = b, offsetMs
	}
	if c.prevSet {
		return max(c.cur, c.prev)
	}
	return c.cur
}

// at returns the estimate as of now (ms): the largest offset of the
// bucket now falls in and of the one before, as observe last returned
// it, or false when the peer sent nothing in either (an estimate older
// than that says little of its clock now).
func (c *clockEstimate) at(now time.Time, every time.Duration) (int64, bool) {
	b := floorDivInt(now.UnixMilli(), max(every.Milliseconds(), 1))
	switch {
	case !c.set || b < c.bucket || b > c.bucket+1:
		return 0, false
	case b == c.bucket && c.prevSet:
		return max(c.cur, c.prev), true
	}
	return c.cur, true
}

// leadOf returns the lead to state in an ask that the nodes in deciders
// may decide (counter.Ask.Lead): how far the clock of each runs ahead of
// this node's, at least, the least of them. A message's offset is the
// clocks' difference less its delay, and a delay is never negative, so
// the largest recent offset (clockEstimate) is at most the true lead: a
// coordinator that judges its window as of its now less it never judges
// it later than the asker's time, and so never keeps a slice the asker's
// clock has already let go (NFR2). On one clock the lead is 0 whatever
// the delays. 0 also when one of them has no recent estimate, is this
// node, does not decode version 5 asks (SetPeerCoordVersion), or is
// behind; at most MaxClockOffset (past it this node refuses that peer's
// counts and does not ask it, failedOver; and a lead stated as
// MaxClockOffset is still at most the true one). Under e.mu.
func (e *Engine) leadOf(now time.Time, deciders ...string) time.Duration {
	lead := int64(-1)
	for _, name := range deciders {
		p := e.peers[name]
		if p == nil || p.noLead {
			return 0
		}
		off, ok := p.clock.at(now, e.cfg.AntiEntropyInterval)
		if !ok || off <= 0 {
			return 0
		}
		if lead < 0 || off < lead {
			lead = off
		}
	}
	return e.capLead(lead)
}

// capLead returns a lead of ms (none when negative) as a duration, at
// most MaxClockOffset when there is one.
func (e *Engine) capLead(ms int64) time.Duration {
	d := time.Duration(max(ms, 0)) * time.Millisecond
	if e.cfg.MaxClockOffset > 0 {
		d = min(d, e.cfg.MaxClockOffset)
	}
	return d
}

// leadReportAge is how long the lead an asker reported counts
// (clockLead): a clock's offset changes slowly, and the askers of a key
// at its limit ask every few seconds or more often.
const leadReportAge = 10 * time.Second

// noteLead records the lead of this node's clock that from's ask
// reported (counter.Ask.Lead; 0 from an ask of a version before 5, or of
// a node that does not see this one ahead).
func (e *Engine) noteLead(now time.Time, from string, lead time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.peer(from)
	p.leadSet, p.leadMs, p.leadAtMs = true, max(lead.Milliseconds(), 0), now.UnixMilli()
}

// clockLead returns the lead of this node's clock over its askers': the
// least that the up peers whose asks it decided in the last
// leadReportAge reported, at most MaxClockOffset; 0 when none did. Each
// is at most the true lead over that peer (leadOf), so the least is at
// most the lead over every one of them: judging windows that much later
// (counter.SetClockLead) keeps no slice longer than its origin's clock
// does, for every peer that asks. Under e.mu.
func (e *Engine) clockLead(now time.Time) time.Duration {
	least := int64(-1)
	for _, p := range e.peers {
		if age := now.UnixMilli() - p.leadAtMs; !p.Up || !p.leadSet || age > leadReportAge.Milliseconds() || age < 0 {
			continue
		}
		if least < 0 || p.leadMs < least {
			least = p.leadMs
		}
	}
	return e.capLead(least)
}

// setClockLead sets the counter's clock lead (counter.SetClockLead) to
// what this node's askers reported (clockLead); Tick calls it.
func (e *Engine) setClockLead(now time.Time) {
	e.mu.Lock()
	lead := e.clockLead(now)
	e.mu.Unlock()
	if lead != e.c.ClockLead() {
		e.c.SetClockLead(lead)
	}
}

// SetPeerCoordVersion records the newest coordination version the peer
// name decodes, as its membership metadata states it ("coord=5"; 0 for a
// release before version 5, which states none). Asks to a peer of a
// version before 5 state no lead, so that they keep the layout it
// decodes. A peer never told is taken to decode them (the simulator's
// and the tests' engines are all of this release).
func (e *Engine) SetPeerCoordVersion(name string, v uint8) {
	if name == e.cfg.Self {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.peer(name).noLead = v < coordVersion
}

// CoordVersion is the newest coordination version this release decodes,
// which a node states in its membership metadata (SetPeerCoordVersion).
const CoordVersion = coordVersion

// skewNote is what one message changed in a peer's skew, to be logged
// outside the engine's lock.
type skewNote struct {
	warn, resumed bool
	offset        time.Duration
}

// updateSkew records a message from p sent at sentMs (its clock) that
// arrived at now, sets p.Skewed (its slices are not merged) and returns
// what to log. Under e.mu.
func (e *Engine) updateSkew(p *peer, now time.Time, sentMs int64) skewNote {
	est := time.Duration(p.clock.observe(now, e.cfg.AntiEntropyInterval, sentMs-now.UnixMilli())) * time.Millisecond
	// Only a clock ahead is judged: a message is never early, so an
	// offset ahead is the clocks', while one behind may be nothing but
	// delay (a queue, a node starved of CPU), and refusing a peer's counts
	// for that would let an overload undo the bound. A peer behind sees
	// this node ahead and refuses for both.
	skewed := e.cfg.MaxClockOffset > 0 && est > e.cfg.MaxClockOffset
	c := &p.clock
	note := skewNote{offset: est}
	was := p.Skewed
	p.Skewed = skewed
	switch {
	case skewed && (!c.warned || now.Sub(c.lastWarn) >= skewLogEvery || now.Before(c.lastWarn)):
		c.warned, c.lastWarn, c.noted = true, now, true
		note.warn = true
	case !skewed && was:
		// The end of a spell is logged if its start was: the warning's
		// limit keeps a peer hovering at the threshold to two lines a minute.
		note.resumed = c.noted
		c.noted = false
	}
	return note
}

// logSkew logs what updateSkew noted about peer.
func (e *Engine) logSkew(peer string, n skewNote) {
	switch {
	case n.warn:
		e.log.LogAttrs(context.Background(), slog.LevelWarn,
			"a peer's clock is ahead of ours by more than the maximum clock offset: its counts are not merged, and the two count each other's requests as across a partition until it is back",
			slog.String("peer", peer), slog.Duration("offset", n.offset), slog.Duration("max_clock_offset", e.cfg.MaxClockOffset))
	case n.resumed:
		e.log.LogAttrs(context.Background(), slog.LevelInfo,
			"a peer's clock is back within the maximum clock offset: merging its counts again",
			slog.String("peer", peer), slog.Duration("offset", n.offset), slog.Duration("max_clock_offset", e.cfg.MaxClockOffset))
	}
}

// skewedPeer reports whether name's clock was beyond MaxClockOffset as of
// its last sync message.
func (e *Engine) skewedPeer(name string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.peers[name]
	return p != nil && p.Skewed
}

// dropOrigin removes the groups of origin's slices and returns how many
// entries they held.
func (m *message) dropOrigin(origin string) int {
	n := 0
	m.Groups = slices.DeleteFunc(m.Groups, func(g group) bool {
		if g.Origin == origin {
			n += len(g.Keys)
			return true
		}
		return false
	})
	return n
}
