package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// clusterSummaryNames are the summary names of a replay with --nodes, in order.
func clusterSummaryNames() []string {
	return []string{"requests", "accepted", "rejected", "untracked", "keys", "limit", "window_ms",
		"slices", "max_in_window", "max_in_window_key", "max_in_window_ratio",
		"nodes", "sync_ms", "latency_ms", "skew_ms", "budget", "budget_floor", "seed",
		"false_rejections", "sync_deltas", "sync_messages", "sync_bytes", "sync_duration_ms",
		"sync_messages_per_node_s", "sync_bytes_per_node_s", "max_peer_offset_ms",
		"coordinate", "deadline_ms", "decided_here", "decided_coordinator", "decided_fallback",
		"decided_on_lease", "false_rejections_fallback", "coord_asks", "coord_ask_bytes", "coord_answers", "coord_answer_bytes",
		"coord_releases", "coord_release_bytes"}
}

// splitClusterOutput splits a replay --nodes output into decision lines
// and the summary, checking the summary's names and order.
func splitClusterOutput(t *testing.T, out string) (decisions []string, summary map[string]string) {
	t.Helper()
	summary = make(map[string]string)
	var names []string
	for line := range strings.Lines(out) {
		line = strings.TrimSuffix(line, "\n")
		if !strings.HasPrefix(line, "# ") {
			if len(names) > 0 {
				t.Fatalf("decision line %q after the summary", line)
			}
			decisions = append(decisions, line)
			continue
		}
		name, value, ok := strings.Cut(line[2:], " ")
		if !ok {
			t.Fatalf("summary line %q is not \"# NAME VALUE\"", line)
		}
		names = append(names, name)
		summary[name] = value
	}
	if got, want := strings.Join(names, " "), strings.Join(clusterSummaryNames(), " "); got != want {
		t.Fatalf("summary names\n%s\nwant\n%s", got, want)
	}
	return decisions, summary
}

func TestReplayClusterGolden(t *testing.T) {
	args := []string{"replay", "--trace", filepath.Join("testdata", "replay_cluster.trace"),
		"--limit", "4", "--window", "1s", "--slices", "2", "--nodes", "3", "--sync", "100ms", "--latency", "1ms",
		"--budget=false", "--decisions"}
	code, stdout, stderr := runCmd(t, "", args...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	checkGolden(t, "replay_cluster.golden", []byte(stdout))
	decisions, s := splitClusterOutput(t, stdout)
	// Node 2 at 50 ms has seen nothing of nodes 0 and 1, but the key's
	// coordinator has: the blind interval is closed.
	if decisions[5] != "50 a 2 deny" || decisions[8] != "101 a 1 deny" {
		t.Errorf("decisions %q", decisions)
	}
	if s["false_rejections"] != "0" || s["max_in_window"] != "4" || s["decided_fallback"] != "0" || s["coord_asks"] == "0" {
		t.Errorf("summary %v: want the exact window, every ask answered", s)
	}
	// Without the coordinator node 2 at 50 ms is blind.
	code, stdout, stderr = runCmd(t, "", append(args, "--coordinate=false")...)
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	decisions, s = splitClusterOutput(t, stdout)
	if decisions[5] != "50 a 2 allow" || decisions[8] != "101 a 1 deny" || s["max_in_window"] != "8" || s["coord_asks"] != "0" {
		t.Errorf("--coordinate=false: decisions %q, summary %v", decisions, s)
	}
	if s["false_rejections"] != "0" {
		t.Errorf("false rejections %s without a budget", s["false_rejections"])
	}
}

// TestReplayClusterMatchesSeedTable: replaying the seed's 90/s client as a
// trace without node fields (so the LCG picks the nodes) gives limiterd's
// row of the seed's distributed table.
func TestReplayClusterMatchesSeedTable(t *testing.T) {
	var trace strings.Builder
	for i := range 90 * 60 {
		fmt.Fprintf(&trace, "%d seed\n", int64(i)*1000/90)
	}
	for _, budget := range []bool{true, false} {
		want, err := seedstudy.LimiterdDistributed(seedstudy.LimiterdSim(0.2, budget), 90, seed.LCGSeed)
		if err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runCmd(t, trace.String(), "replay", "--nodes", "8", "--coordinate=false", "--budget="+strconv.FormatBool(budget))
		if code != exitOK {
			t.Fatalf("exit %d, %s", code, stderr)
		}
		_, s := splitClusterOutput(t, stdout)
		if s["accepted"] != strconv.Itoa(want.Accepted) || s["false_rejections"] != strconv.Itoa(want.FalseRejections) ||
			s["sync_deltas"] != strconv.Itoa(want.Touches) {
			t.Errorf("budget %v: replay %v; seed table row %+v", budget, s, want)
		}
		if s["seed"] != "20260730" || s["sync_duration_ms"] != "60000" {
			t.Errorf("seed %s, duration %s", s["seed"], s["sync_duration_ms"])
		}
	}
}

// TestReplayClusterDeterministic: the same seed gives the same output, and
// another seed other node choices.
func TestReplayClusterDeterministic(t *testing.T) {
	var trace strings.Builder
	for i := range 2000 {
		fmt.Fprintf(&trace, "%d k%d\n", i*7, i%5)
	}
	args := []string{"replay", "--nodes", "5", "--limit", "50", "--window", "2s", "--decisions", "--latency", "2ms", "--skew", "10ms"}
	_, a, _ := runCmd(t, trace.String(), args...)
	_, b, _ := runCmd(t, trace.String(), args...)
	_, c, _ := runCmd(t, trace.String(), append(args, "--seed", "7")...)
	if a != b {
		t.Error("two runs with the same seed differ")
	}
	if a == c {
		t.Error("another seed gave the same output")
	}
}

func TestReplayClusterErrors(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		trace string
		code  int
		want  string
	}{
		{"sync without nodes", []string{"--sync", "1s"}, "", exitUsage, "--sync needs --nodes"},
		{"dup without nodes", []string{"--dup"}, "", exitUsage, "--dup needs --nodes"},
		{"negative nodes", []string{"--nodes", "-1"}, "", exitUsage, "--nodes must not be negative"},
		{"seed too large", []string{"--nodes", "2", "--seed", "4294967296"}, "", exitUsage, "--seed must be at most 4294967295"},
		{"stagger above sync", []string{"--nodes", "2", "--stagger", "1s"}, "", exitUsage, "stagger must be"},
		{"bad floor", []string{"--nodes", "2", "--budget-floor", "-1"}, "", exitUsage, "BudgetFloor"},
		{"bad limit", []string{"--nodes", "2", "--limit", "0"}, "", exitUsage, "limit"},
		{"node out of range", []string{"--nodes", "2"}, "0 a 1\n1 a 2\n", exitRuntime, `trace line 2: node "2" is not a node index in [0, 2)`},
		{"node not a number", []string{"--nodes", "2"}, "0 a x\n", exitRuntime, `trace line 1: node "x" is not a node index`},
		{"four fields", []string{"--nodes", "2"}, "0 a 1 b\n", exitRuntime, `trace line 1: want "TIME_MS KEY [NODE]", got 4 fields`},
		{"node field without nodes", nil, "0 a 1\n", exitRuntime, `trace line 1: want "TIME_MS KEY", got 3 fields`},
		{"key too long for the limiter", []string{"--nodes", "2"}, "0 " + strings.Repeat("k", 1025) + "\n", exitRuntime, "trace line 1: key is longer than 1024 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.trace, append([]string{"replay"}, tt.args...)...)
			if code != tt.code || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", code, stderr, tt.code, tt.want)
			}
			if strings.Contains(stdout, "# requests") {
				t.Errorf("a summary was printed:\n%s", stdout)
			}
		})
	}
}

