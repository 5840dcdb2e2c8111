package cluster

import (
	"context"
	"errors"
	"fmt"
	"sync"
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

// waiter is a check waiting for its coordinator's answer.
type waiter struct {
	from string // the coordinator asked: answers from others are ignored
	ch   chan engine.Answer
}

// asks are the checks waiting for an answer, by ask id.
type asks struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]*waiter
}

// add registers a new ask to from and returns its id, the highest id at
// or below which no ask is waiting any more (counter.Ask.Settled), and its
// waiter.
func (a *asks) add(from string) (id, settled uint64, w *waiter) {
	w = &waiter{from: from, ch: make(chan engine.Answer, 1)}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting == nil {
		a.waiting = make(map[uint64]*waiter)
	}
	a.next++
	id, settled = a.next, a.next-1
	for other := range a.waiting {
		settled = min(settled, other-1)
	}
	a.waiting[id] = w
	return id, settled, w
}

func (a *asks) remove(id uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.waiting, id)
}

// deliver hands an answer to its waiter, if it still waits and the answer
// comes from the node it asked. It never blocks.
func (a *asks) deliver(ans engine.Answer) {
	a.mu.Lock()
	w := a.waiting[ans.ID]
	if w != nil && w.from == ans.From {
		delete(a.waiting, ans.ID)
	} else {
		w = nil
	}
	a.mu.Unlock()
	if w != nil {
		w.ch <- ans // buffered, and delivered at most once
	}
}

// Coordinate puts a check at the margin to the key's coordinator and waits
// for its answer until ctx is done (decision.Coordinator). When this node
// is the coordinator it decides and counts at once (counted). The ask and
// its answer are single datagrams through memberlist, so a gossip key
// encrypts and authenticates them and the cluster label applies, as for
// every sync message; they are sent from the calling goroutine, not queued
// behind the sync traffic. Without an answer in time it sends the
// coordinator a release (so that a grant it may have made stops counting)
// and returns ctx's error; the caller decides alone.
func (n *Node) Coordinate(ctx context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error) {
	k := n.engine.Coordinator(ask.Key)
	if k == n.cfg.NodeName {
		d, err := n.c.Coordinate(t, k, 0, ask, results)
		return d.Allowed, err == nil, err
	}
	nd := n.memberNode(k)
	if nd == nil {
		return false, false, fmt.Errorf("%w: %s has no sender", ErrNoCoordinator, k)
	}
	id, settled, w := n.asks.add(k)
	ask.Settled = settled
	msg, err := n.engine.AskMessage(t, id, ask)
	if err == nil {
		err = n.sendNow(nd, msg)
	}
	if err != nil {
		n.asks.remove(id)
		return false, false, fmt.Errorf("%w: %v", ErrNoCoordinator, err)
	}
	select {
	case a := <-w.ch:
		if !a.Decided || len(a.Results) != len(results) {
			return false, false, fmt.Errorf("%w: %s", ErrCoordinatorUnable, k)
		}
		copy(results, a.Results)
		return a.Allowed, false, nil
	case <-ctx.Done():
		n.asks.remove(id)
		if rel, err := n.engine.ReleaseMessage(n.now(), id, ask); err == nil {
			_ = n.sendNow(nd, rel) // best effort: the grant expires anyway
		}
		return false, false, ctx.Err()
	}
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
