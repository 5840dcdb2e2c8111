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
	c := startCluster(t, 3, "rules:\n  - name: default\n    limit: "+strconv.Itoa(limit)+"\n    window: 60s\n", "-gossip-key-file", keys)
	for _, p := range c.procs {
		eventually(t, p.name+" sees all members alive", 20*time.Second, func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == 3
		})
	}
	var accepted, failed atomic.Int64
	var first atomic.Value
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, p := range c.procs {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := request("GET", "http://"+p.http+"/check?key=rot")
				if err != nil || code != 200 {
					failed.Add(1)
					first.CompareAndSwap(nil, p.name+": "+strconv.Itoa(code)+" "+string(body))
					continue
				}
				accepted.Add(1)
			}
		})
	}
	for _, step := range []string{k1 + "\n" + k2 + "\n", k2 + "\n" + k1 + "\n", k2 + "\n"} {
		time.Sleep(400 * time.Millisecond)
		write(step)
		for _, p := range c.procs {
			if err := p.cmd.Process.Signal(syscall.SIGHUP); err != nil {
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
	for _, p := range c.procs {
		eventually(t, p.name+" counts every admitted request", 20*time.Second, func() bool {
			return remaining(t, p, "rot", limit) == want
		})
		m, err := members(p)
		if err != nil || countState(m, "alive") != 3 {
			t.Fatalf("%s after the rotation: %v %v", p.name, m, err)
		}
	}
	// The old key is gone: a node that has only it cannot join.
	oldKeys := filepath.Join(dir, "old.keys")
	if err := os.WriteFile(oldKeys, []byte(k1+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	stale := &proc{name: "stale", http: "127.0.0.1:" + strconv.Itoa(freePort(t)), gossip: "127.0.0.1:" + strconv.Itoa(freePort(t))}
	stale.args = []string{"-node-name", stale.name, "-http-addr", stale.http, "-bind-addr", stale.gossip, "-rules", c.rules,
		"-log-level", "warn", "-join", c.procs[0].gossip, "-gossip-key-file", oldKeys}
	c.procs = append(c.procs, stale)
	c.startUnready(stale)
	time.Sleep(3 * time.Second)
	if code, _, err := request("GET", "http://"+stale.http+"/readyz"); err != nil || code != 503 {
		t.Fatalf("a node with the old key only: /readyz %d %v, want 503 (not joined)", code, err)
	}
	if m, err := members(c.procs[0]); err != nil || countState(m, "alive") != 3 {
		t.Fatalf("the cluster after a node with the old key tried to join: %v %v", m, err)
	}
	t.Logf("%d checks admitted during the rotation, every one counted on all 3 nodes", accepted.Load())
}
