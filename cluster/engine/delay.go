package engine

import "sync/atomic"

// delayBuckets is how many bounds DelayBoundsMs has.
const delayBuckets = 10

// DelayBoundsMs returns the upper bounds, in ms, of a DelayHistogram's
// buckets: from under a LAN's delivery time to past any grace a sync
// interval allows. They are the metric's buckets, so they stay fixed.
func DelayBoundsMs() [delayBuckets]int64 {
	return [delayBuckets]int64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000}
}

// DelayHistogram counts delays in ms in the buckets of DelayBoundsMs, and
// one bucket past them. Its methods are safe for concurrent use.
type DelayHistogram struct {
	counts [delayBuckets + 1]atomic.Uint64 // per bucket, not cumulative
	sumMs  atomic.Uint64
}

// observe counts one delay of ms (a negative one as 0).
func (h *DelayHistogram) observe(ms int64) {
	ms = max(ms, 0)
	bounds := DelayBoundsMs()
	i := 0
	for i < len(bounds) && ms > bounds[i] {
		i++
	}
	h.counts[i].Add(1)
	h.sumMs.Add(uint64(ms))
}

// Snapshot returns, for each bound of DelayBoundsMs, how many delays were
// at most it (cumulative, as Prometheus' buckets are), how many there
// were in all, and their sum in ms. Concurrent observations may be half
// in it: a scrape's figures, not a transaction's.
func (h *DelayHistogram) Snapshot() (atMost [delayBuckets]uint64, count, sumMs uint64) {
	for i := range atMost {
		count += h.counts[i].Load()
		atMost[i] = count
	}
	return atMost, count + h.counts[delayBuckets].Load(), h.sumMs.Load()
}

// observeDelay counts a delta that came ms later than its sender's
// fastest recent message (Stats.DeltaDelays), and counts it late if that
// is past the delivery grace.
func (e *Engine) observeDelay(ms int64) {
	e.Stats.DeltaDelays.observe(ms)
	cc, _ := e.c.Cluster()
	if float64(ms) > cc.DeliveryGrace*float64(cc.SyncInterval.Milliseconds()) {
		e.Stats.LateDeltas.Add(1)
	}
}
