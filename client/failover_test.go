package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// margin is the coarse sanity bound on how late a Check that hit its
// deadline may return: generous, so that a loaded machine does not fail
// the test, and still far below "waited for the slow node".
const margin = 5 * time.Second

// TestFailoverAndBackoff: the first node fails, the second answers; the
// first is skipped while it backs off, even once it is up again, and asked
// again after the back-off, alone.
func TestFailoverAndBackoff(t *testing.T) {
	a, b := newStub(t, "a"), newStub(t, "b")
	clk := newClock()
	c := newClient(t, Config{Backoff: 10 * time.Second, Now: clk.Now, Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second}, a.srv.URL, b.srv.URL)
	key := keyFirstAt(t, c, 0)
	a.answer(http.StatusServiceUnavailable, nil, `{"error":"restarting"}`)

	steps := []struct {
		name     string
		before   func()
		wantRule string
		wantHits int64 // node a's requests so far
		wantOff  bool  // node a backing off afterwards
	}{
		{"a fails, b answers", nil, "b", 1, true},
		{"a is skipped", nil, "b", 1, true},
		{"a is up but still backing off", func() { a.answer(http.StatusOK, nil, `{"allowed":true,"rule":"a"}`) }, "b", 1, true},
		{"a's back-off is not over", func() { clk.Advance(9 * time.Second) }, "b", 1, true},
		{"a is asked again after its back-off", func() { clk.Advance(time.Second) }, "a", 2, false},
		{"a stays healthy", nil, "a", 3, false},
	}
	for _, s := range steps {
		if s.before != nil {
			s.before()
		}
		d, err := c.Check(context.Background(), Request{Key: key})
		if err != nil || d.Rule != s.wantRule {
			t.Fatalf("%s: Check = %+v, %v; want node %s's answer", s.name, d, err, s.wantRule)
		}
		if got := a.hits.Load(); got != s.wantHits {
			t.Errorf("%s: node a asked %d times, want %d", s.name, got, s.wantHits)
		}
		if backingOff(c, 0) != s.wantOff {
			t.Errorf("%s: node a backing off = %v, want %v", s.name, !s.wantOff, s.wantOff)
		}
	}
	if backingOff(c, 1) {
		t.Error("node b backed off")
	}
}

// TestFailover covers each way a node can fail: the call goes on to the
// next node, which answers.
func TestFailover(t *testing.T) {
	tests := []struct {
		name    string
		first   func(t *testing.T) string // the failing node's address
		backoff bool                      // is it backed off afterwards
	}{
		{"connection refused", func(t *testing.T) string { return deadAddr(t) }, true},
		{"slower than AttemptTimeout", func(t *testing.T) string { return slowNode(t).URL }, true},
		{"5xx", func(t *testing.T) string {
			s := newStub(t, "a")
			s.answer(http.StatusBadGateway, nil, "")
			return s.srv.URL
		}, true},
		{"internal error, not backed off: the key may be the cause", func(t *testing.T) string {
			s := newStub(t, "a")
			s.answer(http.StatusOK, http.Header{"X-Ratelimit-Error": {"internal"}}, `{"allowed":true,"rule":""}`)
			return s.srv.URL
		}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newStub(t, "b")
			c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 100 * time.Millisecond}, tt.first(t), b.srv.URL)
			d, err := c.Check(context.Background(), Request{Key: keyFirstAt(t, c, 0)})
			if err != nil || d.Rule != "b" || d.FailedOpen {
				t.Fatalf("Check = %+v, %v; want node b's answer", d, err)
			}
			if backingOff(c, 0) != tt.backoff {
				t.Errorf("first node backing off = %v, want %v", !tt.backoff, tt.backoff)
			}
		})
	}
}

