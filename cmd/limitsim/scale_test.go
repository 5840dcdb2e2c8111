package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestScaleCommandLine(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{"help", []string{"scale", "-h"}, exitOK, "Usage: limitsim scale", ""},
		{"help command", []string{"help", "scale"}, exitOK, "--rate-per-node", ""},
		{"help names the fields", []string{"scale", "-h"}, exitOK, "sync_bytes_per_node_s", ""},
		{"listed", []string{"-h"}, exitOK, "  scale ", ""},
		{"bad list", []string{"scale", "--nodes", "8,x"}, exitUsage, "", `"x" is not a cluster size`},
		{"one node", []string{"scale", "--nodes", "1,8"}, exitUsage, "", "cluster sizes must be between 2 and 4096, got 1"},
		{"too many nodes", []string{"scale", "--nodes", "8,5000"}, exitUsage, "", "cluster sizes must be between 2 and 4096, got 5000"},
		{"empty list", []string{"scale", "--nodes", ""}, exitUsage, "", `"" is not a cluster size`},
		{"no keys", []string{"scale", "--keys-per-node", "0"}, exitUsage, "", "keys per node must be between"},
		{"no rate", []string{"scale", "--rate-per-node", "0"}, exitUsage, "", "rate per node must be between"},
		{"flat zipf", []string{"scale", "--zipf", "1"}, exitUsage, "", "Zipf exponent must be above 1"},
		{"no seconds", []string{"scale", "--seconds", "0"}, exitUsage, "", "--seconds must be above 0"},
		{"bad scenario", []string{"scale", "--scenarios", "healthy,flood"}, exitUsage, "", `unknown scenario "flood"`},
		{"cut past the end", []string{"scale", "--seconds", "10", "--cut-at", "8s", "--cut-for", "5s"}, exitUsage, "", "end within the run"},
		{"cut ignored when healthy", []string{"scale", "--nodes", "2", "--scenarios", "healthy", "--seconds", "0.5", "--cut-at", "8s",
			"--rate-per-node", "50", "--keys-per-node", "10"}, exitOK, "healthy       2", "limitsim scale: 2 nodes, healthy, done in"},
		{"negative judge", []string{"scale", "--judge", "-1"}, exitUsage, "", "judged keys must not be negative"},
		{"tolerance past the limit", []string{"scale", "--tolerance", "1.5"}, exitUsage, "", "the tolerance must be above 0 and at most 1, got 1.5"},
		{"no tolerance", []string{"scale", "--tolerance", "0"}, exitUsage, "", "the tolerance must be above 0"},
		{"fractional sync", []string{"scale", "--sync", "1500us"}, exitUsage, "", "the sync interval must be a whole number of milliseconds"},
		{"lease share past 1", []string{"scale", "--lease-share", "1.5"}, exitUsage, "", "the lease share must be between 0 (no leases) and 1, got 1.5"},
		{"no lease time", []string{"scale", "--lease-time", "0"}, exitUsage, "", "the lease time must be above 0"},
		{"grace past the interval", []string{"scale", "--delivery-grace", "1.5"}, exitUsage, "", "the delivery grace must be between 0 and 1 (a share of the sync interval), got 1.5"},
		{"latency past the deadline", []string{"scale", "--latency", "3ms"}, exitUsage, "", "the latency must be a whole number of milliseconds whose round trip is below the ask deadline of 5ms, got 3ms"},
		{"latency", []string{"scale", "--nodes", "2", "--scenarios", "healthy", "--seconds", "0.5", "--rate-per-node", "50", "--keys-per-node", "10",
			"--latency", "1ms"}, exitOK, "every message takes 1ms to reach its peer", "limitsim scale: 2 nodes, healthy, done in"},
		{"looser settings", []string{"scale", "--nodes", "2", "--scenarios", "healthy", "--seconds", "0.5", "--rate-per-node", "50", "--keys-per-node", "10",
			"--sync", "100ms", "--delivery-grace", "0.5", "--tolerance", "0.2", "--lease-share", "0.4", "--lease-time", "6s"}, exitOK,
			"not limiterd's defaults: sync every 100ms, delivery grace 0.5 of it, tolerance 0.2, lease share 0.4, lease time 6s", "limitsim scale: 2 nodes, healthy, done in"},
		{"no leases", []string{"scale", "--nodes", "2", "--scenarios", "healthy", "--seconds", "0.5", "--rate-per-node", "50", "--keys-per-node", "10",
			"--lease-share", "0", "--lease-time", "0"}, exitOK, "lease share 0, lease time 0s", "limitsim scale: 2 nodes, healthy, done in"},
		{"records without alone", []string{"scale", "--alone=false", "--records", "x"}, exitUsage, "", "--records needs --alone"},
		{"no rounds", []string{"scale", "--replay", "x", "--rounds", "0"}, exitUsage, "", "--rounds must be between 1 and 100"},
		{"no records to replay", []string{"scale", "--replay", "/nonexistent"}, exitRuntime, "", "no record (*.rec) in /nonexistent"},
		{"argument", []string{"scale", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"small run", []string{"scale", "--nodes", "2,3", "--rate-per-node", "50", "--keys-per-node", "10", "--seconds", "2",
			"--cut-at", "500ms", "--cut-for", "1s"}, exitOK, "fallback      3", "limitsim scale: 3 nodes, fallback, done in"},

		// The full mesh's study (issue 4), as before behind --mesh.
		{"mesh help", []string{"scale", "--mesh", "-h"}, exitOK, "Usage: limitsim scale --mesh", ""},
		{"mesh help command", []string{"help", "scale"}, exitOK, "--mesh", ""},
		{"mesh bad list", []string{"scale", "--mesh", "--nodes", "8,x"}, exitUsage, "", `"x" is not a cluster size`},
		{"mesh one node", []string{"scale", "--mesh", "--nodes", "1,8"}, exitUsage, "", "cluster sizes must be between 2 and 256, got 1"},
		{"mesh empty list", []string{"scale", "--mesh", "--nodes", ""}, exitUsage, "", `"" is not a cluster size`},
		{"mesh no keys", []string{"scale", "--mesh", "--keys", "0"}, exitUsage, "", "keys must be between"},
		{"mesh no rate", []string{"scale", "--mesh", "--rate", "0"}, exitUsage, "", "rate must be between"},
		{"mesh negative per node", []string{"scale", "--mesh", "--rate-per-node", "-1"}, exitUsage, "", "rate per node must be between"},
		{"mesh both rates", []string{"scale", "--mesh", "--rate", "100", "--rate-per-node", "10"}, exitUsage, "", "not both"},
		{"mesh no seconds", []string{"scale", "--mesh", "--seconds", "0"}, exitUsage, "", "seconds must be between"},
		{"mesh odd warm-up", []string{"scale", "--mesh", "--warmup", "150ms"}, exitUsage, "", "multiple of the sync interval"},
		{"mesh big seed", []string{"scale", "--mesh", "--seed", "4294967296"}, exitUsage, "", "--seed must be at most 4294967295"},
		{"mesh argument", []string{"scale", "--mesh", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"mesh small run", []string{"scale", "--mesh", "--nodes", "2,3", "--keys", "100", "--rate", "50", "--seconds", "1", "--warmup", "1s"}, exitOK,
			"nodes  checks/s", "limitsim scale: 3 nodes done in"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, "", tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr %q", code, tc.code, stderr)
			}
			if tc.stdoutHas == "" && stdout != "" || !strings.Contains(stdout, tc.stdoutHas) {
				t.Errorf("stdout %q, want it to contain %q", stdout, tc.stdoutHas)
			}
			if tc.stderrHas == "" && stderr != "" || !strings.Contains(stderr, tc.stderrHas) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.stderrHas)
			}
		})
	}
}

