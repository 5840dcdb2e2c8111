package e2e

import (
	"encoding/base64"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// TestForeignNodesCannotJoin starts a 2-node cluster with a gossip key and a
// label, then an intruder with another key and one with another label, each
// pointed at the cluster: neither becomes a member, and requests counted on
// them never reach the cluster's counts.
func TestForeignNodesCannotJoin(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	other := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210"))
	c := nodetest.Start(t, nodetest.Config{Nodes: 2, Rules: []string{rules100}, Args: []string{"-gossip-key", key, "-cluster-label", "prod"}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees 2 members", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == 2
		})
	}
	intruders := []struct {
		name string
		args []string
		join bool // the control: right key and label, so it must join
	}{
		{"wrong-key", []string{"-gossip-key", other, "-cluster-label", "prod"}, false},
		{"wrong-label", []string{"-gossip-key", key, "-cluster-label", "staging"}, false},
		{"no-key", []string{"-cluster-label", "prod"}, false},
		{"control-right-key-and-label", []string{"-gossip-key", key, "-cluster-label", "prod"}, true},
	}
	for _, in := range intruders {
		t.Run(in.name, func(t *testing.T) {
			p := &nodetest.Proc{Name: in.name}
			p.HTTP = "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
			p.Gossip = "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
			p.Args = append([]string{"-node-name", p.Name, "-http-addr", p.HTTP, "-bind-addr", p.Gossip,
				"-rules", c.Rules, "-log-level", "warn", "-join", c.Procs[0].Gossip}, in.args...)
			c.Procs = append(c.Procs, p)
			c.StartUnready(p)
			// It counts 50 requests for a key locally ...
			key := "intruded-" + in.name
			for range 50 {
				p.Check(t, key)
			}
			if in.join {
				// The control proves the checks below can fail.
				nodetest.Eventually(t, "the control joins and its counts arrive", 20*time.Second, func() bool {
					m, err := c.Procs[0].Members()
					code, _, _ := c.Procs[0].Get("/check?key=" + key + "&hits=100")
					return err == nil && m[in.name] == "alive" && code == 429
				})
				return
			}
			// ... gives the cluster time to hear of it (several sync and
			// rejoin rounds), and the cluster never does.
			time.Sleep(3 * time.Second)
			for _, q := range c.Procs[:2] {
				m, err := q.Members()
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := m[in.name]; ok {
					t.Fatalf("%s lists the intruder %s: %v", q.Name, in.name, m)
				}
			}
			// A check for the whole limit fits only an empty window.
			code, body, _ := c.Procs[0].Get("/check?key=" + key + "&hits=100")
			if code != 200 || !strings.Contains(string(body), `"remaining":0`) {
				t.Fatalf("the intruder's counts leaked in: %d %s", code, body)
			}
		})
	}
}
