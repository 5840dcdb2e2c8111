package main

import (
	"cmp"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseClusterFlags(t *testing.T) {
	key := "MDEyMzQ1Njc4OWFiY2RlZg==" // "0123456789abcdef"
	none := func(string) string { return "" }

	cfg, err := parseConfig(nil, none, io.Discard)
	if err != nil || cfg.clustered() {
		t.Fatalf("no cluster flags: clustered %v, err %v; want a single node", cfg.clustered(), err)
	}

	cfg, err = parseConfig([]string{"-join", "10.0.0.1:7946, 10.0.0.2:7946", "-gossip-key", key, "-budget=false", "-sync-transport", "tcp"}, none, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	switch {
	case !cfg.clustered():
		t.Error("-join alone must turn cluster mode on")
	case cfg.bindAddr != defaultBindAddr:
		t.Errorf("bind address %q, want %q with only -join", cfg.bindAddr, defaultBindAddr)
	case !slices.Equal(cfg.join, []string{"10.0.0.1:7946", "10.0.0.2:7946"}):
		t.Errorf("join %q", cfg.join)
	case string(cfg.gossipKey) != "0123456789abcdef":
		t.Errorf("gossip key %q", cfg.gossipKey)
	case cfg.nodeName != host+"-7946":
		t.Errorf("default node name %q, want host name and port", cfg.nodeName)
	case cfg.budget || cfg.counterCluster().Budget:
		t.Error("-budget=false ignored")
	case cfg.syncInterval != 200*time.Millisecond || cfg.counterCluster().SyncInterval != cfg.syncInterval:
		t.Errorf("sync interval %v", cfg.syncInterval)
	case cfg.syncDeliveryGrace != 0.25 || cfg.counterCluster().DeliveryGrace != 0.25:
		t.Errorf("delivery grace %v", cfg.syncDeliveryGrace)
	case cfg.leaseShare != 0.46 || cfg.counterCluster().LeaseShare != 0.46:
		t.Errorf("lease share %v", cfg.leaseShare)
	case cfg.leaseTime != 3*time.Second || cfg.counterCluster().LeaseTime != 3*time.Second:
		t.Errorf("lease time %v", cfg.leaseTime)
	case cfg.clusterConfig("h:1").CatchUpWait != 5*time.Second:
		t.Errorf("catch-up wait %v, want 5s", cfg.clusterConfig("h:1").CatchUpWait)
	case cfg.clusterConfig("h:1").SyncTransport != "tcp" || cfg.clusterConfig("h:1").HTTPAddr != "h:1":
		t.Errorf("cluster config %+v", cfg.clusterConfig("h:1"))
	}

	env := map[string]string{"LIMITERD_BIND_ADDR": "127.0.0.1:7950", "LIMITERD_NODE_NAME": "edge-1", "LIMITERD_CLUSTER_LABEL": "prod", "LIMITERD_SYNC_DELIVERY_GRACE": "1", "LIMITERD_CATCH_UP_WAIT": "0s", "LIMITERD_LEASE_SHARE": "0.2", "LIMITERD_LEASE_TIME": "10s"}
	cfg, err = parseConfig(nil, func(k string) string { return env[k] }, io.Discard)
	if err != nil || cfg.bindAddr != "127.0.0.1:7950" || cfg.nodeName != "edge-1" || cfg.clusterLabel != "prod" || cfg.counterCluster().DeliveryGrace != 1 || cfg.counterCluster().LeaseShare != 0.2 || cfg.counterCluster().LeaseTime != 10*time.Second || cfg.clusterConfig("").CatchUpWait != 0 {
		t.Fatalf("from the environment: %+v, %v", cfg, err)
	}

	// Secure by default (issue 9): no key on an address beyond this host
	// is refused unless -insecure-cluster says the network is trusted.
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"-join", "10.0.0.1:7946"}, false}, // binds 0.0.0.0
		{[]string{"-join", "10.0.0.1:7946", "-insecure-cluster"}, true},
		{[]string{"-join", "10.0.0.1:7946", "-gossip-key", key}, true},
		{[]string{"-bind-addr", "10.0.0.3:7946"}, false},
		{[]string{"-bind-addr", "127.0.0.1:7946"}, true},
		{[]string{"-bind-addr", "[::1]:7946"}, true},
		{[]string{"-bind-addr", "127.0.0.1:7946", "-advertise-addr", "10.0.0.3:7946"}, false},
	} {
		cfg, err := parseConfig(tc.args, none, io.Discard)
		if tc.ok != (err == nil) {
			t.Errorf("%q: %v, want ok %v", tc.args, err, tc.ok)
		}
		if err != nil && !strings.Contains(err.Error(), "-gossip-key") {
			t.Errorf("%q: %v, want it to name -gossip-key", tc.args, err)
		}
		if err == nil && cfg.unauthenticated() != slices.Contains(tc.args, "-insecure-cluster") {
			t.Errorf("%q: unauthenticated %v", tc.args, cfg.unauthenticated())
		}
	}

	bad := []struct {
		args []string
		want string
	}{
		{[]string{"-bind-addr", "127.0.0.1:1", "-gossip-key", "not base64!"}, "-gossip-key must be standard base64"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-gossip-key", "c2hvcnQ="}, "-gossip-key must have 16, 24 or 32 bytes (AES-128, -192, -256), got 5"},
		{[]string{"-bind-addr", "nohost"}, "bind address"},
		{[]string{"-bind-addr", "localhost:7946"}, "must be an IP address"},
		{[]string{"-join", "nohostport"}, "Join address"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-sync-transport", "quic"}, "SyncTransport"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-sync-interval", "0s"}, "SyncInterval must be positive"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-sync-delivery-grace", "1.5"}, "DeliveryGrace must be between 0 and 1"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-lease-share", "1.5"}, "LeaseShare must be between 0 and 1"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-lease-time", "0s"}, "LeaseTime must be positive"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-sync-delivery-grace", "0.1"}, "-sync-spread (0.1) must be below -sync-delivery-grace (0.1)"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-sync-delivery-grace", "0.05", "-sync-spread", "0.2"}, "-sync-spread (0.2) must be below"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-cluster-label", strings.Repeat("x", 256)}, "Label must have at most 255 bytes"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-catch-up-wait", "-1s"}, "CatchUpWait must be at least 0"},
		{[]string{"-bind-addr", "127.0.0.1:1", "-advertise-addr", "example.com:7946"}, "AdvertiseAddr"},
	}
	for _, b := range bad {
		if _, err := parseConfig(b.args, none, io.Discard); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%q: err %v, want it to mention %q", b.args, err, b.want)
		}
	}
}

