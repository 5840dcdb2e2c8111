package clustersim

import (
	"container/heap"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/limiterd/limiterd/cluster/engine"
)

// delivery is a message in flight.
type delivery struct {
	at  int64  // true time of arrival, ms
	seq uint64 // ties broken by send order: deterministic
	to  int
	msg []byte
}

type deliveryQueue []delivery

func (q deliveryQueue) Len() int { return len(q) }
func (q deliveryQueue) Less(i, j int) bool {
	return q[i].at < q[j].at || q[i].at == q[j].at && q[i].seq < q[j].seq
}
func (q deliveryQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *deliveryQueue) Push(x any)   { *q = append(*q, x.(delivery)) }
func (q *deliveryQueue) Pop() any {
	old := *q
	d := old[len(old)-1]
	*q = old[:len(old)-1]
	return d
}

// received is what one delivery's Receive returned.
type received struct {
	out []engine.Outbound
	err error
}

// tickAt ticks every node whose tick falls on true time at, which no
// tick or delivery precedes, and sends what each returns, in node order.
// The Ticks themselves may run on several goroutines (Config.Workers):
// each touches only its node, and the sends, the only step that draws
// from the network's randomness or orders anything, follow in node order,
// so the result is that of ticking the nodes one after the other.
func (s *Cluster) tickAt(at int64) error {
	s.due = s.due[:0]
	for i, n := range s.nodes {
		if n.ticking && n.nextTick == at {
			s.due = append(s.due, i)
		}
	}
	err := s.each(s.due, func(i int) error {
		n := s.nodes[i]
		n.changed = false
		delta := n.eng.Stats.DeltaMessages.Load()
		s.recordTick(i, at)
		w := s.startWatch()
		out, err := n.eng.Tick(s.clock(n, at))
		w.stop(tickTimes(&n.times, out))
		n.out, n.produced = out, n.eng.Stats.DeltaMessages.Load()-delta
		if err != nil {
			return fmt.Errorf("node-%d tick at %d ms: %w", i, at, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, i := range s.due {
		n := s.nodes[i]
		s.stats.Produced += int(n.produced)
		s.sendAll(at, i, n.out)
		n.out = nil
		s.schedule(n, at+1)
	}
	s.firstTickOK = false
	return nil
}

// tickTimes is where the time of a Tick that returned out goes: Hot when
// it had anti-entropy (or a heartbeat) to send, else Tick.
func tickTimes(t *Times, out []engine.Outbound) *EngineTime {
	for _, o := range out {
		if o.Purpose == engine.PurposeAntiEntropy || o.Purpose == engine.PurposeHeartbeat {
			return &t.Hot
		}
	}
	return &t.Tick
}

// deliverAt delivers every message that arrives at true time at, in send
// order, and sends what the receivers answer, in the same order. The
// receivers may take their messages on several goroutines, each receiver
// on one (Config.Workers); as with tickAt, the answers are sent afterwards
// in the order of the messages they answer, which is where one-by-one
// delivery would have sent them (after every message already in flight
// for that instant), so the result does not depend on the workers.
func (s *Cluster) deliverAt(at int64) error {
	s.batch = s.batch[:0]
	for len(s.queue) > 0 && s.queue[0].at == at {
		if d := heap.Pop(&s.queue).(delivery); !s.nodes[d.to].down {
			s.batch = append(s.batch, d)
		}
	}
	s.results = zeroed(s.results, len(s.batch))
	// The batch's indexes grouped by receiver, each group in send order:
	// receiver to's are order[first[to]:first[to+1]].
	s.first = zeroed(s.first, len(s.nodes)+1)
	for _, d := range s.batch {
		s.first[d.to+1]++
	}
	s.due = s.due[:0]
	for to := range s.nodes {
		if s.first[to+1] > 0 {
			s.due = append(s.due, to)
		}
		s.first[to+1] += s.first[to]
	}
	s.order = zeroed(s.order, len(s.batch))
	s.next = append(s.next[:0], s.first...)
	for j, d := range s.batch {
		s.order[s.next[d.to]] = j
		s.next[d.to]++
	}
	err := s.each(s.due, func(to int) error {
		n := s.nodes[to]
		w := s.startWatch()
		for _, j := range s.order[s.first[to]:s.first[to+1]] {
			s.recordReceive(to, at, s.batch[j].msg)
			rcv, err := n.eng.Receive(s.clock(n, at), s.batch[j].msg)
			s.results[j] = received{rcv.Out, err}
		}
		w.stop(&n.times.Receive)
		return nil
	})
	if err != nil {
		return err
	}
	for j, d := range s.batch {
		r := s.results[j]
		s.results[j] = received{}
		if errors.Is(r.err, engine.ErrReplay) {
			// A duplicated hello (Dup): the engine answers a hello once,
			// as it would a replayed one on a real network.
			continue
		}
		if r.err != nil {
			return fmt.Errorf("node-%d receiving at %d ms: %w", d.to, d.at, r.err)
		}
		s.sendAll(d.at, d.to, r.out)
	}
	// A message may end a failover (its sender heard again), so the
	// receivers' moved keys go out now, as the transport sends them.
	for _, to := range s.due {
		if err := s.moved(to, at); err != nil {
			return err
		}
	}
	return nil
}

// moved sends what node i's engine returns from Moved at true time at:
// its slices of the routed keys whose destination changed (the transport
// calls it after a membership event, a message, a given-up ask).
func (s *Cluster) moved(i int, at int64) error {
	n := s.nodes[i]
	out, err := n.eng.Moved(s.clock(n, at))
	if err != nil {
		return fmt.Errorf("%s: %w", n.name, err)
	}
	s.sendAll(at, i, out)
	return nil
}

// zeroed returns b resized to n zero values, reusing its array.
func zeroed[T any](b []T, n int) []T {
	b = slices.Grow(b[:0], n)[:n]
	clear(b)
	return b
}

// each runs f for every node index of idx: on the calling goroutine, or
// with Config.Workers on that many goroutines, worker k taking idx[k],
// idx[k+W]... Each node is touched by one goroutine only. It returns the
// error of the first index that failed.
func (s *Cluster) each(idx []int, f func(i int) error) error {
	w := min(s.cfg.Workers, len(idx))
	if w <= 1 {
		if s.cfg.Timed {
			// Stay on one OS thread, so that its CPU time measures the
			// calls.
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
		}
		for _, i := range idx {
			if err := f(i); err != nil {
				return err
			}
		}
		return nil
	}
	errs := make([]error, len(idx))
	var wg sync.WaitGroup
	for k := range w {
		wg.Go(func() {
			if s.cfg.Timed {
				// As above; unlocked before the goroutine ends, or the
				// runtime would end the thread with it.
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			for j := k; j < len(idx); j += w {
				if errs[j] = f(idx[j]); errs[j] != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// sendAll puts the engine messages node from sent at true time at on the
// network: each copy arrives after the latency (and a further reorder
// delay), unless lost or cut; with Dup a second copy follows.
func (s *Cluster) sendAll(at int64, from int, out []engine.Outbound) {
	for _, o := range out {
		to := s.byName[o.To]
		for _, m := range o.Msgs {
			s.send(at+s.latMs, from, to, o.Purpose, m)
			if s.cfg.Dup {
				s.send(at+s.latMs+2*s.syncMs+1, from, to, o.Purpose, m)
			}
		}
	}
}

func (s *Cluster) send(at int64, from, to int, p engine.Purpose, msg []byte) {
	s.stats.Messages++
	s.stats.Bytes += int64(len(msg))
	if int(p) < len(s.stats.Sent) {
		s.stats.Sent[p].Messages++
		s.stats.Sent[p].Bytes += int64(len(msg))
	}
	s.post(at, from, to, msg)
}

// lost draws whether a copy of a message from node from to node to is
// lost: always across a cut, else with the configured loss rate.
func (s *Cluster) lost(from, to int) bool {
	if s.nodes[from].down || s.nodes[to].down {
		return true // stopped (Stop): nothing leaves it or reaches it
	}
	if u := s.nodes[from].unseen; u != nil && u[to] {
		return true // restarted, not yet seen back by from (SeeAfter)
	}
	if s.cut != nil && s.cut(from, to) {
		return true
	}
	return s.cfg.Loss > 0 && s.rng.Float64() < s.cfg.Loss
}

// post puts one copy on the network, arriving at true time at (plus the
// reorder delay) unless lost, and returns its arrival time, or -1 when it
// is lost; it counts nothing.
func (s *Cluster) post(at int64, from, to int, msg []byte) int64 {
	if s.lost(from, to) {
		return -1
	}
	if r := s.cfg.Reorder.Milliseconds(); r > 0 {
		at += s.rng.Int64N(r + 1)
	}
	s.seq++
	heap.Push(&s.queue, delivery{at: at, seq: s.seq, to: to, msg: msg})
	return at
}
