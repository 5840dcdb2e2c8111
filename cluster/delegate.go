package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strconv"

	"github.com/hashicorp/memberlist"

	"github.com/limiterd/limiterd/cluster/engine"
)

// delegate is the node's memberlist.Delegate. memberlist is used for
// membership and as a datagram and stream carrier only:
//
//   - NotifyMsg hands every user message to the Engine and queues what it
//     returns (a hello's reply, a catch-up) for the sender.
//   - GetBroadcasts returns nil: deltas do not go through memberlist's
//     broadcast queue, whose capacity (a few KB/s of user payload at 8
//     nodes) is far below what HS2 needs; each tick's messages are sent
//     directly to every peer instead (see doc.go).
//   - LocalState and MergeRemoteState do nothing: memberlist's push/pull
//     (every 5 s, memberlistConfig) exchanges membership only, over one
//     stream; counts travel by our own anti-entropy (hot keys every
//     AntiEntropyInterval, full state on join and hello), which is
//     bounded per message.
//   - NodeMeta carries Config.HTTPAddr, shown by the peers' /cluster, a
//     "leaving" mark set just before a graceful leave (memberlist tells
//     its event delegate that a node is gone but not whether it failed or
//     left, and the mark tells the two apart), and the newest sync message
//     version the node decodes, which the peers' engines write to it only
//     once every member decodes it (engine.SetPeerSyncVersion), and
//     whether it decodes the relay envelopes (engine.SetPeerRelays), and
//     the newest coordination version it decodes (engine.SetPeerCoordVersion).
type delegate struct{ n *Node }

// NodeMeta implements memberlist.Delegate.
func (d delegate) NodeMeta(limit int) []byte {
	b := encodeMeta(meta{http: d.n.cfg.HTTPAddr, leaving: d.n.leaving.Load(), sync: engine.SyncVersion, relay: true, coord: engine.CoordVersion})
	if len(b) > limit {
		return nil
	}
	return b
}

// meta is what a node states about itself in its memberlist metadata.
type meta struct {
	http    string // Config.HTTPAddr, shown by the peers' /cluster
	leaving bool   // set just before a graceful leave
	// sync is the newest sync message version the node decodes
	// (engine.SetPeerSyncVersion); 1 for a release that states none.
	sync uint8
	// relay is whether the node decodes the envelopes of asks passed on
	// and answers forwarded (engine.SetPeerRelays); false for a release
	// that states none.
	relay bool
	// coord is the newest coordination version the node decodes
	// (engine.SetPeerCoordVersion); 0 for a release that states none
	// (version 4 or before).
	coord uint8
}

// encodeMeta and decodeMeta are the node metadata format: URL query
// syntax, so that fields can be added without breaking older peers.
func encodeMeta(m meta) []byte {
	v := url.Values{}
	if m.http != "" {
		v.Set("http", m.http)
	}
	if m.leaving {
		v.Set("leaving", "1")
	}
	if m.sync > 1 {
		v.Set("sync", strconv.Itoa(int(m.sync)))
	}
	if m.relay {
		v.Set("relay", "1")
	}
	if m.coord > 0 {
		v.Set("coord", strconv.Itoa(int(m.coord)))
	}
	return []byte(v.Encode())
}

func decodeMeta(b []byte) meta {
	v, _ := url.ParseQuery(string(b)) // a malformed field only loses itself
	m := meta{http: v.Get("http"), leaving: v.Get("leaving") == "1", sync: 1, relay: v.Get("relay") == "1"}
	if s, err := strconv.ParseUint(v.Get("sync"), 10, 8); err == nil && s > 1 {
		m.sync = uint8(s)
	}
	if c, err := strconv.ParseUint(v.Get("coord"), 10, 8); err == nil {
		m.coord = uint8(c)
	}
	return m
}

// NotifyMsg implements memberlist.Delegate. It is called on memberlist's
// goroutines and never waits on the network. A sync message goes to the
// merger (merger.go) while Run runs, so that merging it does not hold back
// the asks and answers behind it; the others are handled here. b is not
// retained.
func (d delegate) NotifyMsg(b []byte) {
	if engine.IsSync(b) && d.n.merges.offer(b) {
		return
	}
	d.n.receive(b)
}

