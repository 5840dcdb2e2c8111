package e2e

import (
	"bytes"
	"encoding/base64"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// TestGossipKeyRotationOverHTTP rotates the gossip key of three real
// processes under load (issue 9): every node reads -gossip-key-file again
// on SIGHUP, the file going from the old key, to old and new, to new and
// old, to the new one alone. No check fails or gets a 5xx, and every
// request admitted meanwhile is counted on every node.
func TestGossipKeyRotationOverHTTP(t *testing.T) {
	dir := t.TempDir()
	keys := filepath.Join(dir, "gossip.keys")
	k1 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{1}, 32))
	k2 := base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{2}, 32))
	write := func(lines string) {
		t.Helper()
		if err := os.WriteFile(keys, []byte("# gossip keys, the first encrypts\n"+lines), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(k1 + "\n")
	const limit = 100_000
	c := nodetest.Start(t, nodetest.Config{Nodes: 3, Rules: []string{"rules:\n  - name: default\n    limit: " + strconv.Itoa(limit) + "\n    window: 60s\n"}, Args: []string{"-gossip-key-file", keys}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members alive", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == 3
		})
	}
	var accepted, failed atomic.Int64
	var first atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range c.Procs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := p.Get("/check?key=rot")
				if err != nil || code != 200 {
					failed.Add(1)
					first.CompareAndSwap(nil, p.Name+": "+strconv.Itoa(code)+" "+string(body))
					continue
				}
				accepted.Add(1)
			}
		})
	}
	for _, step := range []string{k1 + "\n" + k2 + "\n", k2 + "\n" + k1 + "\n", k2 + "\n"} {
		time.Sleep(400 * time.Millisecond)
		write(step)
		for _, p := range c.Procs {
			if err := p.Signal(syscall.SIGHUP); err != nil {
				t.Fatal(err)
			}
		}
	}
	time.Sleep(600 * time.Millisecond)
	close(stop)
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d checks failed during the rotation, first: %v", failed.Load(), first.Load())
	}
	want := limit - accepted.Load()
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" counts every admitted request", 20*time.Second, func() bool {
			return remaining(t, p, "rot", limit) == want
		})
		m, err := p.Members()
		if err != nil || nodetest.CountState(m, "alive") != 3 {
			t.Fatalf("%s after the rotation: %v %v", p.Name, m, err)
		}
	}
	// The old key is gone: a node that has only it cannot join.
	oldKeys := filepath.Join(dir, "old.keys")
	if err := os.WriteFile(oldKeys, []byte(k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := &nodetest.Proc{Name: "stale", HTTP: "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t)), Gossip: "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))}
	stale.Args = []string{"-node-name", stale.Name, "-http-addr", stale.HTTP, "-bind-addr", stale.Gossip, "-rules", c.Rules,
		"-log-level", "warn", "-join", c.Procs[0].Gossip, "-gossip-key-file", oldKeys}
	c.Procs = append(c.Procs, stale)
	c.StartUnready(stale)
	time.Sleep(3 * time.Second)
	if code, _, err := stale.Get("/readyz"); err != nil || code != 503 {
		t.Fatalf("a node with the old key only: /readyz %d %v, want 503 (not joined)", code, err)
	}
	if m, err := c.Procs[0].Members(); err != nil || nodetest.CountState(m, "alive") != 3 {
		t.Fatalf("the cluster after a node with the old key tried to join: %v %v", m, err)
	}
	t.Logf("%d checks admitted during the rotation, every one counted on all 3 nodes", accepted.Load())
}
