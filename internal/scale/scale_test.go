package scale

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/burst"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// quickScaleConfig is a small limitsim scale --mesh: 2,000 keys at 400 checks/s
// (the HS1/HS2 traffic per key, 12 a minute) on 2, 3 and 4 nodes, a full
// window of warm-up and 2 s measured. It runs in every test mode.
func quickScaleConfig() Config {
	cfg := DefaultConfig()
	cfg.Nodes, cfg.Keys, cfg.Rate, cfg.Seconds, cfg.Cost = []int{2, 3, 4}, 2000, 400, 2, false
	return cfg
}

// TestScaleQuickGolden pins the quick configuration's tables and checks
// the relations that must hold between them.
func TestScaleQuickGolden(t *testing.T) {
	cfg := quickScaleConfig()
	rows, err := Run(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkScale(t, cfg, rows)
	var out bytes.Buffer
	if err := Write(&out, cfg, rows); err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "scale_quick.golden", maskSyncBytes(out.Bytes()))
}

// maskSyncBytes blanks the sync table's byte figures (sent KB/s, recv
// KB/s, B/entry) with "~": a sync message codes each key against the one
// before it, and a tick's keys come in the order of the counter's hash,
// whose seed is random per process, so they move by about 0.1 % from run
// to run (checkScale holds their relations; the message counts stay
// exact).
func maskSyncBytes(out []byte) []byte {
	lines := strings.Split(string(out), "\n")
	token := regexp.MustCompile(`\S+`)
	in := false
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "nodes  checks/s"):
			in = true
			continue
		case strings.TrimSpace(l) == "":
			in = false
		}
		if !in {
			continue
		}
		b := []byte(l)
		for j, span := range token.FindAllIndex(b, -1) {
			if j == 4 || j == 6 || j == 9 {
				copy(b[span[0]:span[1]], strings.Repeat("~", span[1]-span[0]))
			}
		}
		lines[i] = string(b)
	}
	return []byte(strings.Join(lines, "\n"))
}