// receive hands a message to the engine and acts on what it returns. b is
// not retained: decoding copies what the counter keeps.
func (n *Node) receive(b []byte) {
	rcv, err := n.engine.Receive(n.now(), b)
	if rcv.Answered {
		n.waiting.deliver(rcv.Answer.ID, rcv.Answer, true)
	}
	if rcv.Reset != nil {
		n.resets.deliver(rcv.Reset.ID, *rcv.Reset, false)
	}
	out := rcv.Out
	if errors.Is(err, engine.ErrReplay) || errors.Is(err, engine.ErrStale) {
		n.decodeLog.log(n.log, slog.LevelWarn, "dropped a replayed or stale cluster message (a peer's clock far behind, or a captured message sent again)", "bytes", len(b), "err", err)
		return
	}
	if errors.Is(err, engine.ErrNotMember) {
		// With a key only a holder of it can send: a node joining (its
		// first messages can come before its membership does) or one
		// that just left. Without one it may be anyone, but it is still
		// most often a joining node: it is warned about only if it is
		// still no member strangerGrace later (strangers).
		n.decodeLog.log(n.log, slog.LevelDebug, "dropped a cluster message from a node not (yet) a member here", "bytes", len(b), "err", err)
		if !n.encrypted() && rcv.From != "" { // "": a relayed answer's target, not its sender, is unknown
			n.strangers.note(rcv.From, n.now())
		}
		return
	}
	if err != nil {
		n.decodeLog.log(n.log, slog.LevelWarn, "dropped a malformed sync message", "bytes", len(b), "err", err)
		return
	}
	// A hello's reply, or a catch-up for a peer back from silence.
	n.dispatch(out)
	n.sendMoved(n.now())
}

// GetBroadcasts implements memberlist.Delegate: nothing rides on gossip.
func (delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }

// LocalState implements memberlist.Delegate: no push/pull payload.
func (delegate) LocalState(join bool) []byte { return nil }

// MergeRemoteState implements memberlist.Delegate: nothing to merge.
func (delegate) MergeRemoteState(buf []byte, join bool) {}

// eventDelegate records membership events in the node's member table.
// memberlist calls it with its node lock held, so it must not call back
// into memberlist: it records, counts, and nudges the sync loop, which
// does the rest (senders, and the engine's PeerUp and PeerDown).
type eventDelegate struct{ n *Node }

// NotifyJoin implements memberlist.EventDelegate.
func (e eventDelegate) NotifyJoin(nd *memberlist.Node) { e.n.record(nd, "join") }

// NotifyLeave implements memberlist.EventDelegate.
func (e eventDelegate) NotifyLeave(nd *memberlist.Node) { e.n.record(nd, "leave") }

// NotifyUpdate implements memberlist.EventDelegate.
func (e eventDelegate) NotifyUpdate(nd *memberlist.Node) { e.n.record(nd, "update") }

// record updates the member table after a membership event.
func (n *Node) record(nd *memberlist.Node, event string) {
	cp := *nd
	cp.Addr = slices.Clone(nd.Addr)
	cp.Meta = slices.Clone(nd.Meta)
	md := decodeMeta(nd.Meta)
	// memberlist does not fill Node.State; the event says what happened.
	state := memberlist.StateAlive
	if event == "leave" {
		state = memberlist.StateDead
		if md.leaving {
			state = memberlist.StateLeft
		}
	}
	m := &member{node: cp, addr: nd.Address(), http: md.http, state: state, since: n.now()}
	self := nd.Name == n.cfg.NodeName
	if !self {
		// Before reconcile sends it anything: the version it decodes.
		n.engine.SetPeerSyncVersion(nd.Name, md.sync)
		n.engine.SetPeerRelays(nd.Name, md.relay)
		n.engine.SetPeerCoordVersion(nd.Name, md.coord)
	}
	n.mu.Lock()
	n.members[nd.Name] = m
	if event == "join" && !self {
		n.joinEv[nd.Name] = true
	}
	n.mu.Unlock()
	n.events.WithLabelValues(event).Inc()
	if !self {
		level := slog.LevelInfo
		if event == "update" {
			level = slog.LevelDebug // metadata only: the HTTP address, or "leaving"
		}
		n.log.Log(context.Background(), level, "cluster member "+event, "member", nd.Name, "addr", m.addr, "state", stateName(state))
	}
	select {
	case n.nudge <- struct{}{}:
	default:
	}
}

// stateName is the name /cluster and the metrics use for a state.
func stateName(s memberlist.NodeStateType) string {
	switch s {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	default:
		return "left"
	}
}
