package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/seedstudy"
)

// writeRules writes a rule file into a fresh directory and returns its path.
func writeRules(t *testing.T, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// whatifRules has a rule with two limits, a shadow rule and no default
// rule, so that some keys are unlimited.
const whatifRules = `rules:
  - name: api
    match: "api:*"
    limits:
      - {limit: 2, window: 1s}
      - {limit: 3, window: 10s}
  - name: trial
    match: "trial:*"
    shadow: true
    limit: 1
    window: 1s
`

// TestWhatifDecisions pins, request by request, what the real limiter
// decides: the multi-limit rule rejects on either limit and counts a
// request only against both, the shadow rule always allows but reports
// what it would have done, and a key no rule governs is unlimited.
func TestWhatifDecisions(t *testing.T) {
	log := `# TIME KEY
0    api:a
100  api:a
200  api:a
300  trial:x
400  trial:x
500  other
1000 api:a
1100 api:a
2000 api:a
2100 api:b
2200 trial:x
2300 trial:x
2400 trial:y
`
	code, stdout, stderr := runCmd(t, log, "replay", "--rules", writeRules(t, whatifRules), "--decisions", "--top", "1")
	if code != exitOK || stderr != "" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	want := `0 api:a api allow
100 api:a api allow
200 api:a api deny
300 trial:x trial allow
400 trial:x trial shadow-deny
500 other - unlimited
1000 api:a api allow
1100 api:a api deny
2000 api:a api deny
2100 api:b api allow
2200 trial:x trial allow
2300 trial:x trial shadow-deny
2400 trial:y trial allow
what-if replay: 13 requests, 5 keys, 0 to 2400 (2.4s)
on one node

rule       mode       match    limits       requests  allowed  rejected  would reject  keys  keys rejected
api        enforce    api:*    2/1s, 3/10s         7        4         3             -     2              1
trial      shadow     trial:*  1/1s                5        5         -             2     2              1
(no rule)  unlimited  -        -                   1        1         -             -     1              -
total                                             13       10         3             2     5              2

rule api rejected 3 of 7 requests (42.9%), from 1 of 2 keys; limits without room: api/1s 1, api/10s 2
key    requests  rejected  share  first rejection
api:a         6         3  50.0%  200

rule trial (shadow) would have rejected 2 of 5 requests (40.0%), from 1 of 2 keys
key      requests  would reject  share  first would-be rejection
trial:x         4             2  50.0%  400
`
	if stdout != want {
		t.Errorf("output\n%s\nwant\n%s", stdout, want)
	}
}

// TestWhatifTopKeys checks the ranking (most rejections first, ties by
// key), the cut at --top and --top 0.
func TestWhatifTopKeys(t *testing.T) {
	rules := writeRules(t, "rules:\n  - name: default\n    limit: 1\n    window: 1s\n")
	var log strings.Builder
	// Key kN sends N+1 requests at one instant: N rejections.
	for n, key := range []string{"k0", "k1", "k2", "k3", "k4"} {
		for range n + 1 {
			log.WriteString("0 " + key + "\n")
		}
	}
	log.WriteString("0 j2\n0 j2\n0 j2\n") // ties with k2
	tests := []struct {
		top  string
		want []string // key lines, in order
		head string
	}{
		{"10", []string{"k4", "k3", "j2", "k2", "k1"}, ""},
		{"3", []string{"k4", "k3", "j2"}, "top 3 of 5 keys by rejections:\n"},
		{"0", nil, ""},
	}
	for _, tt := range tests {
		t.Run("top "+tt.top, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, log.String(), "replay", "--rules", rules, "--top", tt.top)
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			_, section, _ := strings.Cut(stdout, "rule default rejected 12 of 18 requests (66.7%), from 5 of 6 keys\n")
			if tt.head != "" && !strings.HasPrefix(section, tt.head) {
				t.Errorf("section %q does not start with %q", section, tt.head)
			}
			var keys []string
			for _, line := range strings.Split(section, "\n") {
				if f := strings.Fields(line); len(f) == 5 && f[0] != "key" {
					keys = append(keys, f[0])
				}
			}
			if strings.Join(keys, " ") != strings.Join(tt.want, " ") {
				t.Errorf("keys %v, want %v\n%s", keys, tt.want, stdout)
			}
		})
	}
}

