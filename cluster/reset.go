package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
)

// Sentinel errors of a reset that no node can vouch for: nothing is
// claimed then. The reset may have been applied on some nodes or on none;
// asking again is safe (a second reset erases only what was counted since
// the first).
var (
	// ErrResetUnanswered: the key's coordinator did not answer in time
	// (down, partitioned, or of a release without resets).
	ErrResetUnanswered = errors.New("cluster: the key's coordinator did not answer the reset")
	// ErrResetRefused: the key's coordinator answered that it did not
	// apply the reset.
	ErrResetRefused = errors.New("cluster: the key's coordinator did not apply the reset")
)

// ResetReport is what a reset did, cluster-wide.
type ResetReport struct {
	// Coordinator is the node that ordered the reset: the key's
	// coordinator.
	Coordinator string
	// At is the reset instant R, on the coordinator's clock: every slice
	// of the key's limits that started before it is erased on every node
	// that applied the reset.
	At time.Time
	// Applied lists the nodes that applied the reset: the coordinator and
	// every node that acknowledged it in time, sorted.
	Applied []string
	// Refused maps each node that acknowledged the reset without applying
	// it to its reason.
	Refused map[string]string
	// Unconfirmed lists the nodes the coordinator sent the reset to that
	// did not acknowledge it in time, sorted: unreachable, slow, or of a
	// release without resets (which drops the message). Their counts of
	// the key from before the reset may stay until their window passes;
	// the nodes that applied it refuse them.
	Unconfirmed []string
}

// Reset erases key's counts under limits on every node, through the key's
// coordinator (package engine, "Reset"), and waits until ctx is done for
// the coordinator's answer and then for every node it told to acknowledge.
// Without an answer it returns ErrResetUnanswered, with a refusal
// ErrResetRefused, and claims nothing. With one, the report says which
// nodes applied the reset and which did not confirm by then. The messages
// go through memberlist like every cluster message: a gossip key encrypts
// and authenticates them.
func (n *Node) Reset(ctx context.Context, key string, limits []counter.Limit) (ResetReport, error) {
	ids := make([]string, len(limits))
	for i, l := range limits {
		ids[i] = l.ID()
	}
	st, err := n.engine.Reset(n.now(), key, ids)
	if err != nil {
		return ResetReport{}, fmt.Errorf("cluster: reset: %w", err)
	}
	rep := ResetReport{Coordinator: st.Coordinator}
	replies := n.resets.add(st.ID, n.engine.Nodes()+16)
	defer n.resets.remove(st.ID)
	var early []engine.ResetReply // acknowledgements ahead of the answer
	told := st.Told
	if st.Local {
		rep.At = time.UnixMilli(st.At)
		n.dispatch(st.Out)
	} else {
		if err := n.sendTo(st.Coordinator, st.Out[0].Msgs[0]); err != nil {
			return rep, fmt.Errorf("%w: %s: %v", ErrResetUnanswered, st.Coordinator, err)
		}
		for answered := false; !answered; {
			select {
			case r := <-replies:
				if !r.Answer || r.From != st.Coordinator {
					early = append(early, r)
					continue
				}
				if !r.Applied {
					return rep, fmt.Errorf("%w: %s: %s", ErrResetRefused, st.Coordinator, r.Reason)
				}
				answered, told, rep.At = true, r.Told, time.UnixMilli(r.At)
			case <-ctx.Done():
				return rep, fmt.Errorf("%w: %s, within the reset's deadline: %w", ErrResetUnanswered, st.Coordinator, ctx.Err())
			}
		}
	}
	rep.Applied = []string{st.Coordinator}
	waiting := make(map[string]bool, len(told))
	for _, name := range told {
		waiting[name] = true
	}
	ack := func(r engine.ResetReply) {
		if r.Answer || !waiting[r.From] {
			return
		}
		delete(waiting, r.From)
		if r.Applied {
			rep.Applied = append(rep.Applied, r.From)
			return
		}
		if rep.Refused == nil {
			rep.Refused = make(map[string]string)
		}
		rep.Refused[r.From] = r.Reason
	}
	for _, r := range early {
		ack(r)
	}
wait:
	for len(waiting) > 0 {
		select {
		case r := <-replies:
			ack(r)
		case <-ctx.Done():
			break wait
		}
	}
	for name := range waiting {
		rep.Unconfirmed = append(rep.Unconfirmed, name)
	}
	slices.Sort(rep.Applied)
	slices.Sort(rep.Unconfirmed)
	return rep, nil
}

// sendTo sends one message to peer name from the calling goroutine.
func (n *Node) sendTo(name string, msg []byte) error {
	nd := n.memberNode(name)
	if nd == nil {
		return fmt.Errorf("%s has no sender", name)
	}
	return n.sendNow(nd, msg)
}

// Inspect fills res (one per limit) with key's window under limits as this
// node knows it now, counting nothing (counter.Peek of 0 hits): its own
// slices, the slices merged from its peers and, if it coordinates the key,
// the grants that those do not show yet. Another node's figures differ by
// what the two have not yet merged of each other (a sync interval, in a
// healthy cluster). It returns the node that coordinates the key, which
// is asked at the margin and orders a reset. ctx is not waited on: the
// answer is this node's own.
func (n *Node) Inspect(ctx context.Context, key string, limits []counter.Limit, res []counter.Result) (coordinator string, err error) {
	now := n.now()
	if _, err := n.c.Peek(now, key, 0, limits, res); err != nil {
		return "", err
	}
	return n.engine.Coordinator(now, key), nil
}
