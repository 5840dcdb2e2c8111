package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
)

// nodesCall is one OnNodesChanged call: the count it was given, the
// counter's worst case for 10 per second at that moment, and the count the
// node's Status reported from inside the callback.
type nodesCall struct {
	alive  int
	worst  int64
	status int
}

// notifyingNode starts a node whose OnNodesChanged records its calls. It
// builds the node itself, unlike startNode, so that the callback can read
// the node's counter and the node from its first call on.
func notifyingNode(t *testing.T, name string, join []string) (*Node, func() []nodesCall, func()) {
	t.Helper()
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(name, 0, join)
	var (
		mu    sync.Mutex
		calls []nodesCall
		node  *Node
		ready = make(chan struct{})
	)
	cfg.OnNodesChanged = func(alive int) {
		<-ready // node is set
		// Status takes the node's lock: a deadlock here would hang the test.
		st := node.Status()
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, nodesCall{alive, c.WorstCase(10, time.Second), st.Nodes})
	}
	cc := counter.DefaultClusterConfig(name)
	cc.Coordinated = false // the budget's worst case, as the figures below derive
	cc.SyncInterval = testSyncInterval
	if err := c.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	node, err = newNode(cfg, c, prometheus.NewRegistry(), testLogger().With("test", t.Name()), hooks{tune: fastMemberlist})
	if err != nil {
		t.Fatal(err)
	}
	close(ready)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- node.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("%s: Run: %v", name, err)
			}
		})
	}
	t.Cleanup(stop)
	get := func() []nodesCall {
		mu.Lock()
		defer mu.Unlock()
		return append([]nodesCall(nil), calls...)
	}
	return node, get, stop
}

// OnNodesChanged is called once the counter counts the new number of
// nodes (its worst case already reflects it), without the node's lock
// held, on a join and on a leave, and never for the initial lone node.
func TestOnNodesChanged(t *testing.T) {
	a, callsA, _ := notifyingNode(t, "a", nil)
	_, callsB, stopB := notifyingNode(t, "b", []string{a.Addr()})

	// 10 per second at a 50 ms sync: f = ceil(10 × 62 ms / 1 s) = 1 and no
	// slice tail (floor(10 × 0.05 / 2) = 0), so 10 + 2·1 on two nodes;
	// 10 + floor(10 × 0.1) alone.
	two := nodesCall{alive: 2, worst: 12, status: 2}
	one := nodesCall{alive: 1, worst: 11, status: 1}
	for _, tc := range []struct {
		node  string
		calls func() []nodesCall
	}{{"a", callsA}, {"b", callsB}} {
		waitFor(t, tc.node+" to be told of two nodes", func() bool { return len(tc.calls()) > 0 })
		if got := tc.calls()[0]; got != two {
			t.Errorf("%s: first call %+v, want %+v", tc.node, got, two)
		}
	}

	stopB()
	waitFor(t, "a to be told b left", func() bool {
		c := callsA()
		return c[len(c)-1].alive == 1
	})
	if c := callsA(); c[len(c)-1] != one {
		t.Errorf("a: last call %+v, want %+v (all: %+v)", c[len(c)-1], one, c)
	}
}
