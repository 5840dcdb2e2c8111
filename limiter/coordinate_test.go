package limiter

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestCompleteAtTheMargin steps a check that Check leaves to the key's
// coordinator through its three endings: granted (counted here), denied
// (remembered, nothing remains), and no answer (the budget decides).
func TestCompleteAtTheMargin(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	node := func(name string) (*counter.Counter, *Limiter) { return coordinatedNode(t, name) }
	_, la := node("a")
	ck, _ := node("k")
	req := Request{Key: "x", Hits: 1}
	ask := func(at time.Time, id uint64) Answer {
		t.Helper()
		var d Decision
		if err := la.Check(at, req, &d); err != nil || !d.Coordinate || d.Allowed {
			t.Fatalf("Check: %+v %v, want Coordinate", d, err)
		}
		var a counter.Ask
		if err := la.PrepareAsk(at, req, &a); err != nil {
			t.Fatal(err)
		}
		res := make([]counter.Result, len(a.Limits))
		kd, err := ck.Coordinate(at, "a", id, &a, res)
		if err != nil {
			t.Fatal(err)
		}
		return Answer{Answered: true, Allowed: kd.Allowed, Results: res}
	}
	for i := range 10 {
		var d Decision
		if err := la.Complete(t0, req, ask(t0, uint64(i)), &d); err != nil {
			t.Fatal(err)
		}
		if !d.Allowed || d.Decided != DecidedByCoordinator || d.Limits[0].Remaining != int64(9-i) {
			t.Fatalf("grant %d: %+v", i, d)
		}
	}
	// The 11th: a's own view is full now (it counted the grants), so a
	// denies alone, exactly, without asking.
	var d Decision
	if err := la.Check(t0, req, &d); err != nil || d.Allowed || d.Coordinate || d.Limits[0].Remaining != 0 {
		t.Fatalf("11th: %+v %v", d, err)
	}
	// No answer in time, 1 s later (an empty window): the budget decides,
	// and the answer says so.
	t1 := t0.Add(time.Second)
	if err := la.Check(t1, req, &d); err != nil || !d.Coordinate {
		t.Fatalf("Check at t1: %+v %v", d, err)
	}
	if err := la.Complete(t1, req, Answer{}, &d); err != nil || !d.Allowed || d.Decided != DecidedInFallback {
		t.Fatalf("fallback: %+v %v", d, err)
	}
	// A denial from the coordinator reports nothing remaining.
	full := []counter.Result{{Allowed: false, Limit: 10, Count: 10, Remaining: 0, RetryAfter: 300 * time.Millisecond, Reset: time.Second}}
	if err := la.Complete(t1, req, Answer{Answered: true, Results: full}, &d); err != nil || d.Allowed || d.Limits[0].Remaining != 0 || d.RetryAfter != 300*time.Millisecond {
		t.Fatalf("denied: %+v %v", d, err)
	}
	// ... and is remembered: the next check denies here until the wait is over.
	if err := la.Check(t1.Add(100*time.Millisecond), req, &d); err != nil || d.Allowed || d.Coordinate || d.RetryAfter != 200*time.Millisecond {
		t.Fatalf("remembered: %+v %v", d, err)
	}
}

// coordinatedNode is a limiter of 10 per second on node name of a
// coordinated 2-node cluster: no blind share, every check asks.
func coordinatedNode(t *testing.T, name string) (*counter.Counter, *Limiter) {
	t.Helper()
	return clusterNode(t, name, 2, "rules:\n  - name: default\n    limit: 10\n    window: 1s\n")
}

// clusterNode is one coordinated node of a cluster of nodes, with rules.
func clusterNode(t *testing.T, name string, nodes int, rules string) (*counter.Counter, *Limiter) {
	t.Helper()
	c := newCounter(t)
	cc := counter.DefaultClusterConfig(name)
	cc.Nodes = nodes
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	l, err := New(c, mustParse(t, rules))
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// TestCompleteTakesTheLease: a coordinator's answer that lends a lease
// (counter.Result.Lease) leaves the asker deciding the next checks of the
// key alone, without asking, until the lease is used up for this sync interval.
func TestCompleteTakesTheLease(t *testing.T) {
	t0 := time.UnixMilli(1_800_000_000_000)
	mk := func(name string) (*counter.Counter, *Limiter) {
		return clusterNode(t, name, 8, "rules:\n  - name: default\n    limit: 600\n    window: 60s\n")
	}
	ca, la := mk("a")
	ck, _ := mk("k")
	req := Request{Key: "x", Hits: 1}
	local, asked, leased := 0, 0, 0
	for i := range 100 {
		var d Decision
		if err := la.Check(t0, req, &d); err != nil {
			t.Fatal(err)
		}
		if !d.Coordinate {
			if !d.Allowed {
				t.Fatalf("check %d denied alone: %+v", i, d)
			}
			local++
			if d.Decided == DecidedOnLease {
				leased++
			}
			continue
		}
		asked++
		var a counter.Ask
		if err := la.PrepareAsk(t0, req, &a); err != nil {
			t.Fatal(err)
		}
		res := make([]counter.Result, len(a.Limits))
		kd, err := ck.Coordinate(t0, "a", uint64(i+1), &a, res)
		if err != nil || !kd.Allowed || res[0].Lease == 0 {
			t.Fatalf("check %d: coordinator %+v %+v %v, want a grant with a lease", i, kd, res, err)
		}
		if err := la.Complete(t0, req, Answer{Answered: true, Allowed: true, Results: res}, &d); err != nil || !d.Allowed {
			t.Fatalf("check %d: Complete %+v %v", i, d, err)
		}
	}
	// 100 checks at one instant: the blind share, then a lease per ask.
	if sh := ca.Shares(600); asked > 100/int(sh.Leases)+2 {
		t.Errorf("%d of 100 checks asked, %d alone; a lease of up to %d should leave at most %d asking", asked, local, sh.Leases, 100/int(sh.Leases)+2)
	}
	// All but the blind share's are decided on a lease, and say so.
	if sh := ca.Shares(600); leased != local-int(sh.Blind) {
		t.Errorf("%d of the %d checks decided alone were on a lease, want all but the blind share's %d", leased, local, sh.Blind)
	}
}
