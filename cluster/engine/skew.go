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
