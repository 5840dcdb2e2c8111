package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
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
	srv := newLimiterServer(t, rules20)
	addr := strings.TrimPrefix(srv.URL, "http://")
	for _, client := range []string{clientRaw, clientHTTP} {
		t.Run(client, func(t *testing.T) {
			var out, errb bytes.Buffer
			trace := filepath.Join(t.TempDir(), "trace")
			args := []string{"--targets", addr + "," + addr, "--spread", "round-robin", "--client", client,
				"--pattern", "steady", "--factor", "2", "--limit", "20", "--window", "1s", "--duration", "1s",
				"--conns", "4", "--progress", "200ms", "--json", "--trace-out", trace}
			cfg, runID, code, ok := parseFlags(args, &out, &errb, fakeResolver)
			if !ok {
				t.Fatalf("flags: %d %s", code, errb.String())
			}
			if code := execute(context.Background(), cfg, runID, &out, &errb); code != exitOK {
				t.Fatalf("exit %d: %s", code, errb.String())
			}
			var r Report
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
	srv := newLimiterServer(t, rules20)
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
	cfg, runID, _, ok := parseFlags(args, &out, &errb, fakeResolver)
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

// TestRawSenderRetriesStaleConnection: a server that closes a keep-alive
// connection after each answer (without saying so) costs a reconnect, not
// an error.
func TestRawSenderRetriesStaleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			served.Add(1)
			c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	cfg := DefaultConfig()
	s := newRawSender(ln.Addr().String(), checkPathPrefix(""), newKeyNamer(&cfg, "r"), 2*time.Second)
	defer s.close()
	for i := range 5 {
		if i > 0 {
			// Let the server's close reach us before the next request, as
			// an idle keep-alive timeout would: then it is a stale connection.
			for range 100 {
				if served.Load() == int64(i) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r, err := s.do(0)
		if err != nil || r.status != 429 {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
	}
}

// TestDryRun prints the seed's schedule without sending anything.
func TestDryRun(t *testing.T) {
	var out, errb bytes.Buffer
	cfg, runID, _, ok := parseFlags([]string{"--dry-run", "--pattern", "intermittent", "--targets", "127.0.0.1:1,127.0.0.1:2",
		"--spread", "lcg", "--run-id", "x"}, &out, &errb, fakeResolver)
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
	cfg, runID, _, ok := parseFlags(args, &out, &errb, fakeResolver)
	if !ok {
		t.Fatal(errb.String())
	}
	if code := execute(context.Background(), cfg, runID, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var r Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatal(err)
	}
	if !r.Cut || r.Scheduled != 200 || r.Unsent == 0 || r.Answered+r.Unsent != 200 || r.Interrupted || r.Analysed != r.Answered {
		t.Errorf("cut %v scheduled %d answered %d unsent %d analysed %d", r.Cut, r.Scheduled, r.Answered, r.Unsent, r.Analysed)
	}
}