// FuzzNodeList checks the --nodes parser: it never panics, and what it
// accepts prints back to a list it parses the same way.
func FuzzNodeList(f *testing.F) {
	for _, s := range []string{"8,16,32,64,128", "2", " 4 , 8", "", ",", "8,,16", "-1", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var l nodeList
		if err := l.Set(s); err != nil {
			return
		}
		var again nodeList
		if err := again.Set(l.String()); err != nil {
			t.Fatalf("%q parsed to %v, whose String %q does not parse: %v", s, l, l.String(), err)
		}
		if again.String() != l.String() {
			t.Fatalf("%q: %q then %q", s, l.String(), again.String())
		}
	})
}

// TestScaleJSON: --json prints one object a line, a row per cluster size
// and scenario, with the fields scripts read.
func TestScaleJSON(t *testing.T) {
	code, stdout, stderr := runCmd(t, "", "scale", "--json", "--nodes", "2,3", "--rate-per-node", "50", "--keys-per-node", "10",
		"--seconds", "2", "--cut-at", "500ms", "--cut-for", "1s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	want := []struct {
		nodes    float64
		scenario string
	}{{2, "healthy"}, {2, "fallback"}, {3, "healthy"}, {3, "fallback"}}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %q", len(lines), len(want), stdout)
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		if m["nodes"] != want[i].nodes || m["scenario"] != want[i].scenario {
			t.Errorf("line %d: nodes %v, scenario %v; want %v, %s", i, m["nodes"], m["scenario"], want[i].nodes, want[i].scenario)
		}
		for _, f := range []string{"sync_bytes_per_node_s", "sync_msgs_per_node_s", "engine_ns_per_check", "heap_bytes_per_node",
			"network_wait_share", "worst_ratio", "false_rejections"} {
			if _, ok := m[f].(float64); !ok {
				t.Errorf("line %d: %q is %v, want a number", i, f, m[f])
			}
		}
		if m["sync_bytes_per_node_s"].(float64) <= 0 || m["false_rejections"].(float64) != 0 {
			t.Errorf("line %d: %s", i, line)
		}
	}
}

