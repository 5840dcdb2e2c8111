package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/loadgen"
	"github.com/limiterd/limiterd/internal/nodetest"
)

const rules20 = `
rules:
  - name: default
    limit: 20
    window: 1s
`

// TestRunAgainstLimiter drives the real /check handler on 127.0.0.1 with a
// client at twice its limit for one window, through both clients, and
// checks the report against what one node guarantees: every request
// answered, at least the limit accepted (a client is never refused below
// it), at most 1.1 x the limit in any window, no false rejection.
func TestRunAgainstLimiter(t *testing.T) {
	srv := nodetest.Serve(t, rules20)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, client := range []string{loadgen.ClientRaw, loadgen.ClientHTTP} {
		t.Run(client, func(t *testing.T) {
			var out, errb bytes.Buffer
			trace := filepath.Join(t.TempDir(), "trace")
			args := []string{"--targets", addr + "," + addr, "--spread", "round-robin", "--client", client,
				"--pattern", "steady", "--factor", "2", "--limit", "20", "--window", "1s", "--duration", "1s",
				"--conns", "4", "--progress", "200ms", "--json", "--trace-out", trace}
			cfg, runID, code, ok := parseFlags(args, &out, &errb, noLookup)
			if !ok {
				t.Fatalf("flags: %d %s", code, errb.String())
			}
			if code := execute(context.Background(), cfg, runID, &out, &errb); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var r loadgen.Report
			if err := json.Unmarshal(out.Bytes(), &r); err != nil {
				t.Fatalf("%v: %s", err, out.String())
			}
			a := r.Accuracy
			if r.Scheduled != 40 || r.Answered != 40 || r.Status["200"]+r.Status["429"] != 40 || r.Interrupted {
				t.Errorf("scheduled %d answered %d status %v interrupted %v", r.Scheduled, r.Answered, r.Status, r.Interrupted)
			}
			if r.Status["200"] < 20 || a.MaxInWindow < 20 || a.MaxRatio > 1.1 || a.FalseRejections != 0 || a.Keys != 1 {
				t.Errorf("accuracy %+v with status %v", a, r.Status)
			}
			if r.Latency.P50 <= 0 || r.Latency.Max < r.Latency.P99 || r.Analysed != 40 {
				t.Errorf("latency %+v analysed %d", r.Latency, r.Analysed)
			}
			if !strings.Contains(errb.String(), "limitload: ") {
				t.Errorf("no progress line on stderr: %q", errb.String())
			}
			b, err := os.ReadFile(trace)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) != 41 || !strings.HasPrefix(lines[0], "# ") {
				t.Fatalf("trace has %d lines, want a comment and 40", len(lines))
			}
			for _, l := range lines[1:] {
				if f := strings.Fields(l); len(f) != 3 || f[1] != a.Worst[0].Key || (f[2] != "0" && f[2] != "1") {
					t.Fatalf("trace line %q", l)
				}
			}
		})
	}
}