func TestHelpListsClusterFlags(t *testing.T) {
	var out strings.Builder
	_, _ = parseConfig([]string{"-h"}, func(string) string { return "" }, &out)
	for _, name := range []string{"node-name", "bind-addr", "advertise-addr", "join", "sync-interval", "cluster-label", "gossip-key", "sync-transport", "sync-spread", "sync-delivery-grace", "anti-entropy-interval", "rejoin-interval", "catch-up-wait", "budget", "coordinate", "coordinator-deadline", "sync-routing", "insecure-cluster", "lease-share", "lease-time"} {
		if !strings.Contains(out.String(), "-"+name+" ") || !strings.Contains(out.String(), envName(name)) {
			t.Errorf("-h output lacks -%s or %s", name, envName(name))
		}
	}
}

// Two in-process daemons form a cluster: /cluster lists both, /readyz is
// ready once the peer is heard, and requests counted on one are counted on the other.
func TestServeCluster(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - name: default\n    limit: 5\n    window: 60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fast := []string{"-bind-addr", "127.0.0.1:0", "-sync-interval", "50ms", "-anti-entropy-interval", "200ms", "-budget=false", "-coordinate=false"}
	base1, _ := startDaemon(t, path, append(fast, "-node-name", "a")...)
	if code, body := get(t, base1+"/readyz"); code != 200 {
		t.Fatalf("a node without -join must be ready at once: %d %s", code, body)
	}
	var st struct {
		Self    string
		Nodes   int
		Members []struct{ Name, Addr, HTTP, State string }
	}
	status := func(base string) { t.Helper(); getJSON(t, base+"/cluster", &st) }
	status(base1)
	if st.Self != "a" || len(st.Members) != 1 || st.Members[0].HTTP != strings.TrimPrefix(base1, "http://") {
		t.Fatalf("/cluster of a lone node: %+v", st)
	}
	base2, stop2 := startDaemon(t, path, append(fast, "-node-name", "b", "-join", st.Members[0].Addr)...)
	eventually(t, "both nodes to see two alive members", func() bool {
		status(base1)
		n1 := st.Nodes
		status(base2)
		return n1 == 2 && st.Nodes == 2
	})
	// A joined node is ready once it has heard every live peer's sync
	// (-catch-up-wait); until then /readyz says whom it waits for.
	eventually(t, "the joined node to be ready", func() bool {
		code, body := get(t, base2+"/readyz")
		if code != 200 && !strings.Contains(body, "not heard from yet: a,") {
			t.Fatalf("joined node not ready for another reason: %d %s", code, body)
		}
		return code == 200
	})
	// Without the budget each of the two nodes may admit the whole limit
	// between syncs: 2 × 5 (slice tails of floor(5 × 0.05 / 2) = 0).
	ratio := func(base string, want string) func() bool {
		return func() bool {
			_, m := get(t, base+"/metrics")
			return strings.Contains(m, `limiterd_rule_worst_case_ratio{limit="5/60s",rule="default"} `+want+"\n")
		}
	}
	eventually(t, "worst case ratio 2 on both nodes", func() bool { return ratio(base1, "2")() && ratio(base2, "2")() })
	for range 3 {
		if code, body := get(t, base1+"/check?key=k"); code != 200 {
			t.Fatalf("check on a: %d %s", code, body)
		}
	}
	eventually(t, "b to count a's requests", func() bool {
		_, body := get(t, base2+"/check?key=k") // counts one on b too
		return strings.Contains(body, `"remaining":0`) || strings.Contains(body, `"allowed":false`)
	})
	_, m := get(t, base1+"/metrics")
	for _, name := range []string{`limiterd_cluster_members{state="alive"} 2`, "limiterd_sync_messages_total", "limiterd_cluster_health_score", `limiterd_sync_merge_lag_seconds{peer="b"}`} {
		if !strings.Contains(m, name) {
			t.Errorf("/metrics of a lacks %s", name)
		}
	}
	if code := stop2(); code != 0 {
		t.Fatalf("b exited %d", code)
	}
	eventually(t, "a to see b left", func() bool {
		status(base1)
		return st.Nodes == 1 && slices.ContainsFunc(st.Members, func(m struct{ Name, Addr, HTTP, State string }) bool {
			return m.Name == "b" && m.State == "left"
		})
	})
	eventually(t, "worst case ratio back to 1 on a alone", ratio(base1, "1"))
}

