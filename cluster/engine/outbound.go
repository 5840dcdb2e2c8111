package engine

import (
	"fmt"
)

// Purpose says why an Outbound is sent; the transport may count or log by
// it, and decides nothing on it (Reliable and Spread say how to send).
type Purpose uint8

// The purposes of outbound messages.
const (
	// PurposeDelta: the local changes of one tick.
	PurposeDelta Purpose = iota + 1
	// PurposeAntiEntropy: the slices of the hot keys, re-sent.
	PurposeAntiEntropy
	// PurposeHeartbeat: an empty state message, anti-entropy with no hot key.
	PurposeHeartbeat
	// PurposeHello: "this process started; send me what I had counted".
	PurposeHello
	// PurposeReply: the answer to a peer's hello (StateFor the peer).
	PurposeReply
	// PurposeCatchUp: StateFor a peer that joined, came back, or was
	// silent for longer than SilenceThreshold.
	PurposeCatchUp
	// PurposeAnswer: this node's answer, as a key's coordinator, to a
	// peer's ask. Send it at once, ahead of any queued sync traffic: the
	// asker waits for it with a deadline of a few milliseconds. The answer
	// to a reset and its acknowledgements go so too.
	PurposeAnswer
	// PurposeAsk: a check at the margin for the key's coordinator (Ask).
	// Send it at once from the waiting goroutine.
	PurposeAsk
	// PurposeRelease: the release of an ask given up (AskExpired).
	PurposeRelease
	// PurposeReset: a reset for the key's coordinator, or the
	// coordinator's for a peer to apply (reset.go).
	PurposeReset
	// PurposeSilence: a notice that this node failed a coordinator over
	// (silence.go), for every up peer.
	PurposeSilence
)

// String returns the purpose's name, as logs and metrics would show it.
func (p Purpose) String() string {
	switch p {
	case PurposeDelta:
		return "delta"
	case PurposeAntiEntropy:
		return "anti-entropy"
	case PurposeHeartbeat:
		return "heartbeat"
	case PurposeHello:
		return "hello"
	case PurposeReply:
		return "reply"
	case PurposeCatchUp:
		return "catch-up"
	case PurposeAnswer:
		return "answer"
	case PurposeAsk:
		return "ask"
	case PurposeRelease:
		return "release"
	case PurposeReset:
		return "reset"
	case PurposeSilence:
		return "silence"
	}
	return fmt.Sprintf("purpose(%d)", uint8(p))
}

// Outbound is a list of messages for one peer. The Outbounds of one call
// may share their Msgs (the same deltas go to every peer): the transport
// must treat them as read-only.
type Outbound struct {
	To      string
	Purpose Purpose
	Msgs    [][]byte
	// Reliable asks for a stream rather than datagrams: catch-up state and
	// hellos always, everything with StreamOnly. A message longer than
	// DatagramBytes must go over a stream even when Reliable is false.
	Reliable bool
	// Spread allows the transport to spread the messages over a share of
	// the sync interval after the tick (cluster.Config.SendSpread), so that
	// aligned ticks do not all land at once. Only a tick's datagrams are.
	Spread bool
}
