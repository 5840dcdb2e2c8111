package cluster

import "sync"

// waiters are goroutines waiting for replies by id: a check for its
// coordinator's answer (by ask id), a reset for its answer and the
// acknowledgements (by reset id). The engine keeps the protocol (ids,
// which reply is awaited); this is only where a reply finds its goroutine.
type waiters[T any] struct {
	mu sync.Mutex
	ch map[uint64]chan T
}

// add registers a wait for id; size bounds the replies buffered.
func (w *waiters[T]) add(id uint64, size int) chan T {
	ch := make(chan T, size)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ch == nil {
		w.ch = make(map[uint64]chan T)
	}
	w.ch[id] = ch
	return ch
}

// remove ends the wait for id.
func (w *waiters[T]) remove(id uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.ch, id)
}

// deliver hands v to the goroutine waiting for id, if any. It never
// blocks: a reply past the buffer is dropped (for a reset, a node that
// joined since it started, which then shows as unconfirmed). With last,
// the wait ends with v (a check's one answer).
func (w *waiters[T]) deliver(id uint64, v T, last bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.ch[id]
	if ch == nil {
		return
	}
	if last {
		delete(w.ch, id)
	}
	select {
	case ch <- v:
	default:
	}
}
