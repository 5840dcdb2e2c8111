package cluster

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/promtest"
)

// TestSkewedNodeOverMemberlist: real nodes, one of whose clocks is
// shifted (Config.Now, as -test-clock-offset does). Beyond MaxClockOffset
// the peer is alive and its offset shown, but its requests are not
// counted here; within it they are.
func TestSkewedNodeOverMemberlist(t *testing.T) {
	for _, tc := range []struct {
		off    time.Duration
		merged bool
	}{
		{2 * time.Second, false},
		{200 * time.Millisecond, true},
	} {
		t.Run(fmt.Sprint(tc.off), func(t *testing.T) {
			n1 := startNode(t, "n1", nodeOpts{})
			n2 := startNode(t, "n2", nodeOpts{join: []string{n1.addr}, config: func(c *Config) {
				c.Now = func() time.Time { return time.Now().Add(tc.off) }
			}})
			waitAlive(t, 2, n1, n2)
			var res [1]counter.Result
			for range 3 {
				if d, err := n2.c.Allow(time.Now().Add(tc.off), "k", 1, []counter.Limit{n2.lim}, res[:]); err != nil || !d.Allowed {
					t.Fatalf("n2: %+v %v", d, err)
				}
			}
			if tc.merged {
				waitCounts(t, "k", 3, n1)
			} else {
				waitFor(t, "n1 to count n2's slice as skewed", func() bool {
					v, _ := promtest.MustGather(t, n1.reg).Value("limiterd_sync_entries_total", "result", "skewed")
					return v >= 1
				})
				if got := n1.peek("k"); got != 0 {
					t.Errorf("n1 counts %d of n2's requests, want none", got)
				}
				if v, _ := promtest.MustGather(t, n1.reg).Value("limiterd_sync_skewed_messages_total"); v < 1 {
					t.Errorf("limiterd_sync_skewed_messages_total %v", v)
				}
			}
			off, ok := promtest.MustGather(t, n1.reg).Value("limiterd_cluster_clock_offset_seconds", "peer", "n2")
			if d := time.Duration(off * float64(time.Second)); !ok || d < tc.off-50*time.Millisecond || d > tc.off+time.Second/4 {
				t.Errorf("n1 shows n2's clock offset %v (%v), want about %v", d, ok, tc.off)
			}
			if n1.stateOf("n2") != "alive" || n2.stateOf("n1") != "alive" {
				t.Errorf("states: n1 sees n2 %s, n2 sees n1 %s", n1.stateOf("n2"), n2.stateOf("n1"))
			}
		})
	}
}
