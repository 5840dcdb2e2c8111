package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
)

// Sentinel errors of a check at the margin that got no usable answer; the
// caller decides alone.
var (
	// ErrNoCoordinator: the key's coordinator is not reachable through
	// memberlist (it has no address here yet, or a send to it failed).
	ErrNoCoordinator = errors.New("cluster: coordinator unreachable")
	// ErrCoordinatorUnable: the coordinator answered that it cannot decide
	// the check (its rules lack one of the limits).
	ErrCoordinatorUnable = errors.New("cluster: coordinator cannot decide")
)

// Coordinate puts a check at the margin to the key's coordinator and waits
// for its answer until ctx is done (decision.Coordinator). The engine
// picks the coordinator (passing over one that missed its last asks) and
// makes the ask; when this node is the coordinator it decides and counts
// at once (counted). The ask and its answer are single datagrams through
// memberlist, so a gossip key encrypts and authenticates them and the
// cluster label applies, as for every sync message; they are sent from the
// calling goroutine, not queued behind the sync traffic. Without an answer
// by half of ctx's deadline the ask is sent once more, the same message
// (Engine.AskAgain): one lost datagram either way is the likely cause, a
// round trip is far shorter than the deadline, and the coordinator answers
// a repeat with the answer it gave, so the check is decided once; the
// first answer to come is taken. Without an answer in time the engine
// gives the ask up, and this sends the coordinator the release it returns
// (so that a grant it may have made stops counting) and returns ctx's
// error; the caller decides alone.
func (n *Node) Coordinate(ctx context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error) {
	a, err := n.engine.Ask(t, ask, results)
	switch {
	case a.Local:
		return a.Decision.Allowed, err == nil, err
	case a.Alone:
		return false, false, fmt.Errorf("%w: the nodes above this one for %.64q missed their asks", ErrNoCoordinator, ask.Key)
	case err != nil:
		return false, false, fmt.Errorf("%w: %v", ErrNoCoordinator, err)
	}
	to := a.Out.To
	ch := n.waiting.add(a.ID, 1)
	nd := n.memberNode(to)
	if nd == nil {
		err = fmt.Errorf("%s has no sender", to)
	} else {
		err = n.sendNow(nd, a.Out.Msgs[0])
	}
	if err != nil {
		_, _, _ = n.engine.AskExpired(n.now(), a.ID) // nothing to release: it never left
		n.waiting.remove(a.ID)
		return false, false, fmt.Errorf("%w: %v", ErrNoCoordinator, err)
	}
	var again <-chan time.Time
	if deadline, ok := ctx.Deadline(); ok {
		timer := time.NewTimer(time.Until(deadline) / 2)
		defer timer.Stop()
		again = timer.C
	}
	for {
		select {
		case ans := <-ch:
			return answerOf(ans, to, results)
		case <-again:
			again = nil
			if n.engine.AskAgain(a.ID) {
				_ = n.sendNow(nd, a.Out.Msgs[0]) // best effort: the deadline still holds
			}
		case <-ctx.Done():
			// The engine settles the race with an answer arriving now:
			// either it gives the ask up (no answer will be delivered), or
			// it took the answer, which deliver is putting in ch.
			rel, ok, rerr := n.engine.AskExpired(n.now(), a.ID)
			if !ok && rerr == nil {
				return answerOf(<-ch, to, results)
			}
			n.waiting.remove(a.ID)
			if ok && rel.To != to {
				nd = n.memberNode(rel.To) // an ask sent around: released where it went
			}
			if ok && nd != nil {
				_ = n.sendNow(nd, rel.Msgs[0]) // best effort: the grant expires anyway
			}
			n.sendMoved(n.now()) // the miss may have failed the coordinator over
			return false, false, ctx.Err()
		}
	}
}

// answerOf is a check's outcome from its coordinator's answer.
func answerOf(a engine.Answer, to string, results []counter.Result) (allowed, counted bool, err error) {
	if !a.Decided || len(a.Results) != len(results) {
		return false, false, fmt.Errorf("%w: %s", ErrCoordinatorUnable, to)
	}
	copy(results, a.Results)
	return a.Allowed, false, nil
}

// isMember reports whether name is in the member table: a node memberlist
// reported as a member, alive or not (a member declared dead whose
// partition just healed may speak before memberlist reports it alive
// again; dead members are forgotten after deadMemberTTL). The engine hears
// nobody else, so a forged sender name costs no work and no memory.
func (n *Node) isMember(name string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.members[name] != nil
}

// memberNode returns where peer name is, or nil when it has no sender.
func (n *Node) memberNode(name string) *memberlist.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s := n.senders[name]; s != nil {
		return s.node.Load()
	}
	return nil
}

// sendNow sends one message to nd from the calling goroutine: as a
// datagram, or over a stream when it is too large for one.
func (n *Node) sendNow(nd *memberlist.Node, msg []byte) error {
	var err error
	if len(msg) > n.dgram {
		err = n.ml.SendReliable(nd, msg)
	} else {
		err = n.ml.SendBestEffort(nd, msg)
	}
	if err == nil {
		n.engine.CountSent(1, len(msg))
	}
	return err
}
