package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

func TestParseConfig(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }

	cfg, err := parseConfig(nil, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.httpAddr != "127.0.0.1:8080" || len(cfg.rulesPaths) != 1 || cfg.rulesPaths[0] != "testdata/rules.yaml" || cfg.keyHeader != "X-Forwarded-For" {
		t.Fatalf("defaults: %+v", cfg)
	}

	env["LIMITERD_HTTP_ADDR"] = "127.0.0.1:9999"
	env["LIMITERD_MAX_KEYS"] = "5000"
	cfg, err = parseConfig([]string{"-max-keys", "7000"}, getenv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.httpAddr != "127.0.0.1:9999" {
		t.Errorf("env LIMITERD_HTTP_ADDR ignored: %q", cfg.httpAddr)
	}
	if cfg.maxKeys != 7000 {
		t.Errorf("the command line must win over the environment: max-keys %d", cfg.maxKeys)
	}

	// -rules: repeated or comma-separated; the command line replaces the
	// environment's list, not adds to it.
	env["LIMITERD_RULES"] = "a.yaml,b.yaml"
	if cfg, err = parseConfig(nil, getenv, io.Discard); err != nil || strings.Join(cfg.rulesPaths, " ") != "a.yaml b.yaml" {
		t.Errorf("LIMITERD_RULES=a.yaml,b.yaml: %q %v", cfg.rulesPaths, err)
	}
	if cfg, err = parseConfig([]string{"-rules", "c.yaml", "-rules", "d.yaml,e.yaml"}, getenv, io.Discard); err != nil || strings.Join(cfg.rulesPaths, " ") != "c.yaml d.yaml e.yaml" {
		t.Errorf("-rules c.yaml -rules d.yaml,e.yaml: %q %v", cfg.rulesPaths, err)
	}
	delete(env, "LIMITERD_RULES")

	bad := []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"-rules", "a.yaml,"}, nil, "an empty file name"},
		{[]string{"-log-format", "xml"}, nil, "-log-format must be text or json"},
		{[]string{"-log-level", "loud"}, nil, "-log-level"},
		{[]string{"-shards", "3"}, nil, "Shards must be a power of two"},
		{[]string{"-max-keys", "0"}, nil, "MaxKeys must be at least 1"},
		{[]string{"-sweep-interval", "0s"}, nil, "-sweep-interval must be positive"},
		{[]string{"extra"}, nil, "unexpected arguments"},
		{nil, map[string]string{"LIMITERD_MAX_KEYS": "many"}, "LIMITERD_MAX_KEYS"},
		{[]string{"-no-such-flag"}, nil, "flag provided but not defined"},
	}
	for _, b := range bad {
		env := b.env
		_, err := parseConfig(b.args, func(k string) string { return env[k] }, io.Discard)
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("args %q env %v: err %v, want it to mention %q", b.args, b.env, err, b.want)
		}
	}
}

// TestHelpListsEveryFlag checks -h documents each flag with its env variable.
func TestHelpListsEveryFlag(t *testing.T) {
	var out bytes.Buffer
	_, err := parseConfig([]string{"-h"}, func(string) string { return "" }, &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err %v", err)
	}
	for _, name := range []string{"http-addr", "rules", "key-header", "max-keys", "shards", "sweep-interval", "shutdown-timeout", "log-level", "log-format", "pprof-addr", "admin-addr"} {
		if !strings.Contains(out.String(), "-"+name+" ") || !strings.Contains(out.String(), envName(name)) {
			t.Errorf("-h output lacks -%s or %s:\n%s", name, envName(name), out.String())
		}
	}
}

const rulesV1 = `rules:
  - name: default
    limit: 2
    window: 60s
`

const rulesV2 = `rules:
  - name: default
    limit: 3
    window: 60s
`

// startDaemon runs limiterd in-process on an ephemeral port with the given rules
// file (and extra flags) and returns its base URL and a stop function that
// waits for exit.
func startDaemon(t *testing.T, rules string, extra ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	var code int
	var wg sync.WaitGroup
	var stderr nodetest.LockedBuffer
	wg.Go(func() {
		code = run(ctx, append([]string{"-http-addr", "127.0.0.1:0", "-rules", rules, "-log-level", "debug"}, extra...),
			func(string) string { return "" }, &stderr, func(a string) { addrc <- a })
		close(addrc)
	})
	addr, ok := <-addrc
	if !ok {
		wg.Wait()
		t.Fatalf("limiterd did not start (exit %d):\n%s", code, stderr.String())
	}
	stopped := false
	stop := func() int {
		if !stopped {
			stopped = true
			cancel()
			wg.Wait()
		}
		return code
	}
	t.Cleanup(func() { stop() })
	return "http://" + addr, stop
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// getJSON gets url and decodes its 200 answer into v.
func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url)
	if err := json.Unmarshal([]byte(body), v); code != 200 || err != nil {
		t.Fatalf("%s: %d %s %v", url, code, body, err)
	}
}