// Example_replayCluster replays a trace on two simulated nodes that sync
// every 100 ms. Until the tick at 100 ms node 1 has not heard of node 0's
// request, but with a limit of 2 its blind share is 0: its second request
// goes to the key's coordinator, which knows of node 0's and denies it.
// With --coordinate=false node 1 would admit it: the blind interval that
// limitsim burst measures and the per-node budget (off here) bounds.
func Example_replayCluster() {
	trace := `# TIME_MS KEY NODE: a limit of 2 per second
0   alice 0
10  alice 1
20  alice 1
150 alice 0
250 alice 1
`
	run([]string{"replay", "--limit", "2", "--window", "1s", "--slices", "1", "--nodes", "2", "--sync", "100ms",
		"--budget=false", "--decisions"}, strings.NewReader(trace), os.Stdout, os.Stderr)
	// Output:
	// 0 alice 0 allow
	// 10 alice 1 allow
	// 20 alice 1 deny
	// 150 alice 0 deny
	// 250 alice 1 deny
	// # requests 5
	// # accepted 2
	// # rejected 3
	// # untracked 0
	// # keys 1
	// # limit 2
	// # window_ms 1000
	// # slices 1
	// # max_in_window 2
	// # max_in_window_key alice
	// # max_in_window_ratio 1.000
	// # nodes 2
	// # sync_ms 100
	// # latency_ms 0
	// # skew_ms 0
	// # budget false
	// # budget_floor 1
	// # seed 20260730
	// # false_rejections 0
	// # sync_deltas 2
	// # sync_messages 6
	// # sync_bytes 188
	// # sync_duration_ms 300
	// # sync_messages_per_node_s 10.0
	// # sync_bytes_per_node_s 313.3
	// # max_peer_offset_ms 0
	// # coordinate true
	// # deadline_ms 5
	// # decided_here 2
	// # decided_coordinator 3
	// # decided_fallback 0
	// # decided_on_lease 0
	// # false_rejections_fallback 0
	// # coord_asks 2
	// # coord_ask_bytes 131
	// # coord_answers 2
	// # coord_answer_bytes 84
	// # coord_releases 0
	// # coord_release_bytes 0
}

// TestReplayOneNodeClusterIsSingleNode: a cluster of one node decides every
// request of every seed pattern exactly as the single-node replay does.
func TestReplayOneNodeClusterIsSingleNode(t *testing.T) {
	for _, p := range seedstudy.Patterns() {
		var trace strings.Builder
		for i, at := range p.At() {
			fmt.Fprintf(&trace, "%d k%d\n", at, i%2)
		}
		_, single, _ := runCmd(t, trace.String(), "replay", "--decisions")
		code, clustered, stderr := runCmd(t, trace.String(), "replay", "--decisions", "--nodes", "1")
		if code != exitOK {
			t.Fatalf("exit %d, %s", code, stderr)
		}
		sd, _ := parseSummary(t, single)
		cd, _ := splitClusterOutput(t, clustered)
		if len(sd) != len(cd) || len(sd) == 0 {
			t.Fatalf("%s: %d decisions on one node, %d on a cluster of one", p.Name, len(sd), len(cd))
		}
		for i := range sd {
			f := strings.Fields(cd[i])
			if got := f[0] + " " + f[1] + " " + f[3]; got != sd[i] || f[2] != "0" {
				t.Fatalf("%s, request %d: cluster of one %q, single node %q", p.Name, i, cd[i], sd[i])
			}
		}
	}
}
