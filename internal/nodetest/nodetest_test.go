package nodetest

import (
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServe: an in-process node answers /check as limiterd does, within
// its rule and past it.
func TestServe(t *testing.T) {
	srv := Serve(t, "rules:\n  - name: default\n    limit: 1\n    window: 60s\n")
	for i, want := range []int{http.StatusOK, http.StatusTooManyRequests} {
		code, body, err := Get(srv.Client(), srv.URL+"/check?key=k")
		if err != nil || code != want || !strings.Contains(string(body), `"rule":"default"`) {
			t.Fatalf("check %d: %d %s %v, want %d", i, code, body, err, want)
		}
	}
}

// TestCluster starts two processes, which join; reads them over HTTP,
// gRPC and /metrics; kills one, starts it again, and stops the other.
func TestCluster(t *testing.T) {
	c := Start(t, Config{Nodes: 2, Rules: []string{"rules:\n  - name: default\n    limit: 5\n    window: 60s\n"}})
	c.WaitAlive(c.Procs, 2, 20*time.Second)
	if got := strings.Join(Names(c.Procs), ","); got != "node-0,node-1" {
		t.Fatalf("names %s", got)
	}
	if code, r := c.Procs[1].Check(t, "k"); code != http.StatusOK || r.Limit != 5 || r.Remaining != 4 {
		t.Fatalf("check: %d %+v", code, r)
	}
	if v := c.Procs[0].Metric(t, "limiterd_cluster_members", "state", "alive"); v != 2 {
		t.Fatalf("node-0 counts %v members alive, want 2", v)
	}
	if rss, err := c.Procs[0].ResidentBytes(); err != nil || rss <= 0 {
		t.Fatalf("resident memory %d, %v", rss, err)
	}
	if n, err := c.Procs[0].OpenFiles(); err != nil || n <= 0 {
		t.Fatalf("open files %d, %v", n, err)
	}
	p := c.Procs[1]
	pid := p.Pid()
	c.Kill(p)
	if p.ExitCode() != -1 {
		t.Errorf("exit code %d after SIGKILL, want -1", p.ExitCode())
	}
	c.Start(p)
	if p.Pid() == pid {
		t.Fatal("the restarted node has the killed one's pid")
	}
	c.WaitAlive(c.Procs, 2, 20*time.Second)
	if err := c.Procs[0].Signal(syscall.SIGHUP); err != nil { // reloads its rules
		t.Fatal(err)
	}
	c.Terminate(c.Procs[0])
	if code := c.Procs[0].ExitCode(); code != 0 {
		t.Errorf("exit code %d after SIGTERM, want 0:\n%s", code, c.Procs[0].Stderr.String())
	}
}

func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err == nil {
		t.Error("a cluster without rules is valid")
	}
	cfg := DefaultConfig()
	cfg.Nodes, cfg.Rules = -1, []string{"x"}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "-1 nodes") {
		t.Errorf("-1 nodes: %v", err)
	}
}

func TestLockedBuffer(t *testing.T) {
	var b LockedBuffer
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 100 {
			io.WriteString(&b, "x")
		}
	}()
	for range 100 {
		_ = b.String()
	}
	<-done
	if got := b.String(); got != strings.Repeat("x", 100) {
		t.Fatalf("%q", got)
	}
}
