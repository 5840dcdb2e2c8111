package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// fakeResolver answers for a few names and fails for the rest.
func fakeResolver(host string) ([]string, error) {
	switch host {
	case "localhost":
		return []string{"127.0.0.1", "::1"}, nil
	case "mixed.example":
		return []string{"127.0.0.1", "192.0.2.1"}, nil
	case "remote.example":
		return []string{"192.0.2.7"}, nil
	case "nothing.example":
		return []string{"not-an-ip"}, nil
	}
	return nil, errors.New("no such host")
}

func TestLoopbackGuard(t *testing.T) {
	tests := []struct {
		target      string
		allowRemote bool
		want        string // resolved target, or "" for an error
		remote      bool   // the error is ErrRemoteTarget
	}{
		{"127.0.0.1:8080", false, "127.0.0.1:8080", false},
		{"127.3.2.1:1", false, "127.3.2.1:1", false},
		{"[::1]:8080", false, "[::1]:8080", false},
		{"[::ffff:127.0.0.1]:80", false, "127.0.0.1:80", false},
		{"http://127.0.0.1:8081/", false, "127.0.0.1:8081", false},
		{"localhost:9", false, "127.0.0.1:9", false},
		{"10.0.0.1:8080", false, "", true},
		{"[2001:db8::1]:80", false, "", true},
		{"0.0.0.0:8080", false, "", true},
		{"128.0.0.1:8080", false, "", true},
		{"mixed.example:80", false, "", true},
		{"remote.example:80", false, "", true},
		{"10.0.0.1:8080", true, "10.0.0.1:8080", false},
		{"remote.example:80", true, "192.0.2.7:80", false},
		{"https://127.0.0.1:443", false, "", false},
		{"127.0.0.1", false, "", false},
		{"127.0.0.1:0", false, "", false},
		{"127.0.0.1:65536", false, "", false},
		{"127.0.0.1:http", false, "", false},
		{":8080", false, "", false},
		{"unknown.example:80", false, "", false},
		{"nothing.example:80", false, "", false},
	}
	for _, tt := range tests {
		got, err := resolveTarget(tt.target, tt.allowRemote, fakeResolver)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%q (allow remote %v): %q, %v; want %q", tt.target, tt.allowRemote, got, err, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("%q (allow remote %v): accepted as %q, want an error", tt.target, tt.allowRemote, got)
		case tt.want == "" && errors.Is(err, ErrRemoteTarget) != tt.remote:
			t.Errorf("%q: error %v, remote guard %v", tt.target, err, tt.remote)
		}
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int    // exit code when parsing stops
		errText string // in stderr when it stops with exitUsage
		check   func(*Config) string
	}{
		{name: "defaults", args: nil, check: func(c *Config) string {
			if c.Pattern != patternSteady || c.Duration != 3*time.Minute || c.Targets[0] != "127.0.0.1:8080" {
				return "unexpected defaults"
			}
			return ""
		}},
		{name: "two dashes and a list", args: []string{"--targets", "127.0.0.1:1, 127.0.0.2:2,", "--pattern", "edge-burst", "--window", "10s"}, check: func(c *Config) string {
			if len(c.Targets) != 2 || c.Targets[1] != "127.0.0.2:2" || c.Window != 10*time.Second || c.Duration != 30*time.Second {
				return "targets or window not taken"
			}
			return ""
		}},
		{name: "random rate from factor", args: []string{"--pattern", "random", "--factor", "3", "--limit", "60", "--window", "10s"}, check: func(c *Config) string {
			if c.Rate != 18 {
				return "random's rate is not factor x limit rate"
			}
			return ""
		}},
		{name: "keys default duration", args: []string{"--pattern", "keys", "--rate", "100"}, check: func(c *Config) string {
			if c.Duration != time.Minute || c.Keys != 200_000 {
				return "keys defaults"
			}
			return ""
		}},
		{name: "help", args: []string{"-h"}, code: exitOK},
		{name: "remote", args: []string{"--targets", "192.0.2.1:80"}, code: exitUsage, errText: "--allow-remote"},
		{name: "unknown flag", args: []string{"--nope"}, code: exitUsage, errText: "flag provided but not defined"},
		{name: "argument", args: []string{"extra"}, code: exitUsage, errText: `unexpected argument "extra"`},
		{name: "no targets", args: []string{"--targets", " , "}, code: exitUsage, errText: "--targets"},
		{name: "bad pattern", args: []string{"--pattern", "sine"}, code: exitUsage, errText: "--pattern"},
		{name: "bad spread", args: []string{"--spread", "hash"}, code: exitUsage, errText: "--spread"},
		{name: "bad client", args: []string{"--client", "curl"}, code: exitUsage, errText: "--client"},
		{name: "zero limit", args: []string{"--limit", "0"}, code: exitUsage, errText: "--limit"},
		{name: "sub-ms window", args: []string{"--window", "1500us"}, code: exitUsage, errText: "--window"},
		{name: "zero factor", args: []string{"--factor", "0"}, code: exitUsage, errText: "--factor"},
		{name: "NaN factor", args: []string{"--factor", "NaN"}, code: exitUsage, errText: "--factor"},
		{name: "negative rate", args: []string{"--rate", "-1"}, code: exitUsage, errText: "--rate"},
		{name: "keys without rate", args: []string{"--pattern", "keys"}, code: exitUsage, errText: "--rate"},
		{name: "zero keys", args: []string{"--pattern", "keys", "--rate", "10", "--keys", "0"}, code: exitUsage, errText: "--keys"},
		{name: "flat zipf", args: []string{"--pattern", "keys", "--rate", "10", "--zipf-s", "1"}, code: exitUsage, errText: "--zipf-s"},
		{name: "too many requests", args: []string{"--pattern", "keys", "--rate", "1000000", "--duration", "1h"}, code: exitUsage, errText: "requests"},
		{name: "zero conns", args: []string{"--conns", "0"}, code: exitUsage, errText: "--conns"},
		{name: "zero timeout", args: []string{"--timeout", "0s"}, code: exitUsage, errText: "--timeout"},
		{name: "negative duration", args: []string{"--duration", "-1s"}, code: exitUsage, errText: "--duration"},
		{name: "negative phase", args: []string{"--phase", "-1s"}, code: exitUsage, errText: "--phase"},
		{name: "zero worst", args: []string{"--worst", "0"}, code: exitUsage, errText: "--worst"},
		{name: "zero max-log", args: []string{"--max-log", "0"}, code: exitUsage, errText: "--max-log"},
		{name: "space in key", args: []string{"--key", "a b"}, code: exitUsage, errText: "--key"},
		{name: "control in prefix", args: []string{"--key-prefix", "a\x01"}, code: exitUsage, errText: "--key-prefix"},
		{name: "space in run id", args: []string{"--run-id", "a b"}, code: exitUsage, errText: "--run-id"},
		{name: "dry run without targets", args: []string{"--dry-run", "--targets", ""}, check: func(c *Config) string {
			if len(c.Targets) != 0 {
				return "targets appeared"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			cfg, runID, code, ok := parseFlags(tt.args, &out, &errb, fakeResolver)
			if tt.check != nil {
				if !ok {
					t.Fatalf("stopped with %d: %s", code, errb.String())
				}
				if runID == "" {
					t.Error("no run id")
				}
				if msg := tt.check(cfg); msg != "" {
					t.Errorf("%s: %+v", msg, cfg)
				}
				return
			}
			if ok || code != tt.code {
				t.Fatalf("ok %v code %d, want stop with %d (stderr %q)", ok, code, tt.code, errb.String())
			}
			if tt.code == exitOK && !strings.Contains(out.String(), "Usage: limitload") {
				t.Errorf("help not on stdout: %q", out.String())
			}
			if tt.code == exitUsage {
				msg := errb.String()
				if !strings.Contains(msg, tt.errText) || !strings.HasPrefix(msg, "limitload: ") || strings.HasPrefix(msg, "limitload: limitload") {
					t.Errorf("stderr %q, want one line naming %q", msg, tt.errText)
				}
			}
		})
	}
}