// -test-clock-offset shifts the node's clock, negative too, and
// -max-clock-offset is the cluster's MaxClockOffset, validated by it.
func TestClockFlags(t *testing.T) {
	node := []string{"-bind-addr", "127.0.0.1:1"}
	for _, tc := range []struct {
		args      []string
		env       map[string]string
		offset    time.Duration // -test-clock-offset
		maxOffset time.Duration // -max-clock-offset
		err       string        // "" for valid
	}{
		{args: nil, offset: 0, maxOffset: time.Second},
		{args: []string{"-test-clock-offset", "2s"}, offset: 2 * time.Second, maxOffset: time.Second},
		{args: []string{"-test-clock-offset", "-200ms"}, offset: -200 * time.Millisecond, maxOffset: time.Second},
		{args: []string{"-test-clock-offset=-50ms"}, offset: -50 * time.Millisecond, maxOffset: time.Second},
		{env: map[string]string{"LIMITERD_TEST_CLOCK_OFFSET": "-2s", "LIMITERD_MAX_CLOCK_OFFSET": "500ms"}, offset: -2 * time.Second, maxOffset: 500 * time.Millisecond},
		{args: []string{"-max-clock-offset", "0"}, maxOffset: 0},
		{args: []string{"-max-clock-offset", "9.9s"}, maxOffset: 9900 * time.Millisecond},
		{args: []string{"-max-clock-offset", "-1s"}, err: "MaxClockOffset must be at least 0"},
		{args: []string{"-max-clock-offset", "10s"}, err: "MaxClockOffset must be at least 0 (0: no check) and under the stale-message age 10s"},
		{args: []string{"-test-clock-offset", "soon"}, err: "-test-clock-offset"},
	} {
		name := strings.Join(tc.args, " ")
		for _, k := range slices.Sorted(maps.Keys(tc.env)) {
			name += k + "=" + tc.env[k] + " "
		}
		t.Run(cmp.Or(name, "defaults"), func(t *testing.T) {
			cfg, err := parseConfig(append(slices.Clone(node), tc.args...), func(k string) string { return tc.env[k] }, io.Discard)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want it to mention %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.testClockOffset != tc.offset || cfg.clusterConfig("").MaxClockOffset != tc.maxOffset {
				t.Errorf("offset %v, max %v; want %v, %v", cfg.testClockOffset, cfg.clusterConfig("").MaxClockOffset, tc.offset, tc.maxOffset)
			}
			before := time.Now()
			got := cfg.clock()().Sub(before)
			if got < tc.offset || got > tc.offset+time.Second {
				t.Errorf("the clock reads %v from now, want %v", got, tc.offset)
			}
		})
	}
}

