package counter

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1_800_000_000_000)

func at(ms int64) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func newCounter(t testing.TB, cfg Config) *Counter {
	t.Helper()
	c, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func mustLimit(t testing.TB, c *Counter, name string, max int64, w time.Duration, k int) Limit {
	t.Helper()
	l, err := c.Limit(name, max, w, k)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestSteps steps one key through fixed instants and checks every field.
func TestSteps(t *testing.T) {
	type step struct {
		ms        int64
		hits      int64
		allowed   bool
		count     int64
		remaining int64
		retry     time.Duration
		reset     time.Duration
	}
	tests := []struct {
		name  string
		limit int64
		w     time.Duration
		k     int
		steps []step
	}{
		{"fill, deny, exact retry", 3, 10 * time.Second, 10, []step{
			{0, 1, true, 0, 2, 0, 10 * time.Second},
			{1000, 1, true, 1, 1, 0, 10 * time.Second},
			{2500, 1, true, 2, 0, 0, 10 * time.Second},
			{3000, 1, false, 3, 0, 7 * time.Second, 9500 * time.Millisecond},
			{9999, 1, false, 3, 0, 1 * time.Millisecond, 2501 * time.Millisecond},
			{10000, 1, true, 2, 0, 0, 10 * time.Second},
		}},
		{"multi-hit needs several slices to leave", 5, time.Second, 4, []step{
			{0, 2, true, 0, 3, 0, time.Second},
			{300, 2, true, 2, 1, 0, time.Second},
			{600, 1, true, 4, 0, 0, time.Second},
			{700, 3, false, 5, 0, 600 * time.Millisecond, 900 * time.Millisecond},
			{1300, 3, true, 1, 1, 0, time.Second}, // slices at 0 and 300 have left
		}},
		{"hits above what remains but within limit", 10, time.Second, 1, []step{
			{0, 9, true, 0, 1, 0, time.Second},
			{1, 2, false, 9, 1, 999 * time.Millisecond, 999 * time.Millisecond},
			{1000, 10, true, 0, 0, 0, time.Second},
		}},
		{"empty window forgets", 1, time.Second, 1, []step{
			{0, 1, true, 0, 0, 0, time.Second},
			{500, 1, false, 1, 0, 500 * time.Millisecond, 500 * time.Millisecond},
			{5000, 1, true, 0, 0, 0, time.Second},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCounter(t, DefaultConfig())
			l := mustLimit(t, c, "x", tt.limit, tt.w, tt.k)
			var res [1]Result
			for i, s := range tt.steps {
				d, err := c.Allow(at(s.ms), "key", s.hits, []Limit{l}, res[:])
				if err != nil {
					t.Fatalf("step %d: %v", i, err)
				}
				r := res[0]
				got := step{s.ms, s.hits, d.Allowed, r.Count, r.Remaining, r.RetryAfter, r.Reset}
				if got != s {
					t.Errorf("step %d at t0+%dms:\n got %+v\nwant %+v", i, s.ms, got, s)
				}
				if d.RetryAfter != r.RetryAfter || r.Allowed != d.Allowed || r.Limit != tt.limit {
					t.Errorf("step %d: decision %+v inconsistent with result %+v", i, d, r)
				}
			}
		})
	}
}

func TestMultiLimitCountsOnlyWhenAllHaveRoom(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	perSec := mustLimit(t, c, "api", 2, time.Second, 1)
	perMin := mustLimit(t, c, "api", 3, time.Minute, 12)
	both := []Limit{perSec, perMin}
	var res [2]Result
	steps := []struct {
		ms      int64
		allowed bool
		secN    int64 // count in the 1 s limit before the call
		minN    int64 // count in the 60 s limit before the call
	}{
		{0, true, 0, 0},
		{10, true, 1, 1},
		{20, false, 2, 2},   // per-second full: per-minute must not be charged
		{30, false, 2, 2},   // still 2 in the minute: the denials counted nothing
		{1000, true, 1, 2},  // the request at 0 left the 1 s window
		{1010, false, 1, 3}, // per-minute full now
	}
	for i, s := range steps {
		d, err := c.Allow(at(s.ms), "k", 1, both, res[:])
		if err != nil {
			t.Fatal(err)
		}
		if d.Allowed != s.allowed || res[0].Count != s.secN || res[1].Count != s.minN {
			t.Errorf("step %d at %dms: allowed=%v counts=(%d,%d), want %v (%d,%d)",
				i, s.ms, d.Allowed, res[0].Count, res[1].Count, s.allowed, s.secN, s.minN)
		}
	}
	if res[0].Allowed != true || res[1].Allowed != false {
		t.Errorf("per-limit Allowed = %v,%v; want true,false", res[0].Allowed, res[1].Allowed)
	}
}

func TestErrors(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "x", 5, time.Second, 1)
	var res [MaxLimitsPerCall + 1]Result
	many := make([]Limit, MaxLimitsPerCall+1)
	for i := range many {
		many[i] = l
	}
	tests := []struct {
		name   string
		hits   int64
		limits []Limit
		want   error
	}{
		{"zero hits", 0, []Limit{l}, ErrInvalidHits},
		{"negative hits", -1, []Limit{l}, ErrInvalidHits},
		{"hits over limit", 6, []Limit{l}, ErrInvalidHits},
		{"too many limits", 1, many, ErrTooManyLimits},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := c.Allow(t0, "k", tt.hits, tt.limits, res[:]); !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if n := c.Stats().Keys; n != 0 {
				t.Fatalf("an invalid call tracked %d keys", n)
			}
		})
	}
}

