package loadgen

import (
	"github.com/limiterd/limiterd/internal/seed"

	"github.com/limiterd/limiterd/internal/oracle"

	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

func durs(ms ...int64) []time.Duration {
	out := make([]time.Duration, len(ms))
	for i, m := range ms {
		out[i] = time.Duration(m) * time.Millisecond
	}
	return out
}

func TestMaxInWindow(t *testing.T) {
	tests := []struct {
		name   string
		at     []time.Duration
		window time.Duration
		want   int
		start  time.Duration
	}{
		{"empty", nil, time.Second, 0, 0},
		{"one", durs(5), time.Second, 1, 5 * time.Millisecond},
		{"all inside", durs(0, 100, 999), time.Second, 3, 0},
		// Half-open: t and t+window are never in the same interval.
		{"exactly a window apart", durs(0, 1000), time.Second, 1, 0},
		{"one ns short of a window", []time.Duration{0, time.Second - 1}, time.Second, 2, 0},
		{"busiest later", durs(0, 1500, 1600, 1700, 2400), time.Second, 4, 1500 * time.Millisecond},
		{"same instant", durs(7, 7, 7, 2000), time.Second, 3, 7 * time.Millisecond},
		// The seed's edge burst against a fixed window: 600 before the edge
		// and 600 after it are within one window of each other.
		{"both sides of an edge", append(seed.Spread(55*time.Second, 5*time.Second, 600), seed.Spread(time.Minute, 5*time.Second, 600)...), time.Minute, 1200, 55 * time.Second},
	}
	for _, tt := range tests {
		got, start := oracle.MaxInWindow(tt.at, nil, tt.window)
		if got != int64(tt.want) || start != tt.start {
			t.Errorf("%s: %d from %v, want %d from %v", tt.name, got, start, tt.want, tt.start)
		}
	}
}

// bruteMax is the definition: for every instant t of at, the instants in [t, t+w).
func bruteMax(at []time.Duration, w time.Duration) int {
	best := 0
	for _, t := range at {
		n := 0
		for _, u := range at {
			if u >= t && u < t+w {
				n++
			}
		}
		best = max(best, n)
	}
	return best
}

// bruteFalse is the definition: a rejection at r is false when fewer than
// limit accepted instants lie in (r-w, r].
func bruteFalse(acc, rej []time.Duration, w time.Duration, limit int) int {
	n := 0
	for _, r := range rej {
		in := 0
		for _, a := range acc {
			if a > r-w && a <= r {
				in++
			}
		}
		if in < limit {
			n++
		}
	}
	return n
}

func TestFalseRejections(t *testing.T) {
	tests := []struct {
		name     string
		acc, rej []time.Duration
		limit    int
		want     int
	}{
		{"none rejected", durs(0, 1, 2), nil, 3, 0},
		{"rejected at the limit", durs(0, 1, 2), durs(3), 3, 0},
		{"rejected under the limit", durs(0, 1), durs(3), 3, 1},
		// An acceptance exactly a window before r has left the window (r-w, r].
		{"oldest left the window", durs(0, 500, 900), durs(1000), 3, 1},
		{"oldest still inside", durs(1, 500, 900), durs(1000), 3, 0},
		// An acceptance sent at the same instant as r counts (it was sent no later).
		{"same instant", durs(0, 10, 20), durs(20), 3, 0},
		{"accepted after r do not count", durs(0, 10, 30), durs(20), 3, 1},
		{"nothing accepted", nil, durs(1, 2, 3), 1, 3},
		{"a 9x client", durs(0, 1, 2), durs(3, 4, 5, 999, 1001, 1002), 3, 2},
	}
	for _, tt := range tests {
		if got := oracle.FalseRejections(tt.acc, tt.rej, time.Second, int64(tt.limit)); got != tt.want {
			t.Errorf("%s: %d false rejections, want %d", tt.name, got, tt.want)
		}
		if got := bruteFalse(tt.acc, tt.rej, time.Second, tt.limit); got != tt.want {
			t.Errorf("%s: the definition gives %d, the table %d", tt.name, got, tt.want)
		}
	}
}

// TestAnalysisAgainstDefinition compares both measures with their brute
// force definitions on random logs.
func TestAnalysisAgainstDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for run := range 300 {
		w := time.Duration(1+rng.IntN(50)) * time.Millisecond
		limit := 1 + rng.IntN(8)
		var acc, rej []time.Duration
		for range rng.IntN(60) {
			at := time.Duration(rng.IntN(200)) * time.Millisecond
			if rng.IntN(2) == 0 {
				acc = append(acc, at)
			} else {
				rej = append(rej, at)
			}
		}
		slices.Sort(acc)
		slices.Sort(rej)
		if got, want := func() int { n, _ := oracle.MaxInWindow(acc, nil, w); return int(n) }(), bruteMax(acc, w); got != want {
			t.Fatalf("run %d: maxInWindow %d, definition %d (w %v, %v)", run, got, want, w, acc)
		}
		if got, want := oracle.FalseRejections(acc, rej, w, int64(limit)), bruteFalse(acc, rej, w, limit); got != want {
			t.Fatalf("run %d: falseRejections %d, definition %d", run, got, want)
		}
	}
}

