package counter

import (
	"fmt"
	"testing"
	"time"
)

// TestClockLeadJudgesTheWindowLater: with a clock lead (SetClockLead) a
// peer's slice leaves the window, for a check, a merge and a sweep alike,
// that much later; new requests are still counted at now. Limit 100 per
// 10 s: a peer's slice starting at 1,000 ms leaves at 11,000 ms without a
// lead.
func TestClockLeadJudgesTheWindowLater(t *testing.T) {
	for _, tc := range []struct {
		lead time.Duration
		at   int64 // when the key is checked and the slice merged
		kept bool  // the peer's slice still counts
	}{
		{0, 10_999, true},
		{0, 11_000, false},
		{200 * time.Millisecond, 11_000, true},
		{200 * time.Millisecond, 11_199, true},
		{200 * time.Millisecond, 11_200, false},
		{-time.Second, 11_000, false}, // taken as 0
	} {
		t.Run(fmt.Sprint(tc.lead, " at ", tc.at), func(t *testing.T) {
			peer := Entry{Key: "k", Origin: "peer", Start: at(1000).UnixMilli(), Count: 60}
			want := map[bool]int64{true: 60, false: 0}[tc.kept]
			// A slice merged before, then checked.
			n := newNode(t, "self", 2, false)
			n.c.SetClockLead(tc.lead)
			peer.Limit = n.lim.ID()
			n.c.Merge(at(1000), []Entry{peer})
			if got := n.count(t, tc.at, "k"); got != want {
				t.Errorf("checked: count %d, want %d", got, want)
			}
			// The same slice first heard of then.
			m := newNode(t, "self", 2, false)
			m.c.SetClockLead(tc.lead)
			if ms := m.c.Merge(at(tc.at), []Entry{peer}); (ms.Merged == 1) != tc.kept {
				t.Errorf("merged at %d: %+v, want merged %v", tc.at, ms, tc.kept)
			}
			if got := m.count(t, tc.at, "k"); got != want {
				t.Errorf("merged then: count %d, want %d", got, want)
			}
			// A sweep drops the key only once its window is empty.
			s := newNode(t, "self", 2, false)
			s.c.SetClockLead(tc.lead)
			s.c.Merge(at(1000), []Entry{peer})
			if got, want := s.c.Sweep(at(tc.at)), map[bool]int{true: 0, false: 1}[tc.kept]; got != want {
				t.Errorf("sweep dropped %d keys, want %d", got, want)
			}
		})
	}
}

// TestClockLeadCountsNewRequestsAtNow: a lead moves where the window
// ends, not where a request is counted: this node's own slices are
// stamped on its clock and sent as before.
func TestClockLeadCountsNewRequestsAtNow(t *testing.T) {
	n := newNode(t, "self", 2, false)
	n.c.SetClockLead(300 * time.Millisecond)
	if !n.allow(t, 5_000, "k") {
		t.Fatal("denied the first request")
	}
	es := n.c.AppendChanges(nil, at(5_100))
	if len(es) != 1 || es[0].Start != at(5_000).UnixMilli() || es[0].Count != 1 {
		t.Fatalf("changes %+v, want one slice at %d of 1", es, at(5_000).UnixMilli())
	}
}

// TestSetClockLeadBounds: negative is 0 and more than a minute a minute.
func TestSetClockLeadBounds(t *testing.T) {
	c := newCounter(t, DefaultConfig())
	for _, tc := range []struct{ set, want time.Duration }{
		{-time.Millisecond, 0},
		{0, 0},
		{250 * time.Millisecond, 250 * time.Millisecond},
		{250*time.Millisecond + 999*time.Microsecond, 250 * time.Millisecond},
		{time.Hour, maxClockLead},
	} {
		c.SetClockLead(tc.set)
		if got := c.ClockLead(); got != tc.want {
			t.Errorf("SetClockLead(%v): %v, want %v", tc.set, got, tc.want)
		}
	}
}
