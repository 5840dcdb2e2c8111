package counter

import (
	"strconv"
	"sync"
	"testing"
)

// TestMergeConcurrentBatches merges datagram-sized batches, each spread
// over many shards, from several peers at once while checks run: Merge
// locks a batch's shards together (merge.go), and neither a deadlock nor a
// lost entry may come of it. Every peer sends each key's slice with its
// count growing round by round, so each key ends with every peer's last
// count, whatever the interleaving.
func TestMergeConcurrentBatches(t *testing.T) {
	const peers, rounds, keys, batch = 4, 30, 400, 36
	n := newNode(t, "self", peers+1, false)
	var wg sync.WaitGroup
	for p := range peers {
		origin := "p" + strconv.Itoa(p)
		wg.Go(func() {
			es := make([]Entry, 0, batch)
			for r := range rounds {
				for k := range keys {
					es = append(es, Entry{Limit: n.lim.ID(), Key: "k" + strconv.Itoa(k), Origin: origin, Start: at(1000).UnixMilli() + int64(k%5), Count: uint32(r + 1)})
					if len(es) == batch || k == keys-1 {
						n.c.Merge(at(2000), es)
						es = es[:0]
					}
				}
			}
		})
	}
	wg.Go(func() {
		var res [1]Result
		for r := range rounds * 10 {
			// Counts nothing (hits = limit never fits once a peer merged).
			_, _ = n.c.Peek(at(2000), "k"+strconv.Itoa(r%keys), n.lim.max, []Limit{n.lim}, res[:])
		}
	})
	wg.Wait()
	for k := range keys {
		if got, want := n.count(t, 2000, "k"+strconv.Itoa(k)), int64(peers*rounds); got != want {
			t.Fatalf("key k%d counts %d, want %d (each of %d peers' last count, %d)", k, got, want, peers, rounds)
		}
	}
}