// TestWhatifAgreesWithReplay checks that a what-if run with one default
// rule accepts exactly what the plain replay of the same limit accepts, on
// one node and on the simulated cluster: the rule set adds matching, not a
// different count.
func TestWhatifAgreesWithReplay(t *testing.T) {
	pats := seedstudy.Patterns()
	if raceEnabled {
		// The slice-end pattern alone: the others run without the race
		// detector, which slows the simulated cluster about 40-fold.
		pats = pats[3:]
	}
	rules := writeRules(t, "rules:\n  - name: default\n    limit: 600\n    window: 60s\n    slices: 12\n")
	for _, p := range pats {
		var trace strings.Builder
		for i, at := range p.At() {
			fmt.Fprintf(&trace, "%d client-%d\n", at, i%3)
		}
		for _, nodes := range []string{"0", "8"} {
			t.Run(p.Name+"/nodes "+nodes, func(t *testing.T) {
				code, plain, stderr := runCmd(t, trace.String(), "replay", "--nodes", nodes)
				if code != exitOK {
					t.Fatalf("plain replay: exit %d, %s", code, stderr)
				}
				code, whatif, stderr := runCmd(t, trace.String(), "replay", "--nodes", nodes, "--rules", rules)
				if code != exitOK {
					t.Fatalf("what-if: exit %d, %s", code, stderr)
				}
				var accepted, rejected string
				for _, line := range strings.Split(plain, "\n") {
					if v, ok := strings.CutPrefix(line, "# accepted "); ok {
						accepted = v
					}
					if v, ok := strings.CutPrefix(line, "# rejected "); ok {
						rejected = v
					}
				}
				var row []string
				for _, line := range strings.Split(whatif, "\n") {
					if strings.HasPrefix(line, "default ") {
						row = strings.Fields(line)
					}
				}
				// rule mode match limits requests allowed rejected ...
				if len(row) < 7 || row[5] != accepted || row[6] != rejected {
					t.Errorf("what-if row %v; the plain replay accepted %s and rejected %s", row, accepted, rejected)
				}
			})
		}
	}
}

func TestWhatifCommandLine(t *testing.T) {
	rules := writeRules(t, whatifRules)
	bad := writeRules(t, "rules:\n  - name: x\n    limt: 5\n")
	tests := []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdoutHas string
		stderrHas string
	}{
		{name: "top without rules", args: []string{"replay", "--top", "3"}, code: exitUsage, stderrHas: "--top needs --rules"},
		{name: "limit with rules", args: []string{"replay", "--rules", rules, "--limit", "5"}, code: exitUsage, stderrHas: "--limit does not go with --rules"},
		{name: "window with rules", args: []string{"replay", "--rules", rules, "--window", "5s"}, code: exitUsage, stderrHas: "--window does not go with --rules"},
		{name: "negative top", args: []string{"replay", "--rules", rules, "--top", "-1"}, code: exitUsage, stderrHas: "--top must not be negative"},
		{name: "too many nodes", args: []string{"replay", "--rules", rules, "--nodes", "5000"}, code: exitUsage, stderrHas: "nodes must be between 1 and 4096"},
		{name: "sync without nodes", args: []string{"replay", "--rules", rules, "--sync", "1s"}, code: exitUsage, stderrHas: "--sync needs --nodes"},
		{name: "missing rule file", args: []string{"replay", "--rules", filepath.Join(t.TempDir(), "none.yaml")}, code: exitRuntime, stderrHas: "none.yaml"},
		{name: "invalid rule file", args: []string{"replay", "--rules", bad}, code: exitRuntime, stderrHas: "limiter: invalid rules"},
		{name: "bad line", args: []string{"replay", "--rules", rules}, stdin: "0 a\n1 b c\n", code: exitRuntime, stderrHas: "trace line 2: want \"TIME KEY\", got 3 fields"},
		{name: "node index", args: []string{"replay", "--rules", rules, "--nodes", "2"}, stdin: "0 api:a 1\n", code: exitOK, stdoutHas: "on 2 simulated nodes"},
		{name: "empty log", args: []string{"replay", "--rules", rules}, code: exitOK, stdoutHas: "what-if replay: 0 requests, 0 keys\n"},
		{name: "nothing rejected", args: []string{"replay", "--rules", rules}, stdin: "0 api:a\n", code: exitOK, stdoutHas: "\nno rule rejected or would have rejected any request\n"},
		{name: "help", args: []string{"replay", "-h"}, code: exitOK, stdoutHas: "-rules FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.stdin, tt.args...)
			if code != tt.code {
				t.Errorf("exit code %d, want %d\nstdout: %s\nstderr: %s", code, tt.code, stdout, stderr)
			}
			checkHas(t, "stdout", stdout, tt.stdoutHas)
			checkHas(t, "stderr", stderr, tt.stderrHas)
		})
	}
}