// eventually polls cond for up to 10 s (a deadline for an event, not a
// timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	nodetest.Eventually(t, what, 10*time.Second, cond)
}

func TestServeChecksAndReloads(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(path, []byte(rulesV1), 0o644); err != nil {
		t.Fatal(err)
	}
	base, stop := startDaemon(t, path)

	for i, want := range []int{200, 200, 429} {
		if code, body := get(t, base+"/check?key=a"); code != want {
			t.Fatalf("check %d: %d %s, want %d", i, code, body, want)
		}
	}

	// A file change to a valid file applies: the limit becomes 3.
	if err := os.WriteFile(path, []byte(rulesV2), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reload on file change", func() bool {
		code, _ := get(t, base+"/check?key=probe-"+fmt.Sprint(time.Now().UnixNano()))
		_, m := get(t, base+"/metrics")
		return code == 200 && strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 1`)
	})
	if code, body := get(t, base+"/check?key=a"); code != 200 || !strings.Contains(body, `"limit":3`) {
		t.Fatalf("after reload, third check for a: %d %s; want 200 with limit 3 (counts kept)", code, body)
	}
	eventually(t, "the worst case gauge to follow the reload", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_worst_case_ratio{limit="3/60s",rule="default"} 1`+"\n") &&
			!strings.Contains(m, `limit="2/60s"`)
	})

	// An invalid file keeps the old rules and is counted.
	if err := os.WriteFile(path, []byte("rules:\n  - name: default\n    limit: -1\n    window: 60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "failed reload counted", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="failure"} 1`) &&
			strings.Contains(m, "limiterd_rules_last_reload_successful 0")
	})
	if code, body := get(t, base+"/check?key=a"); code != 429 || !strings.Contains(body, `"limit":3`) {
		t.Fatalf("old rules must keep running: %d %s", code, body)
	}

	// Putting the file in force back undoes the failure: the file on disk is
	// what runs again, without a reload.
	if err := os.WriteFile(path, []byte(rulesV2), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the reload gauge back to 1", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, "limiterd_rules_last_reload_successful 1") &&
			strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 1`)
	})

	// SIGHUP reloads even when the file is unchanged.
	if err := os.WriteFile(path, []byte(rulesV1), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reload back to v1", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 2`)
	})
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	eventually(t, "reload on SIGHUP", func() bool {
		_, m := get(t, base+"/metrics")
		return strings.Contains(m, `limiterd_rule_reloads_total{result="success"} 3`)
	})

	_, m := get(t, base+"/metrics")
	for _, name := range []string{"limiterd_tracked_keys", "limiterd_untracked_checks_total", "go_goroutines", "process_resident_memory_bytes", "limiterd_decisions_total", "limiterd_check_duration_seconds"} {
		if !strings.Contains(m, name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit code %d after graceful shutdown", code)
	}
}

func TestPprofListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rulesV1), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, stop := startDaemon(t, path, "-pprof-addr", addr)
	code, body := get(t, "http://"+addr+"/debug/pprof/")
	if code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("pprof index: %d %.200s", code, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestStartFailsOnInvalidRules(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte("rules:\n  - name: x\n    limit: 0\n    window: 1s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	code := run(context.Background(), []string{"-http-addr", "127.0.0.1:0", "-rules", path}, func(string) string { return "" }, &stderr, nil)
	if code != 1 || !strings.Contains(stderr.String(), "rules.yaml:3") {
		t.Fatalf("exit %d, stderr:\n%s\nwant exit 1 and the file:line of the bad field", code, stderr.String())
	}
}

// The defaults are valid, and validate reports every problem at once, each
// wrapping errInvalidConfig.
func TestConfigValidateReportsEveryProblem(t *testing.T) {
	if err := defaultConfig().validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	cfg := defaultConfig()
	cfg.logFormat, cfg.sweepInterval, cfg.keyHeader, cfg.shards = "xml", 0, "Bad Header", 3
	err := cfg.validate()
	var joined interface{ Unwrap() []error }
	if !errors.As(err, &joined) || len(joined.Unwrap()) != 4 {
		t.Fatalf("validate: %v, want 4 problems", err)
	}
	for i, e := range joined.Unwrap() {
		if !errors.Is(e, errInvalidConfig) {
			t.Errorf("problem %d, %v, does not wrap errInvalidConfig", i, e)
		}
	}
	for _, want := range []string{"-log-format", "-sweep-interval", `-key-header: httpapi: invalid config: KeyHeader "Bad Header"`, "Shards must be a power of two"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("validate: %v\nwant it to mention %q", err, want)
		}
	}
}
