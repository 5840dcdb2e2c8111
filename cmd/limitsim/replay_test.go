package main

import (
	"bufio"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/replay"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// TestReplayGolden replays the traces under testdata and compares the whole
// output with testdata/NAME.golden.
func TestReplayGolden(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{"replay_basic", []string{"--limit", "3", "--window", "1s", "--slices", "2", "--decisions"}},
		{"replay_tolerance", []string{"--limit", "10", "--window", "1000ms", "--slices", "2", "--decisions"}},
		{"replay_summary", []string{"--limit", "2", "--window", "10ms", "--slices", "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := append([]string{"replay", "--trace", filepath.Join("testdata", tt.name+".trace")}, tt.args...)
			code, stdout, stderr := runCmd(t, "", args...)
			if code != exitOK || stderr != "" {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			checkGolden(t, tt.name+".golden", []byte(stdout))
		})
	}
}

// parseSummary reads the "# NAME VALUE" lines of a replay's output, checking
// that they come after every decision line and in the documented order.
func parseSummary(t *testing.T, out string) (decisions []string, summary map[string]string) {
	t.Helper()
	order := []string{"requests", "accepted", "rejected", "untracked", "keys", "limit", "window_ms",
		"slices", "max_in_window", "max_in_window_key", "max_in_window_ratio"}
	summary = make(map[string]string)
	var names []string
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "# "), " ")
		if !strings.HasPrefix(line, "# ") {
			if len(names) > 0 {
				t.Fatalf("decision line %q after the summary", line)
			}
			decisions = append(decisions, line)
			continue
		}
		if !ok {
			t.Fatalf("summary line %q is not \"# NAME VALUE\"", line)
		}
		names = append(names, name)
		summary[name] = value
	}
	if strings.Join(names, " ") != strings.Join(order, " ") {
		t.Fatalf("summary names %v, want %v", names, order)
	}
	return decisions, summary
}

// seedRows runs the seed table once and returns limiterd's row of each
// pattern, by pattern name.
func seedRows(t *testing.T) map[string]seedstudy.Row {
	t.Helper()
	blocks, err := seedstudy.Table()
	if err != nil {
		t.Fatal(err)
	}
	m := make(map[string]seedstudy.Row)
	for _, b := range blocks {
		for _, r := range b.Rows {
			if r.Algorithm == "limiterd" {
				m[b.Pattern.Name] = r
			}
		}
	}
	return m
}

// TestReplayMatchesSeed is the exactness test: replaying a seed pattern as a
// trace with the seed's limit gives limiterd's row of the seed table.
func TestReplayMatchesSeed(t *testing.T) {
	rows := seedRows(t)
	for _, p := range seedstudy.Patterns() {
		t.Run(p.Name, func(t *testing.T) {
			var trace strings.Builder
			for _, at := range p.At() {
				fmt.Fprintf(&trace, "%d client\n", at)
			}
			code, stdout, stderr := runCmd(t, trace.String(), "replay", "--limit", "600", "--window", "60s", "--slices", "12")
			if code != exitOK {
				t.Fatalf("exit %d, stderr %q", code, stderr)
			}
			_, s := parseSummary(t, stdout)
			want := rows[p.Name]
			wantRatio := strconv.FormatFloat(want.Ratio, 'f', 3, 64)
			if s["accepted"] != strconv.Itoa(want.Accepted) || s["rejected"] != strconv.Itoa(want.Rejected) ||
				s["max_in_window"] != strconv.Itoa(want.Max60) || s["max_in_window_ratio"] != wantRatio {
				t.Errorf("replay: accepted %s, rejected %s, max %s, ratio %s; seed table: %d, %d, %d, %s",
					s["accepted"], s["rejected"], s["max_in_window"], s["max_in_window_ratio"],
					want.Accepted, want.Rejected, want.Max60, wantRatio)
			}
			if s["keys"] != "1" || s["max_in_window_key"] != "client" {
				t.Errorf("keys %s, busiest key %s; want 1 and client", s["keys"], s["max_in_window_key"])
			}
		})
	}
}

// TestReplayDecisionsAgreeWithSummary checks, on a trace of several keys,
// that the decision lines echo the input in order and add up to the summary.
func TestReplayDecisionsAgreeWithSummary(t *testing.T) {
	var trace strings.Builder
	var in []string
	for i := range 300 {
		line := fmt.Sprintf("%d key-%d", i/6*3, i%4) // 75 a key within 150 ms
		in = append(in, line)
		fmt.Fprintln(&trace, line)
	}
	code, stdout, stderr := runCmd(t, trace.String(), "replay", "--limit", "20", "--window", "100ms", "--slices", "4", "--decisions")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	decisions, s := parseSummary(t, stdout)
	if len(decisions) != len(in) {
		t.Fatalf("%d decision lines for %d requests", len(decisions), len(in))
	}
	allow := 0
	for i, d := range decisions {
		switch d {
		case in[i] + " allow":
			allow++
		case in[i] + " deny":
		default:
			t.Fatalf("decision %d is %q; want %q followed by allow or deny", i, d, in[i])
		}
	}
	if s["requests"] != "300" || s["accepted"] != strconv.Itoa(allow) || s["rejected"] != strconv.Itoa(300-allow) || s["keys"] != "4" {
		t.Errorf("summary %v does not match %d allows of 300 requests over 4 keys", s, allow)
	}
	if allow == 0 || allow == 300 {
		t.Errorf("%d allows: the trace should exercise both verdicts", allow)
	}
}

// TestReplayTraceErrors checks that every kind of malformed trace is a
// runtime error naming the right line, and that nothing is summarised.
func TestReplayTraceErrors(t *testing.T) {
	tests := []struct {
		name  string
		trace string
		want  string // the whole error line on stderr
	}{
		{"letters", "0 a\nx b\n", `trace line 2: time "x" is not a non-negative decimal integer`},
		{"negative", "-1 a\n", `trace line 1: time "-1" is not a non-negative decimal integer`},
		{"plus sign", "# c\n+1 a\n", `trace line 2: time "+1" is not a non-negative decimal integer`},
		{"fraction", "1.5 a\n", `trace line 1: time "1.5" is not a non-negative decimal integer`},
		{"backwards", "5 a\n\n4 a\n", "trace line 3: time 4 is before the previous line's 5"},
		{"no key", "0 a\n1\n", `trace line 2: want "TIME_MS KEY", got 1 fields`},
		{"space in key", "1 a b\n", `trace line 1: want "TIME_MS KEY", got 3 fields`},
		{"past 2^53", "9007199254740992 a\n", `trace line 1: time "9007199254740992" is above the largest allowed, 9007199254740991`},
		{"past int64", "99999999999999999999 a\n", `trace line 1: time "99999999999999999999" is above the largest allowed, 9007199254740991`},
		{"bad utf-8", "1 a\xffb\n", `trace line 1: key "a\xffb" is not valid UTF-8`},
		{"too long", "0 a\n1 " + strings.Repeat("k", replay.MaxLineBytes) + "\n", fmt.Sprintf("trace line 2: longer than %d bytes", replay.MaxLineBytes)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(t, tt.trace, "replay")
			if code != exitRuntime {
				t.Errorf("exit %d, want %d", code, exitRuntime)
			}
			if want := "limitsim replay: " + tt.want + "\n"; stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			if strings.Contains(stdout, "# requests") {
				t.Errorf("a summary was printed for a malformed trace:\n%s", stdout)
			}
		})
	}
}
