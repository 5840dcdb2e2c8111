package main

import (
	"context"
	"fmt"
	"time"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
)

// simCoordinator is node j's decision.Coordinator on the simulated
// network: cluster.Node.Coordinate's logic, with the simulator's network
// and clock in place of memberlist and the wall clock.
//
// The model of time keeps a check synchronous: the ask is decided by the
// coordinator at the check's instant (on the coordinator's clock), and the
// answer, when it comes in time, is taken at that instant too. The latency
// decides only whether it comes in time: an ask whose round trip, twice
// the one-way latency, exceeds the deadline gets no answer, nor does one
// whose ask or answer the network loses (the configured loss rate, drawn
// from the same seeded source as the sync messages' losses). The
// coordinator still decides an ask that reached it, so a grant may exist
// there; the asker then sends a release, which leaves at the deadline and
// arrives a latency later (or is lost, with the same probability), and
// decides alone with the budget. The real deadline of ctx is not consulted:
// under the race detector a simulated round trip can take longer than 5 ms
// of wall time, and decisions must not depend on it.
type simCoordinator struct {
	s *simCluster
	j int // the asking node
}

// Coordinate puts ask to the key's coordinator (decision.Coordinator).
func (sc simCoordinator) Coordinate(_ context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error) {
	s, n := sc.s, sc.s.nodes[sc.j]
	k := n.eng.Coordinator(ask.Key)
	if k == n.name {
		// As cluster.Node: the coordinator decides its own check and
		// counts it at once, with no message.
		s.stats.selfCoordinated++
		d, err := n.c.Coordinate(t, k, 0, ask, results)
		return d.Allowed, err == nil, err
	}
	ki, ok := s.byName[k]
	if !ok {
		return false, false, fmt.Errorf("limitsim: coordinator %q is no simulated node", k)
	}
	kn := s.nodes[ki]
	at := s.now
	n.askSeq++
	id := n.askSeq
	// Checks are synchronous here: every earlier ask of this node is over.
	ask.Settled = id - 1
	msg, err := n.eng.AskMessage(t, id, ask)
	if err != nil {
		return false, false, fmt.Errorf("limitsim: encoding an ask: %w", err)
	}
	s.stats.asks++
	s.stats.askBytes += int64(len(msg))
	inTime := 2*s.cfg.latency <= s.deadline()
	if !s.lost() {
		_, out, err := kn.eng.Receive(s.clock(kn, at), msg)
		if err != nil {
			return false, false, fmt.Errorf("limitsim: %s receiving an ask: %w", k, err)
		}
		for _, o := range out {
			if o.Purpose != engine.PurposeAnswer {
				continue
			}
			for _, m := range o.Msgs {
				s.stats.answers++
				s.stats.answerBytes += int64(len(m))
				arrives := !s.lost() && inTime // a late answer finds no waiter: as if lost
				n.waitID, n.waitFrom, n.answered = id, k, false
				// An answer that does not arrive is still decoded, as an
				// oracle only: a grant in it is an over-count the asker
				// never hears of (orphan).
				_, _, err := n.eng.Receive(s.clock(n, at), m)
				n.waitID, n.waitFrom = 0, ""
				if err != nil {
					return false, false, fmt.Errorf("limitsim: %s receiving an answer: %w", n.name, err)
				}
				if !arrives {
					if n.answered && n.answer.Allowed {
						s.lostGrant = orphan{key: ask.Key, hits: ask.Hits, until: at + s.grantTTLMs()}
					}
					n.answered = false
				}
			}
		}
	}
	if n.answered {
		n.answered = false
		a := n.answer
		if !a.Decided || len(a.Results) != len(results) {
			return false, false, fmt.Errorf("%w: %s", cluster.ErrCoordinatorUnable, k)
		}
		copy(results, a.Results)
		return a.Allowed, false, nil
	}
	// No answer by the deadline: release the grant the coordinator may
	// have made, so that it stops counting when the release arrives.
	dl := s.deadline().Milliseconds()
	rel, err := n.eng.ReleaseMessage(s.clock(n, at+dl), id, ask)
	if err == nil {
		s.stats.releases++
		s.stats.releaseBytes += int64(len(rel))
		if arrival := s.post(at+dl+s.latMs, ki, rel); arrival >= 0 && s.lostGrant.hits > 0 {
			s.lostGrant.until = min(s.lostGrant.until, arrival+1)
		}
	}
	return false, false, context.DeadlineExceeded
}

// grantTTLMs is how long a coordinator counts a grant its merged slices
// do not show: two sync intervals and the grace (counter/coordinate.go).
func (s *simCluster) grantTTLMs() int64 {
	return 2*s.syncMs + int64(s.cfg.grace*float64(s.syncMs))
}

// deadline is the Deciders' deadline.
func (s *simCluster) deadline() time.Duration {
	if s.cfg.deadline > 0 {
		return s.cfg.deadline
	}
	return decision.DefaultDeadline
}