// TestWhatifDeterministic runs the example twice on the cluster: keys are
// kept in maps, and the report must not depend on their order.
func TestWhatifDeterministic(t *testing.T) {
	args := []string{"replay", "--trace", filepath.Join("testdata", "whatif", "access.log"),
		"--rules", filepath.Join("testdata", "whatif", "rules-proposed.yaml"), "--nodes", "3", "--decisions"}
	_, a, _ := runCmd(t, "", args...)
	_, b, _ := runCmd(t, "", args...)
	if a != b || !strings.Contains(a, "what-if replay: 6098 requests") {
		t.Errorf("two runs differ or failed:\n%.300s\n%.300s", a, b)
	}
}

// Example_whatif replays a small access log with RFC 3339 times against a
// rule file: one key per second for anonymous clients, and a shadow rule
// that tries a limit on API keys.
func Example_whatif() {
	dir, err := os.MkdirTemp("", "whatif")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	rules := filepath.Join(dir, "rules.yaml")
	yaml := "rules:\n" +
		"  - {name: api, match: \"api:*\", limit: 1, window: 1s, shadow: true}\n" +
		"  - {name: default, limit: 1, window: 1s}\n"
	if err := os.WriteFile(rules, []byte(yaml), 0o644); err != nil {
		panic(err)
	}
	log := `2026-07-28T09:00:00.000Z 192.0.2.1
2026-07-28T09:00:00.300Z 192.0.2.1
2026-07-28T09:00:00.400Z api:k1
2026-07-28T09:00:00.500Z api:k1
2026-07-28T09:00:01.000Z 192.0.2.1
`
	run([]string{"replay", "--rules", rules, "--decisions"}, strings.NewReader(log), os.Stdout, os.Stderr)
	// Output:
	// 2026-07-28T09:00:00.000Z 192.0.2.1 default allow
	// 2026-07-28T09:00:00.300Z 192.0.2.1 default deny
	// 2026-07-28T09:00:00.400Z api:k1 api allow
	// 2026-07-28T09:00:00.500Z api:k1 api shadow-deny
	// 2026-07-28T09:00:01.000Z 192.0.2.1 default allow
	// what-if replay: 5 requests, 2 keys, 2026-07-28T09:00:00.000Z to 2026-07-28T09:00:01.000Z (1s)
	// on one node
	//
	// rule       mode       match      limits  requests  allowed  rejected  would reject  keys  keys rejected
	// api        shadow     api:*      1/1s           2        2         -             1     1              1
	// default    enforce    (default)  1/1s           3        2         1             -     1              1
	// (no rule)  unlimited  -          -              0        0         -             -     0              -
	// total                                           5        4         1             1     2              2
	//
	// rule api (shadow) would have rejected 1 of 2 requests (50.0%), from 1 of 1 keys
	// key     requests  would reject  share  first would-be rejection
	// api:k1         2             1  50.0%  2026-07-28T09:00:00.500Z
	//
	// rule default rejected 1 of 3 requests (33.3%), from 1 of 1 keys
	// key        requests  rejected  share  first rejection
	// 192.0.2.1         3         1  33.3%  2026-07-28T09:00:00.300Z
}
