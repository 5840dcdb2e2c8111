package engine

import (
	"fmt"
	"testing"
)

// TestCoordinatorOf: the choice is the same whatever the order of the
// members, spreads keys evenly, and a departure moves only the departed
// member's keys.
func TestCoordinatorOf(t *testing.T) {
	members := []string{"n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7"}
	reversed := []string{"n7", "n6", "n5", "n4", "n3", "n2", "n1", "n0"}
	per := map[string]int{}
	const keys = 8000
	for i := range keys {
		k := fmt.Sprint("client-", i)
		c := CoordinatorOf(k, members)
		if r := CoordinatorOf(k, reversed); r != c {
			t.Fatalf("%s: %s or %s depending on order", k, c, r)
		}
		per[c]++
		if without := CoordinatorOf(k, members[:7]); c != "n7" && without != c {
			t.Fatalf("%s moved from %s to %s when n7 left", k, c, without)
		}
	}
	for m, n := range per {
		if n < keys/8*8/10 || n > keys/8*12/10 {
			t.Errorf("%s coordinates %d of %d keys, want about %d", m, n, keys, keys/8)
		}
	}
	if CoordinatorOf("k", nil) != "" {
		t.Fatal("no members: want none")
	}
}
