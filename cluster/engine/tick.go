package engine

import (
	"slices"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// slot is the number of whole sync intervals from the Unix epoch to t.
func slot(t time.Time, every time.Duration) int64 {
	ns, d := t.UnixNano(), int64(every)
	q := ns / d
	if ns%d != 0 && ns < 0 {
		q--
	}
	return q
}

// NextTick returns the first multiple of the sync interval, counted from
// the Unix epoch (which wall clocks share), after now: the instant of the
// next tick. Ticks fall on those instants on every node, so every node
// ends its blind interval at the same instant (up to clock offset): the
// per-node budget's bound assumes it, and with unaligned ticks the nodes'
// shares overlap (limitsim --stagger; docs/blind-interval.md).
func (e *Engine) NextTick(now time.Time) time.Time {
	every := e.SyncInterval()
	return time.Unix(0, (slot(now, every)+1)*int64(every))
}

// aeTicks is how many sync slots an anti-entropy round spans.
func (e *Engine) aeTicks(every time.Duration) int64 {
	return max(1, int64((e.cfg.AntiEntropyInterval+every-1)/every))
}

// NextAntiEntropy returns the start of the first sync slot at or after
// now's in which a Tick runs anti-entropy: every tick before it sends
// deltas only, so a driver that skips the ticks of a node without changes
// (limitsim) must still tick it then.
func (e *Engine) NextAntiEntropy(now time.Time) time.Time {
	every := e.SyncInterval()
	k := e.aeTicks(every)
	e.tickMu.Lock()
	round, set := e.aeRound, e.aeSet
	e.tickMu.Unlock()
	s := slot(now, every)
	next := (floorDivInt(s-1, k) + 1) * k // first multiple of k at or after s
	if set {
		// The first slot of the next round, or now's if a tick in it
		// already runs anti-entropy (the round's first tick was skipped).
		next = max((round+1)*k, s)
	}
	return time.Unix(0, next*int64(every))
}

func floorDivInt(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Tick is the work of one sync instant; call it at every NextTick (a
// late or skipped tick only delays its work). It collects the local
// changes since the previous Tick and returns them as deltas for every
// up peer, and when anti-entropy is due the hot keys' slices or a
// heartbeat. The counter starts a new budget interval even when no peer
// is up. It also sets the counter's clock lead to what this node's askers
// report of its clock (counter.SetClockLead, skew.go). Ticks are
// serialized; Receive may run concurrently.
func (e *Engine) Tick(now time.Time) ([]Outbound, error) {
	e.setClockLead(now)
	peers := e.upPeers()
	every := e.SyncInterval()
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	e.buf = e.c.AppendChanges(e.buf[:0], now)
	round := floorDivInt(slot(now, every), e.aeTicks(every))
	ae := e.aeSet && round > e.aeRound || !e.aeSet && slot(now, every)%e.aeTicks(every) == 0
	if !e.aeSet || round > e.aeRound {
		e.aeRound, e.aeSet = round, true
	}
	if len(peers) == 0 {
		clear(e.buf)
		return nil, nil
	}
	e.routeTick(now)
	msgs, err := e.encode(kindDelta, now, e.split(e.buf, true), e.cfg.DatagramBytes)
	clear(e.buf) // drop key references until the next tick
	if err != nil {
		return nil, err
	}
	e.Stats.DeltaMessages.Add(uint64(len(msgs)))
	out, err := e.owedStates(now)
	if err != nil {
		return out, err
	}
	if out, err = e.silenceNotice(out, now, peers); err != nil {
		return out, err
	}
	out = e.broadcast(out, peers, PurposeDelta, msgs)
	if out, err = e.sendRoutes(out, now, kindDelta, PurposeDelta); err != nil || !ae {
		return out, err
	}
	return e.antiEntropy(out, now, peers)
}

// hotFullEvery is how often anti-entropy re-sends the hot keys' slices
// back to the full round before the last: every hotFullEvery-th round; the
// others re-send the slices that may have changed since the round before
// the last (hotSlices).
const hotFullEvery = 10

// hotSlices returns this round's anti-entropy of the hot keys
// (counter.Counter.AppendHotChanged): every slice that may have changed
// since the round before the previous one, so that a change is in the
// next two rounds after it; at every hotFullEvery-th round every slice
// that may have changed since the full round before the previous one, so
// that a change is in the next two full rounds too; and every live slice
// at the first two rounds. A change whose delta and both re-sends are lost
// is healed by the next full round, or the one after it. A peer cut off
// for longer than the silence threshold gets a catch-up instead (doc.go).
//
// Why not every slice every round, as before: a key past its limit keeps
// a slice for every few admissions, hundreds in its window, and only its
// newest change; re-sending all of them each second made each peer merge
// hundreds of known slices per hot key and second, most of a peer's work
// with 1,000 keys past their limit (BENCHMARKS.md, "Anti-entropy of hot
// keys"). The full rounds re-sent every live slice until 2026-12-06: with
// 1,000 keys past their limit, more than half of the entries a peer found
// known (BENCHMARKS.md, "A node of 8 with 1,000 keys: its peers'
// anti-entropy, ..."). Under e.tickMu.
func (e *Engine) hotSlices(now time.Time) []counter.Entry {
	full := e.hotRounds%hotFullEvery == 0
	var recent time.Duration
	switch {
	case e.hotRounds < 2: // every live slice
	case full:
		recent = max(0, now.Sub(e.hotFullAt[0]))
	default:
		recent = max(0, now.Sub(e.hotAt[0]))
	}
	e.hotAt[0], e.hotAt[1] = e.hotAt[1], now
	if full || e.hotRounds < 2 {
		e.hotFullAt[0], e.hotFullAt[1] = e.hotFullAt[1], now
	}
	e.hotRounds++
	if recent == 0 {
		return e.c.AppendHot(nil, now, e.cfg.Self)
	}
	return e.c.AppendHotChanged(nil, now, e.cfg.Self, recent)
}

// antiEntropy appends a tick's anti-entropy: this node's slices of its
// hot keys that may have changed lately (hotSlices), broadcast or routed
// as the deltas are, the routed changes of the interval again
// (resendRouted), and a heartbeat for every peer that gets none of them.
// Under e.tickMu, after routeTick.
func (e *Engine) antiEntropy(out []Outbound, now time.Time, peers []string) ([]Outbound, error) {
	bc := e.split(e.hotSlices(now), false)
	e.resendRouted()
	if len(bc) > 0 {
		msgs, err := e.encode(kindState, now, bc, e.cfg.DatagramBytes)
		if err != nil {
			return out, err
		}
		out = e.broadcast(out, peers, PurposeAntiEntropy, msgs)
	} else {
		var quiet []string
		for _, name := range peers {
			if len(e.routes[name]) == 0 {
				quiet = append(quiet, name)
			}
		}
		msgs, err := e.heartbeat(now)
		if err != nil {
			return out, err
		}
		out = e.broadcast(out, quiet, PurposeHeartbeat, msgs)
	}
	return e.sendRoutes(out, now, kindState, PurposeAntiEntropy)
}

// broadcast appends an Outbound of msgs for each peer.
func (e *Engine) broadcast(out []Outbound, peers []string, p Purpose, msgs [][]byte) []Outbound {
	if len(msgs) == 0 {
		return out
	}
	for _, name := range peers {
		out = append(out, Outbound{To: name, Purpose: p, Msgs: msgs, Reliable: e.cfg.StreamOnly, Spread: !e.cfg.StreamOnly})
	}
	return out
}

// upPeers returns the up peers' names, sorted: a deterministic order.
func (e *Engine) upPeers() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var up []string
	for name, p := range e.peers {
		if p.Up {
			up = append(up, name)
		}
	}
	slices.Sort(up)
	return up
}
