package clustersim

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
)

// coordinator is node j's decision.Coordinator on the simulated network:
// the engine's asking side (engine.Engine.Ask, Receive, AskExpired), as
// cluster.Node.Coordinate drives it, with the simulator's network and
// clock in place of memberlist and the wall clock. The protocol (the
// coordinator chosen, ask ids, the settled watermark, the release,
// failover) is the engine's; this holds only the network model.
//
// The model of time keeps a check synchronous: the ask is decided by the
// coordinator at the check's instant (on the coordinator's clock), and the
// answer, when it comes in time, is taken at that instant too. The latency
// decides only whether it comes in time: an ask whose round trip, twice
// the one-way latency, exceeds the deadline gets no answer, nor does one
// whose ask or answer the network loses (the configured loss rate, drawn
// from the same seeded source as the sync messages' losses, or a cut).
// Without an answer by half the deadline the ask is sent again, as a node
// sends it (Engine.AskAgain), and its answer, the first one again if the
// coordinator gave one, comes in time when half the deadline and a round
// trip fit the deadline.
// The coordinator still decides an ask that reached it, so a grant may
// exist there; the asker then gives the ask up at the deadline, sends the
// release the engine returns, which arrives a latency later (or is lost,
// with the same probability), and decides alone with the budget. The real
// deadline of ctx is not consulted: under the race detector a simulated
// round trip can take longer than 5 ms of wall time, and decisions must
// not depend on it.
type coordinator struct {
	s *Cluster
	j int // the asking node
}

// Coordinate puts ask to the key's coordinator (decision.Coordinator).
func (sc coordinator) Coordinate(_ context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error) {
	s, n := sc.s, sc.s.nodes[sc.j]
	if s.cfg.Timed {
		// One watch over the whole ask (Times.Ask), on one OS thread so
		// that its CPU time measures it: the engine calls, and the
		// simulator's bookkeeping between them (the loss draws, queueing a
		// release), small beside them.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		w := s.startWatch()
		defer w.stop(&n.times.Ask)
	}
	asked, err := n.eng.Ask(t, ask, results)
	switch {
	case asked.Local:
		s.stats.SelfCoordinated++
		return asked.Decision.Allowed, err == nil, err
	case asked.Alone:
		return false, false, fmt.Errorf("%w: every node above %s missed its asks", cluster.ErrNoCoordinator, n.name)
	}
	if err != nil {
		return false, false, fmt.Errorf("clustersim: encoding an ask: %w", err)
	}
	k := asked.Out.To
	ki, ok := s.byName[k]
	if !ok {
		return false, false, fmt.Errorf("clustersim: coordinator %q is no simulated node", k)
	}
	at := s.now
	msg := asked.Out.Msgs[0]
	deadline := s.deadline()
	// What the network brings the asker: its answers in time, or none and
	// the late ones (taken at the deadline and a round trip after the ask).
	var got askOutcome
	got.at, got.expireAt, got.lateAt = at, at+deadline.Milliseconds(), at+2*s.latMs
	granted := false  // by the coordinator, in an answer the asker did not get in time
	first := deadline // when the first answer in time came, after the check
	// hop delivers msg from node from to node to, sent after the check by
	// delay, and follows what that node sends on within the ask's round:
	// an ask passed on to the key's coordinator, an answer forwarded back
	// (engine, relay.go). Each hop costs a latency and may be lost. What
	// reaches the asker is its answers: in time if by the deadline. Every
	// node decides at the check's instant, as above.
	var hop func(from, to int, m []byte, delay time.Duration, depth int) error
	hop = func(from, to int, m []byte, delay time.Duration, depth int) error {
		if to == sc.j {
			lost, arrival := s.lost(from, to), delay+s.cfg.Latency
			if !lost && arrival <= deadline {
				got.answers = append(got.answers, m)
				first = min(first, arrival)
				return nil
			}
			// Read as an oracle only when it does not come in time (a
			// forwarded copy reads as no answer: its direct one says).
			if dec, err := engine.DecodeAnswer(m, engine.DefaultDecodeLimits()); err == nil && dec.Decided && dec.Allowed {
				granted = true
			}
			if !lost {
				got.late = append(got.late, m)
			}
			return nil
		}
		if s.lost(from, to) || depth == 4 {
			return nil
		}
		rcv, err := s.receive(to, at, m)
		if err != nil {
			return fmt.Errorf("clustersim: %s receiving a coordination message: %w", s.nodes[to].name, err)
		}
		for _, o := range rcv.Out {
			if o.Purpose != engine.PurposeAnswer && o.Purpose != engine.PurposeAsk {
				continue
			}
			next, ok := s.byName[o.To]
			if !ok {
				continue
			}
			for _, m := range o.Msgs {
				if o.Purpose == engine.PurposeAnswer {
					s.stats.Answers++
					s.stats.AnswerBytes += int64(len(m))
				} else {
					s.stats.AskBytes += int64(len(m))
				}
				if err := hop(to, next, m, delay+s.cfg.Latency, depth+1); err != nil {
					return err
				}
			}
		}
		return nil
	}
	send := func(delay time.Duration) error {
		s.stats.Asks++
		s.stats.AskBytes += int64(len(msg))
		return hop(sc.j, ki, msg, delay, 0)
	}
	if err := send(0); err != nil {
		return false, false, err
	}
	// No answer by half the deadline: the same ask again, as
	// cluster.Node.Coordinate sends it.
	if first > deadline/2 && n.eng.AskAgain(asked.ID) {
		if err := send(deadline / 2); err != nil {
			return false, false, err
		}
	}
	if len(got.answers) > 0 {
		got.late = nil
	} else if granted {
		// No answer came in time: read as an oracle, the grant is an
		// over-count the asker never hears of (orphan).
		s.lostGrant = orphan{key: ask.Key, hits: ask.Hits, until: at + s.grantTTLMs()}
	}
	s.recordAsk(sc.j, got)
	allowed, rel, err := s.finishAsk(n, asked, got, results, k)
	if allowed {
		s.stats.Granted++
	}
	if rel != nil {
		m := rel.Msgs[0]
		s.stats.Releases++
		s.stats.ReleaseBytes += int64(len(m))
		ri := ki
		if to, ok := s.byName[rel.To]; ok {
			ri = to // an ask sent around is released where it went
		}
		if arrival := s.post(got.expireAt+s.latMs, sc.j, ri, m); arrival >= 0 && s.lostGrant.hits > 0 {
			s.lostGrant.until = min(s.lostGrant.until, arrival+1)
		}
		// A given-up ask may fail the coordinator over: the keys that
		// moved go to their new coordinators at once.
		if err := s.moved(sc.j, got.expireAt); err != nil {
			return false, false, err
		}
	}
	return allowed, false, err
}

