package cluster

import (
	"bytes"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestGossipKeyRotation rotates the gossip key of three nodes while they
// count (issue 9): add the new key, switch to it, drop the old one, each
// step on every node. Nothing counted is lost, every node stays a member,
// and at the end only the new key is in any keyring.
func TestGossipKeyRotation(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	nodes := startCluster(t, 3, nodeOpts{limit: 1_000_000, config: func(c *Config) { c.GossipKeys = [][]byte{k1} }})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	hits := make([]int, len(nodes))
	for i, tn := range nodes {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				var res [1]counter.Result
				if d, err := tn.c.Allow(time.Now(), "k", 1, []counter.Limit{tn.lim}, res[:]); err != nil || !d.Allowed {
					t.Errorf("%s: %+v %v", tn.name, d, err)
					return
				}
				hits[i]++
				time.Sleep(time.Millisecond)
			}
		})
	}
	for _, step := range [][][]byte{{k1, k2}, {k2, k1}, {k2}} {
		time.Sleep(300 * time.Millisecond) // counts flow between the steps
		for _, tn := range nodes {
			if err := tn.n.SetGossipKeys(step); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
	total := int64(0)
	for _, h := range hits {
		total += int64(h)
	}
	waitCounts(t, "k", total, nodes...)
	waitAlive(t, 3, nodes...)
	for _, tn := range nodes {
		if keys := tn.n.keyring.GetKeys(); len(keys) != 1 || !bytes.Equal(keys[0], k2) {
			t.Fatalf("%s: keyring %d keys after the rotation, want only the new one", tn.name, len(keys))
		}
		// Encrypted datagrams are memberlist's to open (deliverUsers).
		if n := tn.n.transport.users.Load(); n != 0 {
			t.Errorf("%s: %d encrypted datagrams taken past memberlist", tn.name, n)
		}
	}
	t.Logf("%d requests counted during the rotation, all of them on every node", total)
}