func TestHelpListsClockFlags(t *testing.T) {
	var out strings.Builder
	_, _ = parseConfig([]string{"-h"}, func(string) string { return "" }, &out)
	for _, want := range []string{
		"-test-clock-offset DURATION", "for fault tests only", "may be negative", "LIMITERD_TEST_CLOCK_OFFSET", `(default "0s"`,
		"-max-clock-offset ", "LIMITERD_MAX_CLOCK_OFFSET", `(default "1s"`, `limiterd_sync_entries_total{result="skewed"}`,
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("-h output lacks %q", want)
		}
	}
}

// A daemon whose clock is 2 s ahead (-test-clock-offset) stays a member
// of the other's cluster, which shows its offset but does not count its
// requests (-max-clock-offset, 1s).
func TestServeSkewedNode(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - name: default\n    limit: 5\n    window: 60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	fast := []string{"-bind-addr", "127.0.0.1:0", "-sync-interval", "50ms", "-anti-entropy-interval", "200ms", "-budget=false", "-coordinate=false"}
	base1, _ := startDaemon(t, path, append(fast, "-node-name", "a")...)
	type member struct {
		Name, Addr, State string
		ClockOffsetMs     *int64 `json:"clock_offset_ms"`
	}
	var st struct {
		Nodes   int
		Members []member
	}
	status := func(base string) { t.Helper(); getJSON(t, base+"/cluster", &st) }
	status(base1)
	base2, _ := startDaemon(t, path, append(fast, "-node-name", "b", "-join", st.Members[0].Addr, "-test-clock-offset", "2s")...)
	var off int64
	eventually(t, "a to see b alive and hear from it", func() bool {
		status(base1)
		i := slices.IndexFunc(st.Members, func(m member) bool { return m.Name == "b" })
		if st.Nodes != 2 || i < 0 || st.Members[i].State != "alive" || st.Members[i].ClockOffsetMs == nil {
			return false
		}
		off = *st.Members[i].ClockOffsetMs
		return true
	})
	if off < 1950 || off > 2500 {
		t.Errorf("a shows b's clock offset %d ms, want about 2000", off)
	}
	for range 5 {
		if code, body := get(t, base2+"/check?key=k"); code != 200 {
			t.Fatalf("check on b: %d %s", code, body)
		}
	}
	eventually(t, "a to count b's slice as skewed", func() bool {
		_, m := get(t, base1+"/metrics")
		return strings.Contains(m, "limiterd_sync_skewed_messages_total") && !strings.Contains(m, `limiterd_sync_entries_total{result="skewed"} 0`)
	})
	if code, body := get(t, base1+"/check?key=k"); code != 200 || !strings.Contains(body, `"remaining":4`) {
		t.Errorf("a's check after b's five: %d %s, want allowed with 4 left (b's not counted)", code, body)
	}
}
