package cluster

import (
	"context"
	"sync"
	"sync/atomic"
)

// mergeQueueLen is how many sync messages wait for the merger at most: a
// tick's deltas from every peer at HS2's load (some 20 datagrams from each
// of 7 peers) several times over, as memberlist's own handoff queue holds
// 1,024 messages.
const mergeQueueLen = 1024

// merger merges the sync messages (engine.IsSync: deltas, anti-entropy,
// catch-ups, hellos) on a goroutine of its own. A node's datagrams are
// delivered on one goroutine, in the order they arrived (the transport's
// reader, or memberlist's). Merged there, a tick's deltas from every peer
// (a hundred datagrams and more at HS2's load) held back the asks and
// answers queued behind them, which a
// check waits for with a deadline of a few milliseconds: on a busy host
// those checks fell back to the budget, and some of the budget's denials
// were false (BENCHMARKS.md, "Sync messages merged apart from the asks").
// The engine takes messages concurrently and in any order, as datagrams
// come.
//
// offer is called on the delivering goroutine; run on one of Run's, until
// its context ends. A message offered while no run is under way, or when
// the queue is full, is not taken: the caller merges it itself, as before.
type merger struct {
	queue chan *[]byte
	bufs  sync.Pool // of *[]byte

	mu      sync.RWMutex // offer holds it shared; run's end exclusively
	running bool         // under mu

	full atomic.Uint64 // messages not taken: the queue was full
}

func newMerger() *merger {
	return &merger{queue: make(chan *[]byte, mergeQueueLen)}
}

// offer queues a copy of b for run and reports whether it did. b is not
// retained.
func (m *merger) offer(b []byte) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if !m.running {
		return false
	}
	p, _ := m.bufs.Get().(*[]byte)
	if p == nil {
		p = new([]byte)
	}
	*p = append((*p)[:0], b...)
	select {
	case m.queue <- p:
		return true
	default:
		m.bufs.Put(p)
		m.full.Add(1)
		return false
	}
}

// run hands each queued message to merge, in the order offered, until ctx
// ends; then it merges what is still queued and returns. No offer is
// taken after that, so nothing offered is left unmerged. merge must not
// retain its argument.
func (m *merger) run(ctx context.Context, merge func([]byte)) {
	m.mu.Lock()
	m.running = true
	m.mu.Unlock()
	handle := func(p *[]byte) {
		merge(*p)
		m.bufs.Put(p)
	}
	for {
		select {
		case p := <-m.queue:
			handle(p)
		case <-ctx.Done():
			m.mu.Lock()
			m.running = false
			m.mu.Unlock()
			for {
				select {
				case p := <-m.queue:
					handle(p)
				default:
					return
				}
			}
		}
	}
}
