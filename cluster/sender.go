package cluster

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// batch is a list of messages for one peer. The messages are shared,
// read-only, by the batches of every peer.
type batch struct {
	msgs [][]byte
	// reliable sends over a stream (memberlist SendReliable) rather than in
	// datagrams: catch-up state, and everything with TransportTCP.
	reliable bool
	// spread is how long the sends of the batch may take (Config.SendSpread
	// of the interval). Zero sends them back to back.
	spread time.Duration
}

// sender owns the sends to one peer, so that a slow or unreachable peer
// (a stream dial waits up to memberlist's TCPTimeout) delays nobody else:
// the sync loop only queues, without waiting.
type sender struct {
	name string
	node atomic.Pointer[memberlist.Node] // where the peer is; updated on address change
	q    chan batch

	once     sync.Once
	stop     chan struct{}
	deadline atomic.Int64 // unix ns until which queued batches are still sent after stop; 0: none
}

func newSender(name string, queue int) *sender {
	return &sender{name: name, q: make(chan batch, queue), stop: make(chan struct{})}
}

// offer queues b unless the queue is full or the sender stopped.
func (s *sender) offer(b batch) bool {
	select {
	case <-s.stop:
		return false
	default:
	}
	select {
	case s.q <- b:
		return true
	default:
		return false
	}
}

// stopAndDrain stops the sender. It still sends what is queued until
// deadline (the zero time: nothing more).
func (s *sender) stopAndDrain(deadline time.Time) {
	s.once.Do(func() {
		if !deadline.IsZero() {
			s.deadline.Store(deadline.UnixNano())
		}
		close(s.stop)
	})
}

// run sends queued batches until stopped.
func (s *sender) run(n *Node) {
	for {
		select {
		case b := <-s.q:
			n.send(s, b)
		case <-s.stop:
			s.drain(n)
			return
		}
	}
}

// drain sends what is still queued, until the deadline given to stopAndDrain.
func (s *sender) drain(n *Node) {
	for d := s.deadline.Load(); d != 0 && time.Now().UnixNano() < d; {
		select {
		case b := <-s.q:
			n.send(s, b)
		default:
			return
		}
	}
}

// send sends one batch to s's peer. A message too large for a datagram
// goes over a stream rather than being cut or lost. After a stream
// failure the rest of the batch is dropped: the peer is likely gone, and
// each further try could wait a full TCPTimeout.
func (n *Node) send(s *sender, b batch) {
	nd := s.node.Load()
	if nd == nil {
		return
	}
	start := time.Now()
	for i, m := range b.msgs {
		if b.spread > 0 && i > 0 {
			// Message i is due i/len of the spread after the first. Gaps
			// under a millisecond are not worth a timer: those messages
			// go out together with the next due one.
			if d := time.Until(start.Add(b.spread * time.Duration(i) / time.Duration(len(b.msgs)))); d >= time.Millisecond {
				time.Sleep(d)
			}
		}
		var err error
		if b.reliable || len(m) > n.dgram {
			err = n.ml.SendReliable(nd, m)
		} else {
			err = n.ml.SendBestEffort(nd, m)
		}
		if err != nil {
			lost := 1
			if b.reliable || len(m) > n.dgram {
				lost = len(b.msgs) - i
			}
			n.dropped.Add(uint64(lost))
			n.sendLog.log(n.log, slog.LevelWarn, "sync send failed", "peer", s.name, "messages_dropped", lost, "err", err)
			if lost > 1 {
				return
			}
			continue
		}
		n.engine.CountSent(1, len(m))
	}
}
