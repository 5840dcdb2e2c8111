package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
)

// quickScaleConfig is a small limitsim scale: 2,000 keys at 400 checks/s
// (the HS1/HS2 traffic per key, 12 a minute) on 2, 3 and 4 nodes, a full
// window of warm-up and 2 s measured. It runs in every test mode.
func quickScaleConfig() scaleConfig {
	cfg := defaultScaleConfig()
	cfg.nodes, cfg.keys, cfg.rate, cfg.seconds, cfg.cost = []int{2, 3, 4}, 2000, 400, 2, false
	return cfg
}

// TestScaleQuickGolden pins the quick configuration's tables and checks
// the relations that must hold between them.
func TestScaleQuickGolden(t *testing.T) {
	cfg := quickScaleConfig()
	rows, err := runScale(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkScale(t, cfg, rows)
	var out bytes.Buffer
	if err := writeScale(&out, cfg, rows); err != nil {
		t.Fatal(err)
	}
	golden(t, "scale_quick.golden", out.Bytes())
}

// checkScale asserts what must hold in any run where every node has a
// change at every tick and no key but the accuracy clients gets near its
// limit.
func checkScale(t *testing.T, cfg scaleConfig, rows []scaleRow) {
	t.Helper()
	if len(rows) != len(cfg.nodes) {
		t.Fatalf("%d rows for %d cluster sizes", len(rows), len(cfg.nodes))
	}
	ticksPerSec := int64(time.Second / defaultSimConfig().sync)
	for i, r := range rows {
		n, tr := int64(r.n), r.traffic
		secs := r.seconds
		// Every check is counted, and the load is what was asked for.
		if want := r.rate * secs; tr.checks != want {
			t.Errorf("%d nodes: %d checks measured, want %d", r.n, tr.checks, want)
		}
		// Nothing is lost in the simulated network: every copy sent is
		// received, message for message and byte for byte.
		if r.allRecvMsgs != tr.deltaMsgs+tr.aeMsgs || r.allRecvBytes != tr.deltaBytes+tr.aeBytes {
			t.Errorf("%d nodes: sent %d msgs, %d bytes; received %d, %d", r.n, tr.deltaMsgs+tr.aeMsgs, tr.deltaBytes+tr.aeBytes, r.allRecvMsgs, r.allRecvBytes)
		}
		// No background key is hot, so anti-entropy is exactly one
		// heartbeat a second from every node to every peer.
		if want := n * (n - 1) * secs; tr.aeMsgs != want {
			t.Errorf("%d nodes: %d anti-entropy messages, want %d heartbeats", r.n, tr.aeMsgs, want)
		}
		// Every node has changes at every tick, so it sends at least one
		// delta per tick to each peer: the N² term.
		if least := n * (n - 1) * ticksPerSec * secs; tr.deltaMsgs < least || tr.deltaMsgs%(n-1) != 0 {
			t.Errorf("%d nodes: %d delta messages, fewer than one per tick and peer (%d) or not the same to every peer", r.n, tr.deltaMsgs, least)
		}
		// Node 0 receives each peer's changes: at least one entry per
		// check on another node (a check changes a slice), unless one
		// tick coalesces several checks of a key on one node.
		others := float64(r.rate*secs) * float64(n-1) / float64(n)
		if float64(r.recvEntries) < 0.95*others {
			t.Errorf("%d nodes: node 0 received %d entries for %.0f checks on its peers", r.n, r.recvEntries, others)
		}
		if r.merged > r.recvEntries || r.merged <= 0 {
			t.Errorf("%d nodes: %d merged of %d received", r.n, r.merged, r.recvEntries)
		}
		// After a full window of uniform traffic node 0 tracks every key,
		// in more than one slice (several origins), at most one key per
		// check of the window.
		if r.pairs > int64(cfg.keys) || float64(r.pairs) < 0.99*float64(cfg.keys) {
			t.Errorf("%d nodes: node 0 tracks %d pairs of %d keys", r.n, r.pairs, cfg.keys)
		}
		if r.slices < r.pairs || r.slices > r.rate*seedWindowMs/1000 {
			t.Errorf("%d nodes: %d slices for %d pairs and %d checks a window", r.n, r.slices, r.pairs, r.rate*seedWindowMs/1000)
		}
		if tr.bgRejected != 0 {
			t.Errorf("%d nodes: %d background requests rejected", r.n, tr.bgRejected)
		}
		// Accuracy: within the derived bound and NFR1; NFR2 for the 0.9x client.
		sc := budgetSimConfig()
		sc.nodes = r.n
		if b := clusterBound(sc); int64(r.hot.maxInWindow) > b || float64(r.hot.maxInWindow) > nfr1Ratio*seedLimit {
			t.Errorf("%d nodes: hot client got %d into a window (bound %d, NFR1 %g)", r.n, r.hot.maxInWindow, b, nfr1Ratio*seedLimit)
		}
		if r.hot.maxInWindow < seedLimit || r.hot.requests != int(r.hotRate*r.accMs/1000) {
			t.Errorf("%d nodes: hot client %+v: it exceeds its limit, so a window must hold at least %d", r.n, r.hot, seedLimit)
		}
		// The bound's worst case reaches it exactly when N divides L (as
		// every quick size does): C = 0 is then the worst known count.
		if b := clusterBound(sc); int64(r.burst.maxInWindow) != b {
			t.Errorf("%d nodes: the adversarial burst got %d into a window; the bound is %d and should be reached", r.n, r.burst.maxInWindow, b)
		}
		if r.compliant.rejected != 0 || r.compliant.accepted != r.compliant.requests {
			t.Errorf("%d nodes: compliant client %+v rejected", r.n, r.compliant)
		}
		if i == 0 {
			continue
		}
		// Growth with N at a fixed total load: bytes received per node
		// stay (N-1)/N x the same within 15 % (the same changes, from more
		// peers in smaller messages), while the entries a node merges per
		// check it decides grow with its N-1 peers: at least N-1 of them
		// (see above), and more than at the smaller size. Node 0's slices
		// per key grow too (more origins, fewer requests each).
		p := rows[i-1]
		flat := (1 - 1/float64(r.n)) / (1 - 1/float64(p.n))
		if q := float64(r.recvBytes) / float64(p.recvBytes); r.rate == p.rate && (q < 0.85*flat || q > 1.15*flat) {
			t.Errorf("bytes received by node 0: %d at %d nodes, %d at %d: not %.2fx within 15%%", p.recvBytes, p.n, r.recvBytes, r.n, flat)
		}
		perCheck := func(r scaleRow) float64 { return float64(r.recvEntries) * float64(r.n) / float64(r.traffic.checks) }
		if perCheck(r) <= perCheck(p) {
			t.Errorf("entries merged per check decided: %.2f at %d nodes, %.2f at %d", perCheck(p), p.n, perCheck(r), r.n)
		}
		if float64(r.slices)/float64(r.pairs) < float64(p.slices)/float64(p.pairs) {
			t.Errorf("slices per pair fell from %d to %d nodes", p.n, r.n)
		}
	}
}

// TestScaleWarmupOnlyNode0Receives justifies the warm-up shortcut: whether
// the other nodes receive during the warm-up or not, every node sends the
// same, and node 0 receives, merges and holds the same.
func TestScaleWarmupOnlyNode0Receives(t *testing.T) {
	cfg := quickScaleConfig()
	run := func(full bool) (scaleTraffic, [6]int64) {
		r, err := newScaleRun(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		r.fullWarm = full
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
		var got [6]int64
		got[0], got[1], got[2], got[3] = r.nodes[0].received()
		got[4], got[5] = r.state(0, cfg.warmup.Milliseconds()+cfg.seconds*1000)
		return r.traffic, got
	}
	shortTraffic, short0 := run(false)
	fullTraffic, full0 := run(true)
	if shortTraffic != fullTraffic {
		t.Errorf("traffic with node 0 alone receiving during the warm-up %+v, with every node %+v", shortTraffic, fullTraffic)
	}
	if short0 != full0 {
		t.Errorf("node 0 (received msgs, bytes, entries, merged; pairs, slices) %v with the shortcut, %v without", short0, full0)
	}
}

// TestScaleAccuracyUnaffectedByLoad justifies running the accuracy clients
// alone: on the simulated cluster (ticks at one instant, no latency, no
// loss) the other keys' traffic and the anti-entropy cannot change a
// key's decisions, so the clients decide the same inside the load.
func TestScaleAccuracyUnaffectedByLoad(t *testing.T) {
	cfg := quickScaleConfig()
	cfg.warmup, cfg.seconds = 0, scaleAccuracyMs/1000
	const n = 4
	sc := budgetSimConfig()
	sc.nodes = n
	for _, rate := range []int64{scaleHotRate, scaleCompliantRate} {
		at := steadyAt(float64(rate), scaleAccuracyMs)
		alone, err := runClient(sc, at, lcgNodes(cfg.seed, n))
		if err != nil {
			t.Fatal(err)
		}
		r, err := newScaleRun(cfg, n)
		if err != nil {
			t.Fatal(err)
		}
		r.fullWarm = true
		c := &scaleClient{key: "accuracy", at: at, node: lcgNodes(cfg.seed, n), ty: newTally(seedWindowMs, seedLimit)}
		r.clients = []*scaleClient{c}
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
		busiest, _ := c.ty.busiest()
		got := [4]int{c.ty.requests, c.ty.accepted, busiest, c.ty.falseRejections}
		want := [4]int{alone.requests, alone.accepted, alone.maxInWindow, alone.falseRejections}
		if got != want {
			t.Errorf("%d/s: in the load (requests, accepted, max in window, false rejections) %v, alone %v", rate, got, want)
		}
		// The hot key fills its window, so anti-entropy re-sent it: the
		// anti-entropy messages are larger than heartbeats.
		// A heartbeat is a hello's size (an empty body): a fresh engine's
		// PeerUp has nothing to catch up and sends just the hello.
		fresh, err := newScaleRun(r.cfg, 2)
		if err != nil {
			t.Fatal(err)
		}
		hello := fresh.nodes[0].in
		if len(hello) != 1 || hello[0].Purpose != engine.PurposeHello {
			t.Fatalf("a fresh engine's PeerUp sent %+v, want one hello", hello)
		}
		if heartbeats := r.traffic.aeMsgs * int64(len(hello[0].Msgs[0])); rate == scaleHotRate && r.traffic.aeBytes <= heartbeats {
			t.Errorf("%d/s: anti-entropy sent %d bytes, no more than heartbeats (%d); the hot key should have been re-sent", rate, r.traffic.aeBytes, heartbeats)
		}
	}
}

// TestScaleCost checks that the machine-dependent figures are measured:
// node 0's heap is a plausible size for what it holds and its Syncer took
// some time. No figure is compared with a time.
func TestScaleCost(t *testing.T) {
	cfg := quickScaleConfig()
	cfg.cost = true
	row, err := runScaleSize(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	// At least the slices themselves (12 bytes each), at most 10 KB a pair
	// (the counter's fixed shards are part of it at this size).
	if row.heap < uint64(12*row.slices) || row.heap > uint64(10_000*row.pairs) {
		t.Errorf("node 0's heap %d bytes for %d pairs and %d slices", row.heap, row.pairs, row.slices)
	}
	for _, st := range []syncTime{row.syncTick, row.syncHot, row.syncRecv} {
		if st.wall <= 0 || st.cpuOK && st.cpu < 0 {
			t.Errorf("Syncer times not measured: tick %+v, hot %+v, receive %+v", row.syncTick, row.syncHot, row.syncRecv)
		}
	}
	if _, ok := threadCPU(); ok && (!row.syncRecv.cpuOK || row.syncRecv.cpu <= 0) {
		t.Errorf("thread CPU time is available but was not measured: %+v", row.syncRecv)
	}
	var out bytes.Buffer
	if err := writeScale(&out, cfg, []scaleRow{row}); err != nil {
		t.Fatal(err)
	}
	// The node 0 table's row: the second line starting with "    2 ".
	var rowsOf2 []string
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "    2 ") {
			rowsOf2 = append(rowsOf2, line)
		}
	}
	if len(rowsOf2) != 3 || strings.Contains(rowsOf2[1], " - ") {
		t.Errorf("cost columns not printed: %q", rowsOf2)
	}
}

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