// TestFailOpen: when no node decides, Check returns within its deadline
// the fallback decision and an error that says why, and never the key.
func TestFailOpen(t *testing.T) {
	const timeout = 300 * time.Millisecond
	const key = "secret-api-key-42"
	tests := []struct {
		name       string
		addrs      func(t *testing.T) []string
		failClosed bool
		cause      error // wrapped by the error, besides ErrUnavailable
		backoff    bool  // node 0 is backed off afterwards
	}{
		{"dead node", func(t *testing.T) []string { return []string{deadAddr(t)} }, false, syscall.ECONNREFUSED, true},
		{"dead node, fail closed", func(t *testing.T) []string { return []string{deadAddr(t)} }, true, syscall.ECONNREFUSED, true},
		{"slow node", func(t *testing.T) []string { return []string{slowNode(t).URL} }, false, context.DeadlineExceeded, true},
		{"slow node, fail closed", func(t *testing.T) []string { return []string{slowNode(t).URL} }, true, context.DeadlineExceeded, true},
		// Whichever is asked first, the slow one uses up the deadline.
		{"dead and slow", func(t *testing.T) []string { return []string{deadAddr(t), slowNode(t).URL} }, false, context.DeadlineExceeded, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newClient(t, Config{Timeout: timeout, AttemptTimeout: timeout, FailClosed: tt.failClosed}, tt.addrs(t)...)
			start := time.Now()
			d, err := c.Check(context.Background(), Request{Key: key})
			if elapsed := time.Since(start); elapsed > timeout+margin {
				t.Errorf("Check took %v, deadline %v", elapsed, timeout)
			}
			if !errors.Is(err, ErrUnavailable) || !errors.Is(err, tt.cause) {
				t.Fatalf("error = %v; want ErrUnavailable and %v", err, tt.cause)
			}
			if strings.Contains(err.Error(), key) {
				t.Errorf("error %q contains the key", err)
			}
			want := Decision{Allowed: true, WouldAllow: true, FailedOpen: true}
			if tt.failClosed {
				want = Decision{}
			}
			if d.Allowed != want.Allowed || d.FailedOpen != want.FailedOpen || d.WouldAllow != want.WouldAllow || d.Headers != nil {
				t.Errorf("Decision = %+v, want %+v", d, want)
			}
			if tt.backoff && !backingOff(c, 0) {
				t.Error("the failed node is not backing off")
			}
		})
	}
}

// TestEveryNodeBackingOff: with every node backing off a Check asks no one
// and fails open at once.
func TestEveryNodeBackingOff(t *testing.T) {
	a := newStub(t, "a")
	a.answer(http.StatusInternalServerError, nil, "")
	c := newClient(t, Config{Now: newClock().Now}, a.srv.URL)
	if _, err := c.Check(context.Background(), Request{Key: "k"}); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("first Check: %v", err)
	}
	d, err := c.Check(context.Background(), Request{Key: "k"})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "every node is backing off") || !d.FailedOpen {
		t.Errorf("second Check = %+v, %v; want a fail-open saying every node is backing off", d, err)
	}
	if got := a.hits.Load(); got != 1 {
		t.Errorf("node asked %d times, want 1", got)
	}
}

// TestCallerGivesUp: a context that ends is not the node's fault: the node
// is not backed off, and a probe it interrupted is given back.
func TestCallerGivesUp(t *testing.T) {
	slow := slowNode(t)
	clk := newClock()
	c := newClient(t, Config{Timeout: 5 * time.Second, AttemptTimeout: 5 * time.Second, Now: clk.Now}, slow.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	d, err := c.Check(ctx, Request{Key: "k"})
	if !errors.Is(err, ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) || !d.FailedOpen {
		t.Fatalf("Check = %+v, %v; want a fail-open on the caller's deadline", d, err)
	}
	if backingOff(c, 0) {
		t.Error("the node was backed off for the caller's deadline")
	}

	// A probe that the caller interrupts leaves the node to the next Check.
	c.nodes[0].backOff(clk.Now(), time.Second)
	clk.Advance(time.Second)
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := c.Check(ctx2, Request{Key: "k"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Check with a cancelled context: %v", err)
	}
	if _, ok := c.nodes[0].claim(clk.Now(), time.Second); !ok {
		t.Error("the interrupted probe was not given back")
	}
}

// TestProbeIsExclusive: once a back-off is over, one caller gets the node
// and the others keep skipping it until that attempt is over.
func TestProbeIsExclusive(t *testing.T) {
	var n node
	t0 := newClock().Now()
	if _, ok := n.claim(t0, time.Second); !ok {
		t.Fatal("a healthy node cannot be claimed")
	}
	n.backOff(t0, time.Second)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{999 * time.Millisecond, false}, // backing off
		{time.Second, true},             // over: this one probes
		{time.Second, false},            // someone is probing
		{1999 * time.Millisecond, false},
	}
	for i, s := range steps {
		if _, ok := n.claim(t0.Add(s.at), time.Second); ok != s.want {
			t.Errorf("step %d: claim at +%v = %v, want %v", i, s.at, ok, s.want)
		}
	}
	n.healthy()
	if _, ok := n.claim(t0, time.Second); !ok {
		t.Error("a node that recovered cannot be claimed")
	}
}

// TestKeysSpreadOverNodes: the first node asked depends on the key, and is
// the same for the same key.
func TestKeysSpreadOverNodes(t *testing.T) {
	c := newClient(t, Config{}, "a:1", "b:1", "c:1")
	seen := map[int]bool{}
	for i := range 30 {
		k := "client-" + string(rune('a'+i))
		if c.first(k) != c.first(k) {
			t.Fatalf("key %q has no fixed first node", k)
		}
		seen[c.first(k)] = true
	}
	if len(seen) != 3 {
		t.Errorf("30 keys start at %d of 3 nodes", len(seen))
	}
}
