package main

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// checkGolden compares got with testdata/name, or rewrites it with -update.
func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

// runCmd runs the command line args with stdin and returns its exit code
// and outputs.
func runCmd(t *testing.T, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(args, strings.NewReader(stdin), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestRunCommandLine(t *testing.T) {
	tests := []struct {
		name      string
		args      []string
		stdin     string
		code      int
		stdoutHas string // "" means stdout must be empty
		stderrHas string // "" means stderr must be empty
	}{
		{name: "no command", code: exitUsage, stderrHas: "no command given"},
		{name: "unknown command", args: []string{"frob"}, code: exitUsage, stderrHas: `unknown command "frob"`},
		{name: "unknown top flag", args: []string{"-x"}, code: exitUsage, stderrHas: "flag provided but not defined: -x"},
		{name: "top help", args: []string{"-h"}, code: exitOK, stdoutHas: "Commands:\n  seed"},
		{name: "help command", args: []string{"help"}, code: exitOK, stdoutHas: "  replay "},
		{name: "help seed", args: []string{"help", "seed"}, code: exitOK, stdoutHas: "Usage: limitsim seed"},
		{name: "help replay", args: []string{"help", "replay"}, code: exitOK, stdoutHas: "-decisions"},
		{name: "help unknown", args: []string{"help", "frob"}, code: exitUsage, stderrHas: `unknown command "frob"`},
		{name: "seed help", args: []string{"seed", "-h"}, code: exitOK, stdoutHas: "12-slice sliding"},
		{name: "seed argument", args: []string{"seed", "extra"}, code: exitUsage, stderrHas: `unexpected argument "extra"`},
		{name: "seed flag", args: []string{"seed", "--bogus"}, code: exitUsage, stderrHas: "not defined: -bogus"},
		{name: "replay help", args: []string{"replay", "--help"}, code: exitOK, stdoutHas: "max_in_window_ratio"},
		{name: "replay help cluster", args: []string{"replay", "-h"}, code: exitOK, stdoutHas: "-budget-floor F"},
		{name: "help burst", args: []string{"help", "burst"}, code: exitOK, stdoutHas: "Usage: limitsim burst"},
		{name: "burst argument", args: []string{"burst", "extra"}, code: exitUsage, stderrHas: `unexpected argument "extra"`},
		{name: "burst flag", args: []string{"burst", "--rates", "1"}, code: exitUsage, stderrHas: "not defined: -rates"},
		{name: "replay bad flag value", args: []string{"replay", "--limit", "many"}, code: exitUsage, stderrHas: `invalid value "many"`},
		{name: "replay zero limit", args: []string{"replay", "--limit", "0"}, code: exitUsage, stderrHas: "invalid limit"},
		{name: "replay fractional window", args: []string{"replay", "--window", "1.5ms", "--slices", "1"}, code: exitUsage, stderrHas: "whole number of milliseconds"},
		{name: "replay too many slices", args: []string{"replay", "--window", "10ms"}, code: exitUsage, stderrHas: "a slice must last at least 1ms"},
		{name: "replay positional", args: []string{"replay", "trace.txt"}, code: exitUsage, stderrHas: "--trace"},
		{name: "replay missing file", args: []string{"replay", "--trace", filepath.Join("testdata", "no-such.trace")}, code: exitRuntime, stderrHas: "no-such.trace"},
		{name: "replay bad line", args: []string{"replay"}, stdin: "0 a\nzero b\n", code: exitRuntime, stderrHas: "trace line 2:"},
		{name: "replay stdin dash", args: []string{"replay", "--trace", "-"}, stdin: "0 a\n", code: exitOK, stdoutHas: "# requests 1\n"},
		{name: "replay empty", args: []string{"replay"}, code: exitOK, stdoutHas: "# max_in_window_key -\n"},
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

func checkHas(t *testing.T, name, got, want string) {
	t.Helper()
	switch {
	case want == "" && got != "":
		t.Errorf("%s not empty: %q", name, got)
	case !strings.Contains(got, want):
		t.Errorf("%s = %q, want it to contain %q", name, got, want)
	}
}

// Example_replay replays a small trace: a limit of 2 per second.
func Example_replay() {
	trace := `# TIME_MS KEY
0    alice
10   alice
20   alice
500  bob
1000 alice
`
	run([]string{"replay", "--limit", "2", "--window", "1s", "--slices", "4", "--decisions"},
		strings.NewReader(trace), os.Stdout, os.Stderr)
	// Output:
	// 0 alice allow
	// 10 alice allow
	// 20 alice deny
	// 500 bob allow
	// 1000 alice allow
	// # requests 5
	// # accepted 4
	// # rejected 1
	// # untracked 0
	// # keys 2
	// # limit 2
	// # window_ms 1000
	// # slices 4
	// # max_in_window 2
	// # max_in_window_key alice
	// # max_in_window_ratio 1.000
}
