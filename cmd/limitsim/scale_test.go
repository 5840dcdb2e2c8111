package main

import (
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
		{"listed", []string{"-h"}, exitOK, "  scale ", ""},
		{"bad list", []string{"scale", "--nodes", "8,x"}, exitUsage, "", `"x" is not a cluster size`},
		{"one node", []string{"scale", "--nodes", "1,8"}, exitUsage, "", "cluster sizes must be between 2 and 256, got 1"},
		{"empty list", []string{"scale", "--nodes", ""}, exitUsage, "", `"" is not a cluster size`},
		{"no keys", []string{"scale", "--keys", "0"}, exitUsage, "", "keys must be between"},
		{"no rate", []string{"scale", "--rate", "0"}, exitUsage, "", "rate must be between"},
		{"negative per node", []string{"scale", "--rate-per-node", "-1"}, exitUsage, "", "rate per node must be between"},
		{"both rates", []string{"scale", "--rate", "100", "--rate-per-node", "10"}, exitUsage, "", "not both"},
		{"no seconds", []string{"scale", "--seconds", "0"}, exitUsage, "", "seconds must be between"},
		{"odd warm-up", []string{"scale", "--warmup", "150ms"}, exitUsage, "", "multiple of the sync interval"},
		{"big seed", []string{"scale", "--seed", "4294967296"}, exitUsage, "", "--seed must be at most 4294967295"},
		{"argument", []string{"scale", "extra"}, exitUsage, "", `unexpected argument "extra"`},
		{"small run", []string{"scale", "--nodes", "2,3", "--keys", "100", "--rate", "50", "--seconds", "1", "--warmup", "1s"}, exitOK,
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
