package loadgen

import (
	"math/bits"
	"time"
)

// histogram is a log-linear histogram of durations in the manner of HDR
// histograms: values below 2^subBits ns are counted exactly, larger ones in
// 2^subBits buckets per power of two, so a reported percentile is at most
// 1/2^subBits (1.6 %) above the true value, and the memory is fixed (about
// 20 KiB) whatever the number of values. The zero value is empty and
// ready; it is not safe for concurrent use (recorder adds the locking).
type histogram struct {
	counts   [histBuckets]uint64
	n        uint64
	sum      time.Duration
	min, max time.Duration
}

const (
	subBits     = 6
	subCount    = 1 << subBits
	histBuckets = (64 - subBits) * subCount
)

// bucketOf maps v >= 0 to its bucket: v itself below subCount, then for v
// in [2^e, 2^(e+1)) with e >= subBits, subCount buckets of width
// 2^(e-subBits).
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - subBits - 1 // v>>shift is in [subCount, 2*subCount)
	return (shift+1)*subCount + int(v>>shift) - subCount
}

// bucketTop is the largest value that falls in bucket b.
func bucketTop(b int) uint64 {
	if b < subCount {
		return uint64(b)
	}
	shift := b/subCount - 1
	sub := uint64(b%subCount + subCount)
	return (sub+1)<<shift - 1
}

// record adds one value; negative values count as 0.
func (h *histogram) record(d time.Duration) {
	d = max(d, 0)
	h.counts[bucketOf(uint64(d))]++
	if h.n == 0 || d < h.min {
		h.min = d
	}
	h.max = max(h.max, d)
	h.n++
	h.sum += d
}

// merge adds every value of o.
func (h *histogram) merge(o *histogram) {
	if o.n == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	if h.n == 0 || o.min < h.min {
		h.min = o.min
	}
	h.max = max(h.max, o.max)
	h.n += o.n
	h.sum += o.sum
}

// quantile returns the smallest recorded value v (to the bucket's
// precision, never above the maximum) such that at least a fraction q of
// the values are at most v; 0 when empty. q is clamped to [0, 1].
func (h *histogram) quantile(q float64) time.Duration {
	if h.n == 0 {
		return 0
	}
	q = min(max(q, 0), 1)
	rank := uint64(q * float64(h.n))
	if float64(rank) < q*float64(h.n) || rank == 0 {
		rank++ // ceil, at least the first value
	}
	rank = min(rank, h.n)
	var seen uint64
	for b, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(time.Duration(bucketTop(b)), h.max)
		}
	}
	return h.max
}

// mean is the arithmetic mean, 0 when empty.
func (h *histogram) mean() time.Duration {
	if h.n == 0 {
		return 0
	}
	return h.sum / time.Duration(h.n)
}