// askOutcome is what the network brought an asker for one ask: the
// answers that came in time (taken at the ask's instant, at), or, with
// none, the answers that came late (at lateAt, a round trip after the
// ask); without an answer in time the ask is given up at expireAt, the
// deadline. True times.
type askOutcome struct {
	answers, late        [][]byte
	at, expireAt, lateAt int64
}

// finishAsk is the asking node's part of an ask sent to coordinator k once
// the network has done its part (got): it takes the answer, or gives the
// ask up and returns the release to send, then takes the late answers. A
// simulation and its replay on a node alone (Replay) both run it.
func (s *Cluster) finishAsk(n *Node, asked engine.Asked, got askOutcome, results []counter.Result, k string) (allowed bool, release *engine.Outbound, err error) {
	for _, m := range got.answers {
		r, err := n.eng.Receive(s.clock(n, got.at), m)
		if err != nil {
			return false, nil, fmt.Errorf("clustersim: %s receiving an answer: %w", n.name, err)
		}
		if !r.Answered {
			continue
		}
		if !r.Answer.Decided || len(r.Answer.Results) != len(results) {
			return false, nil, fmt.Errorf("%w: %s", cluster.ErrCoordinatorUnable, k)
		}
		copy(results, r.Answer.Results)
		return r.Answer.Allowed, nil, nil
	}
	// No answer by the deadline: give the ask up and release the grant
	// the coordinator may have made, so that it stops counting when the
	// release arrives.
	rel, ok, err := n.eng.AskExpired(s.clock(n, got.expireAt), asked.ID)
	if err != nil {
		return false, nil, fmt.Errorf("clustersim: giving an ask up: %w", err)
	}
	if ok {
		release = &rel
	}
	// A late answer still arrives, a round trip after the ask: nobody
	// waits for it, but it tells the asker its coordinator is alive, so a
	// slow coordinator is not failed over as a silent one would be.
	for _, m := range got.late {
		if _, err := n.eng.Receive(s.clock(n, got.lateAt), m); err != nil {
			return false, release, fmt.Errorf("clustersim: %s receiving a late answer: %w", n.name, err)
		}
	}
	return false, release, context.DeadlineExceeded
}

// grantTTLMs is how long a coordinator counts a grant its merged slices
// do not show: two sync intervals and the grace (counter/coordinate.go).
func (s *Cluster) grantTTLMs() int64 {
	return 2*s.syncMs + int64(s.cfg.Grace*float64(s.syncMs))
}

// deadline is the Deciders' deadline.
func (s *Cluster) deadline() time.Duration {
	if s.cfg.Deadline > 0 {
		return s.cfg.Deadline
	}
	return decision.DefaultDeadline
}