// checkScale asserts what must hold in any run where every node has a
// change at every tick and no key but the accuracy clients gets near its
// limit.
func checkScale(t *testing.T, cfg Config, rows []Row) {
	t.Helper()
	if len(rows) != len(cfg.Nodes) {
		t.Fatalf("%d rows for %d cluster sizes", len(rows), len(cfg.Nodes))
	}
	ticksPerSec := int64(time.Second / clustersim.DefaultConfig().Sync)
	for i, r := range rows {
		n, tr := int64(r.N), r.Traffic
		secs := r.Seconds
		// Every check is counted, and the load is what was asked for.
		if want := r.Rate * secs; tr.Checks != want {
			t.Errorf("%d nodes: %d checks measured, want %d", r.N, tr.Checks, want)
		}
		// Nothing is lost in the simulated network: every copy sent is
		// received, message for message and byte for byte.
		if r.AllRecvMsgs != tr.DeltaMsgs+tr.AEMsgs || r.AllRecvBytes != tr.DeltaBytes+tr.AEBytes {
			t.Errorf("%d nodes: sent %d msgs, %d bytes; received %d, %d", r.N, tr.DeltaMsgs+tr.AEMsgs, tr.DeltaBytes+tr.AEBytes, r.AllRecvMsgs, r.AllRecvBytes)
		}
		// No background key is hot, so anti-entropy is exactly one
		// heartbeat a second from every node to every peer.
		if want := n * (n - 1) * secs; tr.AEMsgs != want {
			t.Errorf("%d nodes: %d anti-entropy messages, want %d heartbeats", r.N, tr.AEMsgs, want)
		}
		// Every node has changes at every tick, so it sends at least one
		// delta per tick to each peer: the N² term.
		if least := n * (n - 1) * ticksPerSec * secs; tr.DeltaMsgs < least || tr.DeltaMsgs%(n-1) != 0 {
			t.Errorf("%d nodes: %d delta messages, fewer than one per tick and peer (%d) or not the same to every peer", r.N, tr.DeltaMsgs, least)
		}
		// Node 0 receives each peer's changes: at least one entry per
		// check on another node (a check changes a slice), unless one
		// tick coalesces several checks of a key on one node.
		others := float64(r.Rate*secs) * float64(n-1) / float64(n)
		if float64(r.RecvEntries) < 0.95*others {
			t.Errorf("%d nodes: node 0 received %d entries for %.0f checks on its peers", r.N, r.RecvEntries, others)
		}
		if r.Merged > r.RecvEntries || r.Merged <= 0 {
			t.Errorf("%d nodes: %d merged of %d received", r.N, r.Merged, r.RecvEntries)
		}
		// After a full window of uniform traffic node 0 tracks every key,
		// in more than one slice (several origins), at most one key per
		// check of the window.
		if r.Pairs > int64(cfg.Keys) || float64(r.Pairs) < 0.99*float64(cfg.Keys) {
			t.Errorf("%d nodes: node 0 tracks %d pairs of %d keys", r.N, r.Pairs, cfg.Keys)
		}
		if r.Slices < r.Pairs || r.Slices > r.Rate*seedstudy.WindowMs/1000 {
			t.Errorf("%d nodes: %d slices for %d pairs and %d checks a window", r.N, r.Slices, r.Pairs, r.Rate*seedstudy.WindowMs/1000)
		}
		if tr.BgRejected != 0 {
			t.Errorf("%d nodes: %d background requests rejected", r.N, tr.BgRejected)
		}
		// Accuracy: within the derived bound and NFR1; NFR2 for the 0.9x client.
		sc := clustersim.BudgetConfig()
		sc.Nodes = r.N
		if b := burst.ClusterBound(sc); int64(r.Hot.MaxInWindow) > b || float64(r.Hot.MaxInWindow) > seedstudy.NFR1Ratio*seedstudy.Limit {
			t.Errorf("%d nodes: hot client got %d into a window (bound %d, NFR1 %g)", r.N, r.Hot.MaxInWindow, b, seedstudy.NFR1Ratio*seedstudy.Limit)
		}
		if r.Hot.MaxInWindow < seedstudy.Limit || r.Hot.Requests != int(r.HotRate*r.AccMs/1000) {
			t.Errorf("%d nodes: hot client %+v: it exceeds its limit, so a window must hold at least %d", r.N, r.Hot, seedstudy.Limit)
		}
		// The bound's worst case reaches it exactly when N divides L (as
		// every quick size does): C = 0 is then the worst known count.
		if b := burst.ClusterBound(sc); int64(r.Burst.MaxInWindow) != b {
			t.Errorf("%d nodes: the adversarial burst got %d into a window; the bound is %d and should be reached", r.N, r.Burst.MaxInWindow, b)
		}
		if r.Compliant.Rejected != 0 || r.Compliant.Accepted != r.Compliant.Requests {
			t.Errorf("%d nodes: compliant client %+v rejected", r.N, r.Compliant)
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
		flat := (1 - 1/float64(r.N)) / (1 - 1/float64(p.N))
		if q := float64(r.RecvBytes) / float64(p.RecvBytes); r.Rate == p.Rate && (q < 0.85*flat || q > 1.15*flat) {
			t.Errorf("bytes received by node 0: %d at %d nodes, %d at %d: not %.2fx within 15%%", p.RecvBytes, p.N, r.RecvBytes, r.N, flat)
		}
		perCheck := func(r Row) float64 { return float64(r.RecvEntries) * float64(r.N) / float64(r.Traffic.Checks) }
		if perCheck(r) <= perCheck(p) {
			t.Errorf("entries merged per check decided: %.2f at %d nodes, %.2f at %d", perCheck(p), p.N, perCheck(r), r.N)
		}
		if float64(r.Slices)/float64(r.Pairs) < float64(p.Slices)/float64(p.Pairs) {
			t.Errorf("slices per pair fell from %d to %d nodes", p.N, r.N)
		}
	}
}

// TestScaleWarmupOnlyNode0Receives justifies the warm-up shortcut: whether
// the other nodes receive during the warm-up or not, every node sends the
// same, and node 0 receives, merges and holds the same.
func TestScaleWarmupOnlyNode0Receives(t *testing.T) {
	cfg := quickScaleConfig()
	run := func(full bool) (Traffic, [6]int64) {
		r, err := newLoad(cfg, 3)
		if err != nil {
			t.Fatal(err)
		}
		r.fullWarm = full
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
		var got [6]int64
		got[0], got[1], got[2], got[3] = r.received(0)
		got[4], got[5] = r.state(0, cfg.Warmup.Milliseconds()+cfg.Seconds*1000)
		return r.traffic, got
	}
	shortTraffic, short0 := run(false)
	fullTraffic, full0 := run(true)
	// Bytes within 1 %, all else the same: a sync message codes each key
	// against the one before it, and a tick's keys come in the order of
	// the counter's hash, whose seed is random per process.
	near := func(x, y int64) bool { return 100*max(x-y, y-x) <= max(x, y) }
	if !near(shortTraffic.DeltaBytes, fullTraffic.DeltaBytes) || !near(shortTraffic.AEBytes, fullTraffic.AEBytes) || !near(shortTraffic.CtlBytes, fullTraffic.CtlBytes) || !near(short0[1], full0[1]) {
		t.Errorf("bytes with node 0 alone receiving during the warm-up %+v, node 0 received %d; with every node %+v, %d", shortTraffic, short0[1], fullTraffic, full0[1])
	}
	shortTraffic.DeltaBytes, shortTraffic.AEBytes, shortTraffic.CtlBytes, short0[1] = 0, 0, 0, 0
	fullTraffic.DeltaBytes, fullTraffic.AEBytes, fullTraffic.CtlBytes, full0[1] = 0, 0, 0, 0
	if shortTraffic != fullTraffic {
		t.Errorf("traffic with node 0 alone receiving during the warm-up %+v, with every node %+v", shortTraffic, fullTraffic)
	}
	if short0 != full0 {
		t.Errorf("node 0 (received msgs, bytes, entries, merged; pairs, slices) %v with the shortcut, %v without", short0, full0)
	}
}

// TestScaleAccuracyUnaffectedByLoadShort is
// TestScaleAccuracyUnaffectedByLoad (scale_full_test.go) with clients of
// one window instead of three, which the race detector runs too.
func TestScaleAccuracyUnaffectedByLoadShort(t *testing.T) {
	checkAccuracyUnaffectedByLoad(t, seedstudy.WindowMs)
}

// checkAccuracyUnaffectedByLoad justifies running the accuracy clients
// alone: on the simulated cluster (ticks at one instant, no latency, no
// loss) the other keys' traffic and the anti-entropy cannot change a
// key's decisions, so the clients, for accMs, decide the same inside the
// load.
func checkAccuracyUnaffectedByLoad(t *testing.T, accMs int64) {
	t.Helper()
	cfg := quickScaleConfig()
	cfg.Warmup, cfg.Seconds = 0, accMs/1000
	const n = 4
	sc := clustersim.BudgetConfig()
	sc.Nodes = n
	for _, rate := range []int64{HotRate, CompliantRate} {
		at := clustersim.SteadyAt(float64(rate), accMs)
		alone, err := clustersim.RunClient(sc, at, clustersim.LCGNodes(cfg.Seed, n))
		if err != nil {
			t.Fatal(err)
		}
		r, err := newLoad(cfg, n)
		if err != nil {
			t.Fatal(err)
		}
		r.fullWarm = true
		c := &client{key: "accuracy", at: at, node: clustersim.LCGNodes(cfg.Seed, n), ty: clustersim.NewTally(seedstudy.WindowMs, seedstudy.Limit)}
		r.clients = []*client{c}
		if err := r.run(); err != nil {
			t.Fatal(err)
		}
		busiest, _ := c.ty.Busiest()
		got := [4]int{c.ty.Requests, c.ty.Accepted, busiest, c.ty.FalseRejections}
		want := [4]int{alone.Requests, alone.Accepted, alone.MaxInWindow, alone.FalseRejections}
		if got != want {
			t.Errorf("%d/s: in the load (requests, accepted, max in window, false rejections) %v, alone %v", rate, got, want)
		}
		// The hot key fills its window, so anti-entropy re-sent it: the
		// anti-entropy messages are larger than heartbeats.
		// A heartbeat is a hello's size (an empty body): a fresh engine's
		// PeerUp has nothing to catch up and sends just the hello.
		fresh, err := newLoad(r.cfg, 2)
		if err != nil {
			t.Fatal(err)
		}
		hello, err := fresh.sim.Node(0).Engine().PeerUp(fresh.sim.Clock(0, 0), "node-1")
		if err != nil || len(hello) != 1 || hello[0].Purpose != engine.PurposeHello {
			t.Fatalf("a fresh engine's PeerUp sent %+v, want one hello", hello)
		}
		if heartbeats := r.traffic.AEMsgs * int64(len(hello[0].Msgs[0])); rate == HotRate && r.traffic.AEBytes <= heartbeats {
			t.Errorf("%d/s: anti-entropy sent %d bytes, no more than heartbeats (%d); the hot key should have been re-sent", rate, r.traffic.AEBytes, heartbeats)
		}
	}
}

// TestScaleCost checks that the machine-dependent figures are measured:
// node 0's heap is a plausible size for what it holds and its Engine took
// some time. No figure is compared with a time.
func TestScaleCost(t *testing.T) {
	cfg := quickScaleConfig()
	cfg.Cost = true
	row, err := runSize(cfg, 2)
	if err != nil {
		t.Fatal(err)
	}
	// At least the slices themselves (12 bytes each), at most 10 KB a pair
	// (the counter's fixed shards are part of it at this size).
	if row.Heap < uint64(12*row.Slices) || row.Heap > uint64(10_000*row.Pairs) {
		t.Errorf("node 0's heap %d bytes for %d pairs and %d slices", row.Heap, row.Pairs, row.Slices)
	}
	for _, st := range []clustersim.EngineTime{row.Times.Tick, row.Times.Hot, row.Times.Receive} {
		if st.Wall <= 0 || st.CPUOK && st.CPU < 0 {
			t.Errorf("Engine times not measured: %+v", row.Times)
		}
	}
	if _, ok := clustersim.ThreadCPU(); ok && (!row.Times.Receive.CPUOK || row.Times.Receive.CPU <= 0) {
		t.Errorf("thread CPU time is available but was not measured: %+v", row.Times.Receive)
	}
	var out bytes.Buffer
	if err := Write(&out, cfg, []Row{row}); err != nil {
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
