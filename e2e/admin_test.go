package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// The admin listener of each node is on an ephemeral port, which its log
// names.

const adminRules = `rules:
  - name: default
    limit: 600
    window: 60s
  - name: hammer
    match: "h:*"
    limit: 100000
    window: 60s
`

// adminAnswer is the JSON of the admin API, GET's and DELETE's fields.
type adminAnswer struct {
	Rule        string            `json:"rule"`
	Node        string            `json:"node"`
	Coordinator string            `json:"coordinator"`
	Applied     []string          `json:"applied"`
	Refused     map[string]string `json:"refused"`
	Unconfirmed []string          `json:"unconfirmed"`
	Error       string            `json:"error"`
	Limits      []struct {
		Count     int64 `json:"count"`
		Remaining int64 `json:"remaining"`
	} `json:"limits"`
}

var adminListening = regexp.MustCompile(`msg="admin API listening" admin=(\S+)`)

// adminAddrs returns each node's admin listener, from its log.
func adminAddrs(t *testing.T, procs []*nodetest.Proc) []string {
	t.Helper()
	var addrs []string
	for _, p := range procs {
		m := adminListening.FindStringSubmatch(p.Stderr.String())
		if m == nil {
			t.Fatalf("%s logged no admin listener:\n%s", p.Name, p.Stderr.String())
		}
		addrs = append(addrs, m[1])
	}
	return addrs
}

// admin sends method to a node's admin API for key and decodes the answer.
func admin(t *testing.T, hc *http.Client, addr, method, key string) (int, adminAnswer) {
	t.Helper()
	code, body, err := adminRequest(hc, method, "http://"+addr+"/v1/keys?key="+url.QueryEscape(key))
	if err != nil {
		t.Fatalf("%s %s on %s: %v", method, key, addr, err)
	}
	var a adminAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatalf("%s %s on %s: %d %s: %v", method, key, addr, code, body, err)
	}
	return code, a
}

// adminRequest sends method to u and reads the answer.
func adminRequest(hc *http.Client, method, u string) (int, []byte, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// TestAdminInspectAndReset runs the admin API on 3 real processes.
// Inspecting shows every node the same counts and changes none. A key
// hammered over all three nodes while it is reset ends up, on every node,
// counting the same number: no more than the checks answered after the
// reset was asked (nothing from before came back, nothing was counted
// twice), and no fewer than those sent after it was answered (the answer
// says every node had applied it, and each counts its later requests).
func TestAdminInspectAndReset(t *testing.T) {
	c := nodetest.Start(t, nodetest.Config{Nodes: 3, Rules: []string{adminRules}, Args: []string{"-admin-addr", "127.0.0.1:0", "-log-level", "info"}})
	addrs := adminAddrs(t, c.Procs)
	names := []string{c.Procs[0].Name, c.Procs[1].Name, c.Procs[2].Name}

	// Inspect: 30 checks over the nodes, seen by all, counted once.
	for i := range 30 {
		c.Procs[i%3].Check(t, "client-1")
	}
	var coord string
	for i, addr := range addrs {
		nodetest.Eventually(t, names[i]+" counts the 30", 20*time.Second, func() bool {
			_, a := admin(t, c.HTTP, addr, "GET", "client-1")
			return len(a.Limits) == 1 && a.Limits[0].Count == 30
		})
		code, a := admin(t, c.HTTP, addr, "GET", "client-1")
		if code != 200 || a.Rule != "default" || a.Node != names[i] || a.Limits[0].Remaining != 570 || !slices.Contains(names, a.Coordinator) || coord != "" && a.Coordinator != coord {
			t.Fatalf("GET on %s = %d %+v", names[i], code, a)
		}
		coord = a.Coordinator
	}
	if _, r := c.Procs[0].Check(t, "client-1"); r.Remaining != 569 {
		t.Fatalf("the check after the inspections leaves %d, want 569: an inspection counted", r.Remaining)
	}

	// Bad input: /check's words, and no admin API on the /check listener.
	code, a := admin(t, c.HTTP, addrs[0], "GET", "")
	_, body, _ := c.Procs[0].Get("/check?key=")
	if code != 400 || a.Error != "key is empty" || string(body) != `{"error":"key is empty"}`+"\n" {
		t.Fatalf("empty key: admin %d %q, /check %s", code, a.Error, body)
	}
	if code, _, _ := c.Procs[0].Get("/v1/keys?key=client-1"); code != 404 {
		t.Fatalf("the admin API on the /check listener: %d", code)
	}

	// A key hammered over the three nodes, reset from node 0 meanwhile.
	type checked struct {
		sent, answered time.Time
		ok             bool // answered 200: counted
	}
	var (
		mu     sync.Mutex
		checks []checked
		stop   atomic.Bool
		wg     sync.WaitGroup
	)
	for g := range 6 {
		p := c.Procs[g%3]
		wg.Go(func() {
			for !stop.Load() {
				sent := time.Now()
				code, _, err := p.Get("/check?key=h:race")
				mu.Lock()
				checks = append(checks, checked{sent, time.Now(), err == nil && code == 200})
				mu.Unlock()
				if err == nil && code != 200 {
					t.Errorf("check on %s: %d", p.Name, code)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond) // some hammering before the reset
	resetSent := time.Now()
	code, rep := admin(t, c.HTTP, addrs[0], "DELETE", "h:race")
	resetAnswered := time.Now()
	time.Sleep(500 * time.Millisecond) // and some after it
	stop.Store(true)
	wg.Wait()
	if code != 200 || rep.Rule != "hammer" || !slices.Equal(rep.Applied, names) || len(rep.Unconfirmed)+len(rep.Refused) != 0 {
		t.Fatalf("DELETE = %d %+v, want applied by every node", code, rep)
	}

	// At most: the checks that may have been counted after the reset
	// began, a failed one included (it may have been counted). At least:
	// those sent after it was answered.
	var upper, lower, before int64
	for _, ch := range checks {
		switch {
		case ch.answered.Before(resetSent) && ch.ok:
			before++
		case ch.answered.After(resetSent):
			upper++
			if ch.ok && ch.sent.After(resetAnswered) {
				lower++
			}
		}
	}
	if before == 0 || lower == 0 {
		t.Fatalf("%d checks before the reset, %d after it: the race did not happen", before, lower)
	}
	// Once synced: the three agree, and stay so over more than a sync
	// interval, the hammer being stopped.
	counts := func() []int64 {
		var out []int64
		for _, addr := range addrs {
			_, a := admin(t, c.HTTP, addr, "GET", "h:race")
			out = append(out, a.Limits[0].Count)
		}
		return out
	}
	var got []int64
	nodetest.Eventually(t, "the nodes to agree on h:race", 20*time.Second, func() bool {
		first := counts()
		time.Sleep(300 * time.Millisecond)
		got = counts()
		return slices.Equal(first, got) && got[0] == got[1] && got[1] == got[2]
	})
	if got[0] > upper || got[0] < lower {
		t.Fatalf("after the reset every node counts %d; checks answered after it began %d, sent after it was answered %d (%d answered before it)", got[0], upper, lower, before)
	}
	t.Logf("%d checks answered before the reset, %d after it began (%d sent after its answer); every node counts %d", before, upper, lower, got[0])
	if code, a := admin(t, c.HTTP, addrs[1], "GET", "h:race"); code != 200 || a.Coordinator != rep.Coordinator {
		t.Fatalf("GET = %d %+v: the coordinator is not the reset's %s", code, a, rep.Coordinator)
	}
}
