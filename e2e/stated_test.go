package e2e

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// TestStatedLimitOverHTTP: on a real cluster of three processes, a limit
// the caller states on /check (limit and window) is kept cluster-wide
// like a rule's: the first limit checks, spread over the nodes, all pass,
// and a further burst leaves at most 1.1 x the limit admitted in the
// window; the checks at the margin went to the key's coordinator, which
// never saw a rule of that window (the ask carries the limit).
func TestStatedLimitOverHTTP(t *testing.T) {
	const n, limit = 3, 200
	c := nodetest.Start(t, nodetest.Config{Nodes: n, Rules: []string{rulesCoordinated}, Args: []string{"-coordinator-deadline", "200ms"}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members alive", 30*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == n
		})
	}
	query := "key=stated-client&limit=200&window=45s"
	r := burstQuery(t, c.Procs, query, limit)
	if r.allowed.Load() != limit {
		t.Fatalf("%d compliant checks over %d nodes: %d allowed, %d denied (%v checks fell back)", limit, n, r.allowed.Load(), r.denied.Load(), fallbacksOf(t, c.Procs))
	}
	more := burstQuery(t, c.Procs, query, limit)
	if total := limit + more.allowed.Load(); float64(total) > 1.1*limit {
		t.Fatalf("a further burst of %d over all nodes: %d accepted in all, more than 1.1 x %d", limit, total, limit)
	} else {
		t.Logf("a further burst of %d over %d nodes: %d more accepted (%d in the window)", limit, n, more.allowed.Load(), total)
	}
	code, body, err := c.Procs[0].Get("/check?" + query)
	if err != nil || code != http.StatusTooManyRequests || !strings.Contains(string(body), `"rule":"override"`) || !strings.Contains(string(body), `"limit":200`) {
		t.Fatalf("after the bursts: %d %s %v, want 429 of the stated limit", code, body, err)
	}
	var asked float64
	for _, p := range c.Procs {
		asked += p.Metric(t, "limiterd_coordinated_checks_total", "result", "granted") + p.Metric(t, "limiterd_coordinated_checks_total", "result", "denied")
	}
	if asked == 0 {
		t.Fatal("no check went to the coordinator: the stated limit was decided alone")
	}
	t.Logf("%v checks decided by the key's coordinator, %v fell back", asked, fallbacksOf(t, c.Procs))
}