// TestInterrupt cancels the run (as Ctrl-C does) once the server has seen
// ten requests: the run stops early, reports what was answered and exits
// with 130.
func TestInterrupt(t *testing.T) {
	srv := nodetest.Serve(t, rules20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen atomic.Int64
	wrapped := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if seen.Add(1) == 10 {
			cancel()
		}
		srv.Config.Handler.ServeHTTP(w, r)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go wrapped.Serve(ln)
	defer wrapped.Close()

	var out, errb bytes.Buffer
	args := []string{"--targets", ln.Addr().String(), "--pattern", "steady", "--factor", "10", "--limit", "20", "--window", "1s",
		"--duration", "20s", "--progress", "0", "--preflight=false"}
	cfg, runID, _, ok := parseFlags(args, &out, &errb, noLookup)
	if !ok {
		t.Fatal(errb.String())
	}
	if code := execute(ctx, cfg, runID, &out, &errb); code != exitInterrupted {
		t.Fatalf("exit %d, want %d: %s", code, exitInterrupted, errb.String())
	}
	text := out.String()
	if !strings.Contains(text, "INTERRUPTED") || !strings.Contains(text, "accuracy") {
		t.Errorf("partial report:\n%s", text)
	}
	if n := seen.Load(); n >= 4000 {
		t.Errorf("the server saw %d requests: the run did not stop", n)
	}
}

// TestDryRun prints the seed's schedule without sending anything.
func TestDryRun(t *testing.T) {
	var out, errb bytes.Buffer
	cfg, runID, _, ok := parseFlags([]string{"--dry-run", "--pattern", "intermittent", "--targets", "127.0.0.1:1,127.0.0.1:2",
		"--spread", "lcg", "--run-id", "x"}, &out, &errb, noLookup)
	if !ok {
		t.Fatal(errb.String())
	}
	if code := execute(context.Background(), cfg, runID, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 1801 || lines[1] != "0 limitload-intermittent-x 0" || lines[1800] != "124991 limitload-intermittent-x 1" {
		t.Errorf("%d lines, first %q, last %q", len(lines), lines[1], lines[len(lines)-1])
	}
}

// TestCutAtDeadline: against a server slower than the schedule, the run
// stops at --duration + --timeout and reports what it left unsent.
func TestCutAtDeadline(t *testing.T) {
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(100 * time.Millisecond):
		}
		w.WriteHeader(429)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	defer close(release)

	var out, errb bytes.Buffer
	// 200 requests in 400 ms on one connection that takes 100 ms each.
	args := []string{"--targets", ln.Addr().String(), "--pattern", "steady", "--factor", "5", "--limit", "100", "--window", "1s",
		"--duration", "400ms", "--timeout", "300ms", "--conns", "1", "--progress", "0", "--preflight=false", "--json"}
	cfg, runID, _, ok := parseFlags(args, &out, &errb, noLookup)
	if !ok {
		t.Fatal(errb.String())
	}
	if code := execute(context.Background(), cfg, runID, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r loadgen.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Cut || r.Scheduled != 200 || r.Unsent == 0 || r.Answered+r.Unsent != 200 || r.Interrupted || r.Analysed != r.Answered {
		t.Errorf("cut %v scheduled %d answered %d unsent %d analysed %d", r.Cut, r.Scheduled, r.Answered, r.Unsent, r.Analysed)
	}
}

// noLookup resolves no host name: the tests' targets are addresses.
func noLookup(host string) ([]string, error) {
	return nil, fmt.Errorf("no lookup of %q in the tests", host)
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		code    int    // exit code when parsing stops
		errText string // in stderr when it stops with exitUsage
		check   func(*loadgen.Config) string
	}{
		{name: "defaults", args: nil, check: func(c *loadgen.Config) string {
			if c.Pattern != loadgen.PatternSteady || c.Duration != 3*time.Minute || c.Targets[0] != "127.0.0.1:8080" {
				return "unexpected defaults"
			}
			return ""
		}},
		{name: "two dashes and a list", args: []string{"--targets", "127.0.0.1:1, 127.0.0.2:2,", "--pattern", "edge-burst", "--window", "10s"}, check: func(c *loadgen.Config) string {
			if len(c.Targets) != 2 || c.Targets[1] != "127.0.0.2:2" || c.Window != 10*time.Second || c.Duration != 30*time.Second {
				return "targets or window not taken"
			}
			return ""
		}},
		{name: "random rate from factor", args: []string{"--pattern", "random", "--factor", "3", "--limit", "60", "--window", "10s"}, check: func(c *loadgen.Config) string {
			if c.Rate != 18 {
				return "random's rate is not factor x limit rate"
			}
			return ""
		}},
		{name: "keys default duration", args: []string{"--pattern", "keys", "--rate", "100"}, check: func(c *loadgen.Config) string {
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
		{name: "dry run without targets", args: []string{"--dry-run", "--targets", ""}, check: func(c *loadgen.Config) string {
			if len(c.Targets) != 0 {
				return "targets appeared"
			}
			return ""
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			cfg, runID, code, ok := parseFlags(tt.args, &out, &errb, noLookup)
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

func TestFloodUsage(t *testing.T) {
	for _, args := range [][]string{{"-per-call", "65"}, {"-keys", "0"}, {"-conns", "0"}, {"extra"}, {"-max-duration", "0s"}, {"-target", "192.0.2.1:8081"}} {
		var out, errb bytes.Buffer
		if code := floodMain(context.Background(), args, &out, &errb); code != exitUsage || errb.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, errb.String())
		}
	}
}