func TestLimitValidation(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	bad := []struct {
		max int64
		w   time.Duration
		k   int
	}{
		{0, time.Second, 1}, {MaxLimit + 1, time.Second, 1}, {1, 0, 1},
		{1, MaxWindow + time.Millisecond, 1}, {1, 1500 * time.Microsecond, 1},
		{1, time.Second, 0}, {1, time.Second, MaxSlices + 1}, {1, 10 * time.Millisecond, 11},
	}
	for _, b := range bad {
		if _, err := c.Limit("x", b.max, b.w, b.k); !errors.Is(err, ErrInvalidLimit) {
			t.Errorf("Limit(%d, %v, %d) err = %v, want ErrInvalidLimit", b.max, b.w, b.k, err)
		}
	}
	a := mustLimit(t, c, "x", 10, time.Minute, 12)
	b := mustLimit(t, c, "x", 20, time.Minute, 12) // same identity, new max: shares counts
	d := mustLimit(t, c, "x", 10, time.Minute, 6)  // other shape: own counts
	if a.slot != b.slot || a.slot == d.slot {
		t.Fatalf("slots a=%d b=%d d=%d: want a==b!=d", a.slot, b.slot, d.slot)
	}
}

func TestConfigValidate(t *testing.T) {
	for _, cfg := range []Config{
		{Shards: 3, MaxKeys: 1, Tolerance: 0.1},
		{Shards: 0, MaxKeys: 1, Tolerance: 0.1},
		{Shards: 1, MaxKeys: 0, Tolerance: 0.1},
		{Shards: 1, MaxKeys: 1, Tolerance: -0.1},
		{Shards: 1, MaxKeys: 1, Tolerance: 1.5},
	} {
		if err := cfg.Validate(); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%+v: err = %v, want ErrInvalidConfig", cfg, err)
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestKeyCap fills a one-shard counter to its cap and checks that a new key
// is allowed uncounted (never rejected), that tracked keys keep their exact
// windows, and that room frees up once windows empty.
func TestKeyCap(t *testing.T) {
	c := newCounter(t, Config{Shards: 1, MaxKeys: 2, Tolerance: 0.1})
	l := mustLimit(t, c, "x", 1, time.Second, 1)
	var res [1]Result
	allow := func(ms int64, key string) Decision {
		t.Helper()
		d, err := c.Allow(at(ms), key, 1, []Limit{l}, res[:])
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	allow(0, "a")
	allow(0, "b")
	for i := range 3 {
		if d := allow(10, "c"); !d.Allowed || !d.Untracked {
			t.Fatalf("call %d for a key over the cap: %+v, want allowed and untracked", i, d)
		}
	}
	if d := allow(20, "a"); d.Allowed {
		t.Fatal("a tracked key lost its count when the cap bit")
	}
	if got := c.Stats(); got.Keys != 2 || got.Untracked != 3 {
		t.Fatalf("stats %+v, want 2 keys and 3 untracked", got)
	}
	// At 1010 a and b have expired and a second has passed since the last
	// inline sweep (at 10): the sweep makes room for c.
	if d := allow(1010, "c"); !d.Allowed || d.Untracked {
		t.Fatalf("after expiry: %+v, want allowed and tracked", d)
	}
	if d := allow(1011, "c"); d.Allowed {
		t.Fatal("c is tracked now and must be limited")
	}
}

func TestSweep(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	short := mustLimit(t, c, "s", 5, time.Second, 1)
	long := mustLimit(t, c, "l", 5, time.Minute, 12)
	var res [1]Result
	for i := range 100 {
		key := fmt.Sprint("k", i)
		lim := short
		if i%4 == 0 {
			lim = long
		}
		if _, err := c.Allow(t0, key, 1, []Limit{lim}, res[:]); err != nil {
			t.Fatal(err)
		}
	}
	if got := c.Sweep(at(999)); got != 0 {
		t.Fatalf("Sweep before expiry removed %d", got)
	}
	if got := c.Sweep(at(1000)); got != 75 {
		t.Fatalf("Sweep at 1 s removed %d, want 75 (the 1 s keys)", got)
	}
	if got := c.Stats().Keys; got != 25 {
		t.Fatalf("%d keys left, want 25", got)
	}
	if got := c.Sweep(at(60_000)); got != 25 || c.Stats().Keys != 0 {
		t.Fatalf("Sweep at 60 s removed %d, left %d", got, c.Stats().Keys)
	}
}

// TestConcurrentExact hammers a few keys from many goroutines at one fixed
// instant: exactly the limit must be accepted per key, no more, no less.
func TestConcurrentExact(t *testing.T) {
	c := newCounter(t, Config{Shards: 4, MaxKeys: 1000, Tolerance: 0.1})
	l := mustLimit(t, c, "x", 500, time.Minute, 12)
	keys := []string{"a", "b", "c"}
	var mu sync.Mutex
	accepted := map[string]int{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res [1]Result
			local := map[string]int{}
			for i := range 300 {
				key := keys[(g+i)%len(keys)]
				d, err := c.Allow(t0, key, 1, []Limit{l}, res[:])
				if err != nil {
					t.Error(err)
					return
				}
				if d.Allowed {
					local[key]++
				}
			}
			mu.Lock()
			for k, n := range local {
				accepted[k] += n
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, k := range keys {
		if accepted[k] != 500 {
			t.Errorf("key %s: %d accepted, want exactly 500", k, accepted[k])
		}
	}
}

// TestOutOfOrderCallsStayMonotone feeds a call older than the key's newest
// slice; it must be judged as of that slice's start, never over-counting.
func TestOutOfOrderCallsStayMonotone(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "x", 2, time.Second, 1)
	var res [1]Result
	for _, ms := range []int64{100, 50} {
		if d, _ := c.Allow(at(ms), "k", 1, []Limit{l}, res[:]); !d.Allowed {
			t.Fatalf("call at %d denied", ms)
		}
	}
	// Both were recorded at 100, so both leave the window at 1100, not 1050.
	if d, _ := c.Allow(at(1099), "k", 1, []Limit{l}, res[:]); d.Allowed || res[0].RetryAfter != time.Millisecond {
		t.Fatalf("at 1099: %+v %+v, want denied with 1ms retry", d, res[0])
	}
	if d, _ := c.Allow(at(1100), "k", 2, []Limit{l}, res[:]); !d.Allowed {
		t.Fatal("at 1100 both slices should have left")
	}
}

func TestLongIdleKeyRebases(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	l := mustLimit(t, c, "x", 3, 30*24*time.Hour, 30)
	var res [1]Result
	// Keep a key busy for 100 days: offsets must never overflow.
	day := int64(24 * 3600 * 1000)
	for d := int64(0); d < 100; d++ {
		dec, err := c.Allow(at(d*day), "k", 1, []Limit{l}, res[:])
		if err != nil {
			t.Fatal(err)
		}
		// One request a day against 3 per 30 days: days 0-2, 30-32, 60-62, 90-92.
		if want := d%30 < 3; dec.Allowed != want {
			t.Fatalf("day %d: allowed=%v want %v (count %d)", d, dec.Allowed, want, res[0].Count)
		}
	}
}

// TestMaxKeysIsAHardCap: however the keys fall on the shards, no more than
// MaxKeys pairs are tracked (shares rounded up let 100,000 track 100,032),
// and a full counter tracks exactly MaxKeys.
func TestMaxKeysIsAHardCap(t *testing.T) {
	for _, maxKeys := range []int{100_000, 1000, 65, 10} {
		cfg := DefaultConfig()
		cfg.MaxKeys = maxKeys
		c := newCounter(t, cfg)
		l := mustLimit(t, c, "r", 10, time.Minute, 12)
		var res [1]Result
		for i := range 3 * maxKeys {
			c.Allow(at(0), fmt.Sprint("k", i), 1, []Limit{l}, res[:])
		}
		got := c.Stats().Keys
		if got > maxKeys {
			t.Errorf("MaxKeys %d: %d keys tracked", maxKeys, got)
		}
		// With three times as many keys as the cap and shares of 15 or
		// more, every shard fills (for tiny caps some shard may not).
		if maxKeys >= 1000 && got != maxKeys {
			t.Errorf("MaxKeys %d: %d keys tracked, want exactly the cap", maxKeys, got)
		}
	}
}
