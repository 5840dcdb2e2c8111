package clustersim

import (
	"errors"
	"fmt"
	"slices"
)

// ErrNodeDown is the error of a check sent to a node that Stop stopped
// and Restart has not started again.
var ErrNodeDown = errors.New("clustersim: the node is stopped")

// Stop stops node i at true time at, as SIGKILL stops a process: it
// ticks no more, and every message to or from it is lost from then on,
// asks and answers included, those already in flight to it too. Its
// peers are not told: they see it silent, as memberlist's members see a
// killed process until they declare it dead, and fail it over on their
// missed asks (engine, "Failover"). A check sent to it is an error
// (ErrNodeDown).
func (s *Cluster) Stop(at int64, i int) error {
	if !s.started {
		return fmt.Errorf("clustersim: Stop before Start")
	}
	if err := s.advance(at, false); err != nil {
		return err
	}
	n := s.nodes[i]
	if n.down {
		return fmt.Errorf("clustersim: %s stopped twice", n.name)
	}
	n.down, n.ticking, n.changed = true, false, false
	s.firstTickOK = false
	return nil
}

// Leave stops node i at true time at, as SIGTERM does: it leaves the
// cluster, and every peer takes it down at once (PeerDown, memberlist's
// leave event), so its keys move to their next nodes on the ring. As Stop
// otherwise.
func (s *Cluster) Leave(at int64, i int) error {
	if err := s.Stop(at, i); err != nil {
		return err
	}
	s.nodes[i].left = true
	name := s.nodes[i].name
	for j, p := range s.nodes {
		if p.down {
			continue
		}
		p.eng.PeerDown(s.clock(p, at), name)
		if err := s.moved(j, at); err != nil {
			return err
		}
	}
	return nil
}

// Restart starts node i, stopped, again at true time at as a new process
// under its name, as limiterd's restart does: an empty counter and a new
// engine whose ask ids start above the old one's (Config.FirstAskID from
// the start time, as the transport sets it), which joins its peers
// (PeerUp each way, the membership's join event): it greets each with a
// hello, whose reply brings back the counts it had sent, and each peer
// sends it a catch-up if its rate limits allow. Restarts are not
// recorded (Config.Record).
func (s *Cluster) Restart(at int64, i int) error {
	if s.rec != nil {
		return fmt.Errorf("clustersim: a restart cannot be recorded")
	}
	old := s.nodes[i]
	if !old.down {
		return fmt.Errorf("clustersim: %s restarted while running", old.name)
	}
	if err := s.advance(at, false); err != nil {
		return err
	}
	n, err := s.newNode(i, coordinator{s, i}, uint64(s.clock(old, at).UnixNano()))
	if err != nil {
		return err
	}
	s.nodes[i] = n
	for j, p := range s.nodes {
		if j == i {
			continue
		}
		out, err := n.eng.PeerUp(s.clock(n, at), p.name)
		if err != nil {
			return fmt.Errorf("%s: %w", n.name, err)
		}
		s.sendAll(at, i, out)
		if p.down {
			continue
		}
		if old.left && s.cfg.SeeAfter > 0 {
			if p.unseen == nil {
				p.unseen = make([]bool, len(s.nodes))
			}
			p.unseen[i] = true
			k := j // the peer's rank among the others
			if j > i {
				k--
			}
			s.addSight(sight{at: at + s.cfg.SeeAfter.Milliseconds()*int64(k+1)/int64(len(s.nodes)-1), peer: j, node: i})
			continue
		}
		if err := s.see(at, j, i); err != nil {
			return err
		}
	}
	n.ticking, n.since = true, at
	s.schedule(n, at)
	s.firstTickOK = false
	return nil
}

// sight is peer seeing node back at true time at (Config.SeeAfter).
type sight struct {
	at         int64
	peer, node int
}

// addSight schedules sg, keeping the sights in time order (stable).
func (s *Cluster) addSight(sg sight) {
	k := len(s.sights)
	for k > 0 && s.sights[k-1].at > sg.at {
		k--
	}
	s.sights = slices.Insert(s.sights, k, sg)
}

// see has peer j see node i (back) at true time at, as memberlist's join
// event does: PeerUp, which sends what j owes it, and the routed keys
// that move to it. Nothing if either is down by then.
func (s *Cluster) see(at int64, j, i int) error {
	p, n := s.nodes[j], s.nodes[i]
	if p.unseen != nil {
		p.unseen[i] = false
	}
	if p.down || n.down {
		return nil
	}
	out, err := p.eng.PeerUp(s.clock(p, at), n.name)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	s.sendAll(at, j, out)
	return s.moved(j, at)
}