// TestScaleFromJSONToCharts: --from reads what --json printed instead of
// running, and --svg writes one chart per scenario.
func TestScaleFromJSONToCharts(t *testing.T) {
	code, stdout, stderr := runCmd(t, "", "scale", "--json", "--nodes", "2,3", "--rate-per-node", "50", "--keys-per-node", "10",
		"--seconds", "2", "--cut-at", "500ms", "--cut-for", "1s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	dir := t.TempDir()
	rows := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(rows, []byte(stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	code, again, stderr := runCmd(t, "", "scale", "--from", rows, "--json", "--svg", filepath.Join(dir, "cost.svg"))
	if code != exitOK || again != stdout {
		t.Fatalf("exit %d, printed %q, want the rows read back %q: %s", code, again, stdout, stderr)
	}
	for _, sc := range []string{"healthy", "fallback"} {
		b, err := os.ReadFile(filepath.Join(dir, "cost-"+sc+".svg"))
		if err != nil || !strings.Contains(string(b), "<svg") || !strings.Contains(string(b), "("+sc+")") {
			t.Errorf("the %s chart: %v, %.80q", sc, err, b)
		}
	}
	if code, _, stderr := runCmd(t, "", "scale", "--from", filepath.Join(dir, "missing.jsonl")); code == exitOK || !strings.Contains(stderr, "missing.jsonl") {
		t.Errorf("a missing --from file: exit %d, %q", code, stderr)
	}
}

// TestScaleRecordsReplayed: --records keeps each run's record of node
// N-1, named by scenario and size, and --replay replays them all again,
// interleaved, into the figure the run printed as
// engine_ns_per_check_alone. The directory is made if it is missing.
func TestScaleRecordsReplayed(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "runs", "today")
	load := []string{"--rate-per-node", "200", "--keys-per-node", "50"}
	code, stdout, stderr := runCmd(t, "", append([]string{"scale", "--nodes", "2,3", "--scenarios", "healthy", "--seconds", "1", "--json", "--records", dir}, load...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var row struct {
			Nodes int     `json:"nodes"`
			Alone float64 `json:"engine_ns_per_check_alone"`
		}
		if err := json.Unmarshal([]byte(line), &row); err != nil || row.Alone <= 0 {
			t.Errorf("row %s: engine_ns_per_check_alone %v (%v), want above 0", line, row.Alone, err)
		}
		if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("healthy-%d.rec", row.Nodes))); err != nil {
			t.Errorf("%d nodes: %v", row.Nodes, err)
		}
	}
	code, stdout, stderr = runCmd(t, "", "scale", "--replay", dir, "--rounds", "2")
	if code != exitOK {
		t.Fatalf("replay: exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 rounds interleaved", "healthy       2", "healthy       3", "median"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("replay printed %q, want %q in it", stdout, want)
		}
	}
}
