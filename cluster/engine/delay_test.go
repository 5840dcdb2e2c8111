package engine

import (
	"testing"
)

// TestDeltaDelays: a delta's delay is judged against the fastest of its
// sender's recent messages, so that the clocks' offset cancels, and one
// past the delivery grace (50 ms of 200 here) is counted late. A hello's
// reply or a catch-up (full states) is not a delta and is not counted.
func TestDeltaDelays(t *testing.T) {
	for _, off := range []int64{0, 300, -300} { // b's clock minus a's, ms
		a, b := newTestNode(t, "a", 2), newTestNode(t, "b", 2)
		up(t, 0, a, b)
		if _, count, _ := b.e.Stats.DeltaDelays.Snapshot(); count != 0 {
			t.Fatalf("%d messages counted after the hellos and their replies, want none", count)
		}
		// a ticks every 200 ms from 3.2 s on its clock (when b's estimate
		// of a's clock no longer holds the hellos, on one clock); b gets
		// each tick's deltas late by these ms, on a clock off by off.
		for i, late := range []int64{0, 60, 10, 50} {
			ms := 3000 + int64(200*(i+1))
			a.hit(t, ms-10, "k", 1)
			out, err := a.e.Tick(at(ms))
			if err != nil {
				t.Fatal(err)
			}
			msgs := msgsTo(out, "b")
			if len(msgs) == 0 {
				t.Fatalf("a's tick at %d ms sent b nothing", ms)
			}
			deliver(t, b, at(ms+late+off), msgs)
		}
		atMost, count, sum := b.e.Stats.DeltaDelays.Snapshot()
		if count != 4 {
			t.Fatalf("offset %d: %d deltas counted, want 4", off, count)
		}
		// Bounds 1, 2, 5, 10, 20, 50, 100 ms: 0 | 10 | 50 | 60.
		want := map[int]uint64{0: 1, 3: 2, 4: 2, 5: 3, 6: 4}
		for i, w := range want {
			if atMost[i] != w {
				t.Errorf("offset %d: %d at most %d ms, want %d (%v)", off, atMost[i], DelayBoundsMs()[i], w, atMost)
			}
		}
		if sum != 120 {
			t.Errorf("offset %d: sum %d ms, want 120", off, sum)
		}
		if got := b.e.Stats.LateDeltas.Load(); got != 1 {
			t.Errorf("offset %d: %d late deltas, want 1 (60 ms past a grace of 50)", off, got)
		}
	}
}

// TestDelayHistogramBuckets: a delay on a bound counts in its bucket, one
// past the largest only in the count, a negative one as 0.
func TestDelayHistogramBuckets(t *testing.T) {
	var h DelayHistogram
	for _, ms := range []int64{-5, 0, 1, 2, 3, 1000, 1001} {
		h.observe(ms)
	}
	atMost, count, sum := h.Snapshot()
	want := [delayBuckets]uint64{3, 4, 5, 5, 5, 5, 5, 5, 5, 6}
	if atMost != want || count != 7 || sum != 0+0+1+2+3+1000+1001 {
		t.Errorf("got %v, %d, %d; want %v, 7, %d", atMost, count, sum, want, 2007)
	}
}
