package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
)

func TestMergerOrderCopyAndDrain(t *testing.T) {
	m := newMerger()
	if m.offer([]byte("D0")) {
		t.Fatal("offer taken before run")
	}
	var mu sync.Mutex
	var got []string
	release := make(chan struct{})
	started := make(chan struct{})
	merge := func(b []byte) {
		mu.Lock()
		got = append(got, string(b))
		first := len(got) == 1
		mu.Unlock()
		if first {
			close(started)
			<-release // hold the merger while the queue fills
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.run(ctx, merge); close(done) }()
	// run is under way once an offer is taken.
	b := []byte("D1")
	for !m.offer(b) {
		time.Sleep(time.Millisecond)
	}
	b[1] = 'X' // offer copied it
	<-started
	var want []string
	want = append(want, "D1")
	for i := range mergeQueueLen {
		msg := fmt.Sprintf("D%d", i+2)
		if !m.offer([]byte(msg)) {
			t.Fatalf("offer %d of %d refused with room in the queue", i+1, mergeQueueLen)
		}
		want = append(want, msg)
	}
	if m.offer([]byte("over")) {
		t.Fatal("offer taken with the queue full")
	}
	if m.full.Load() != 1 {
		t.Fatalf("full = %d, want 1", m.full.Load())
	}
	cancel() // run must still merge everything it took
	close(release)
	<-done
	if !slices.Equal(got, want) {
		t.Fatalf("merged %d messages, want %d in order; first %q", len(got), len(want), got[:min(3, len(got))])
	}
	if m.offer([]byte("late")) {
		t.Fatal("offer taken after run returned")
	}
}

// TestSyncMessagesDoNotHoldBackTheRest: while the merger is busy, a sync
// message waits in its queue and NotifyMsg returns at once, and any other
// message is handled on NotifyMsg's goroutine.
func TestSyncMessagesDoNotHoldBackTheRest(t *testing.T) {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if err := c.SetCluster(counter.DefaultClusterConfig("a")); err != nil {
		t.Fatal(err)
	}
	n, err := newNode(testConfig("a", 0, nil), c, prometheus.NewRegistry(), testLogger(), hooks{tune: fastMemberlist})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = n.Close() })
	block := make(chan struct{})
	busy := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		n.merges.run(ctx, func(b []byte) {
			busy <- struct{}{}
			<-block
			n.receive(b)
		})
		close(done)
	}()
	t.Cleanup(func() { cancel(); close(block); <-done })
	received := func() uint64 { return n.engine.Stats.MessagesReceived.Load() }

	d := delegate{n}
	for !n.merges.offer([]byte{'D'}) { // a malformed delta, which the merger holds
		time.Sleep(time.Millisecond)
	}
	<-busy
	d.NotifyMsg([]byte{'S'}) // queued behind it
	if got := received(); got != 0 {
		t.Fatalf("the engine got %d messages while the merger was held", got)
	}
	for i, b := range [][]byte{{'A'}, {'x'}, nil} { // an ask's kind, garbage, nothing
		d.NotifyMsg(b)
		if got := received(); got != uint64(i+1) {
			t.Fatalf("after %q: the engine got %d messages, want %d at once", b, got, i+1)
		}
	}
}