// TestAnalyse builds a log by hand: three keys, records out of order (the
// workers finish in any order), other statuses, unsent records.
func TestAnalyse(t *testing.T) {
	ms := func(m int64) time.Duration { return time.Duration(m) * time.Millisecond }
	recs := []record{
		// key 0: limit 2 per 1 s, 3 accepted inside one second (1.5x), no false rejection.
		{sent: ms(10), key: 0, status: 200},
		{sent: ms(900), key: 0, status: 200},
		{sent: ms(0), key: 0, status: 200},
		{sent: ms(950), key: 0, status: 429},
		// key 1: a false rejection at 1500 (only 1 accepted in (500, 1500]) and a fair one at 1600.
		{sent: ms(0), key: 1, status: 200},
		{sent: ms(1400), key: 1, status: 200},
		{sent: ms(1500), key: 1, status: 429},
		{sent: ms(1550), key: 1, status: 200},
		{sent: ms(1600), key: 1, status: 429},
		{sent: ms(1700), key: 1, status: StatusError},
		{sent: ms(1800), key: 1, status: 503},
		// key 2: only unsent (Ctrl-C) and one error: requests 1, nothing accepted.
		{sent: 0, key: 2, status: StatusNotSent},
		{sent: ms(5), key: 2, status: StatusError},
		{sent: 0, key: 3, status: StatusNotSent},
	}
	a := analyse(recs, time.Second, 2, 10, func(k int32) string { return fmt.Sprintf("key-%d", k) })
	if a.Keys != 3 || a.MaxInWindow != 3 || a.MaxKey != "key-0" || a.MaxRatio != 1.5 || a.KeysOverLimit != 1 || a.KeysOver1_1 != 1 ||
		a.FalseRejections != 1 || a.KeysWithFalseRejections != 1 {
		t.Errorf("summary %+v", a)
	}
	want := []KeyStats{
		{Key: "key-0", Requests: 4, Accepted: 3, Rejected: 1, MaxInWindow: 3, MaxWindowAtMs: 0, Ratio: 1.5},
		{Key: "key-1", Requests: 7, Accepted: 3, Rejected: 2, Other: 2, MaxInWindow: 2, MaxWindowAtMs: 1400, Ratio: 1, FalseRejections: 1},
		{Key: "key-2", Requests: 1, Other: 1},
	}
	if !slices.Equal(a.Worst, want) {
		t.Errorf("worst:\n got %+v\nwant %+v", a.Worst, want)
	}
	if len(a.MostFalseRejections) != 1 || a.MostFalseRejections[0].Key != "key-1" {
		t.Errorf("most false rejections: %+v", a.MostFalseRejections)
	}
	// --worst bounds both lists.
	if a := analyse(recs, time.Second, 2, 1, func(k int32) string { return fmt.Sprint(k) }); len(a.Worst) != 1 || a.Worst[0].Key != "0" {
		t.Errorf("worst 1: %+v", a.Worst)
	}
	// Empty log.
	if a := analyse(nil, time.Second, 2, 10, func(int32) string { return "" }); a.Keys != 0 || a.Worst == nil || a.MostFalseRejections == nil {
		t.Errorf("empty: %+v (lists must be empty, not null, in JSON)", a)
	}
}

func TestRecordLog(t *testing.T) {
	for _, tt := range []struct{ max, next, want int }{
		{10, 5, 5}, {10, 20, 10}, {logChunk + 3, logChunk + 10, logChunk + 3}, {3 * logChunk, 2*logChunk + 1, 2*logChunk + 1},
	} {
		l := &recordLog{max: tt.max}
		got := 0
		for i := range tt.next {
			if r := l.next(); r != nil {
				r.key = int32(i)
				got++
			}
		}
		recs := l.records()
		if got != tt.want || len(recs) != tt.want {
			t.Errorf("%+v: %d handed out, %d records", tt, got, len(recs))
		}
		for i, r := range recs {
			if r.key != int32(i) {
				t.Fatalf("%+v: record %d holds %d", tt, i, r.key)
			}
		}
	}
}
