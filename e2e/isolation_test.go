package e2e

import (
	"encoding/base64"
	"strings"
	"testing"
	"time"
)

// TestForeignNodesCannotJoin starts a 2-node cluster with a gossip key and a
// label, then an intruder with another key and one with another label, each
// pointed at the cluster: neither becomes a member, and requests counted on
// them never reach the cluster's counts.
func TestForeignNodesCannotJoin(t *testing.T) {
	key := base64.StdEncoding.EncodeToString([]byte("0123456789abcdef"))
	other := base64.StdEncoding.EncodeToString([]byte("fedcba9876543210"))
	c := startCluster(t, 2, rules100, "-gossip-key", key, "-cluster-label", "prod")
	for _, p := range c.procs {
		eventually(t, p.name+" sees 2 members", 20*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == 2
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
			p := &proc{name: in.name}
			p.http = "127.0.0.1:" + itoa(freePort(t))
			p.gossip = "127.0.0.1:" + itoa(freePort(t))
			p.args = append([]string{"-node-name", p.name, "-http-addr", p.http, "-bind-addr", p.gossip,
				"-rules", c.rules, "-log-level", "warn", "-join", c.procs[0].gossip}, in.args...)
			p.cmd = nil
			c.procs = append(c.procs, p)
			c.startUnready(p)
			// It counts 50 requests for a key locally ...
			key := "intruded-" + in.name
			for range 50 {
				check(t, p, key)
			}
			if in.join {
				// The control proves the checks below can fail.
				eventually(t, "the control joins and its counts arrive", 20*time.Second, func() bool {
					m, err := members(c.procs[0])
					code, _, _ := request("GET", "http://"+c.procs[0].http+"/check?key="+key+"&hits=100")
					return err == nil && m[in.name] == "alive" && code == 429
				})
				return
			}
			// ... gives the cluster time to hear of it (several sync and
			// rejoin rounds), and the cluster never does.
			time.Sleep(3 * time.Second)
			for _, q := range c.procs[:2] {
				m, err := members(q)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := m[in.name]; ok {
					t.Fatalf("%s lists the intruder %s: %v", q.name, in.name, m)
				}
			}
			// A check for the whole limit fits only an empty window.
			code, body, _ := request("GET", "http://"+c.procs[0].http+"/check?key="+key+"&hits=100")
			if code != 200 || !strings.Contains(string(body), `"remaining":0`) {
				t.Fatalf("the intruder's counts leaked in: %d %s", code, body)
			}
		})
	}
}
