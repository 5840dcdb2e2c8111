package nodecost

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
	"github.com/limiterd/limiterd/internal/clustersim"
)

// quick is a small run: the hottest keys pass their limit within a
// second, the race detector runs it in seconds.
func quick(nodes ...int) Config {
	cfg := DefaultConfig()
	cfg.Nodes, cfg.Scenarios = nodes, []Scenario{Healthy}
	cfg.RatePerNode, cfg.KeysPerNode, cfg.Duration = 500, 2500, 3*time.Second
	cfg.CutAt, cfg.CutFor = 0, 2500*time.Millisecond
	return cfg
}

// machineFree is r without the figures that depend on the machine.
func machineFree(r Row) Row {
	r.EngineNsPerCheck, r.EngineNsPerCheckAlone, r.HeapBytesPerNode, r.WallS = 0, 0, 0, 0
	return r
}

// sameRun reports how two runs of one configuration differ beyond what
// may: the machine's figures (machineFree), and the sync bytes and
// messages by at most 1 %. A sync message codes each key against the one
// before it (engine's wire version 2), and a tick's keys come in the
// order of the counter's hash, whose seed is random per process (against
// hash flooding): the same entries take a few bytes more or fewer from
// run to run. Every count and ratio is the same.
func sameRun(a, b Row) string {
	near := func(x, y float64) bool { return x == y || math.Abs(x-y) <= 0.01*math.Max(x, y) }
	if !near(a.SyncBytesPerNodeS, b.SyncBytesPerNodeS) || !near(a.SyncMsgsPerNodeS, b.SyncMsgsPerNodeS) {
		return fmt.Sprintf("sync %.1f B/s in %.2f msgs/s, then %.1f in %.2f", a.SyncBytesPerNodeS, a.SyncMsgsPerNodeS, b.SyncBytesPerNodeS, b.SyncMsgsPerNodeS)
	}
	a, b = machineFree(a), machineFree(b)
	a.SyncBytesPerNodeS, a.SyncMsgsPerNodeS, b.SyncBytesPerNodeS, b.SyncMsgsPerNodeS = 0, 0, 0, 0
	if a != b {
		return fmt.Sprintf("%+v\n%+v", a, b)
	}
	return ""
}

func TestZipfDraw(t *testing.T) {
	draw := func(seed uint64, n int) []int {
		k := newKeys(1000, 1.2, seed, 10)
		out := make([]int, n)
		for i := range out {
			out[i] = k.next()
		}
		return out
	}
	tests := []struct {
		name      string
		a, b      uint64
		wantEqual bool
	}{
		{"same seed", 7, 7, true},
		{"other seed", 7, 8, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, b := draw(tc.a, 2000), draw(tc.b, 2000)
			if equal := slicesEqual(a, b); equal != tc.wantEqual {
				t.Errorf("draws with seeds %d and %d equal: %t, want %t", tc.a, tc.b, equal, tc.wantEqual)
			}
		})
	}
	// The draw follows the mass: rank 0's share of 100,000 draws is
	// within 5 % of its probability, every rank in range.
	const n = 100_000
	counts := make([]int, 1000)
	for _, r := range draw(1, n) {
		if r < 0 || r >= len(counts) {
			t.Fatalf("rank %d out of [0, %d)", r, len(counts))
		}
		counts[r]++
	}
	p := zipfMass(1000, 1.2, 2)
	for r := range p {
		if got := float64(counts[r]) / n; math.Abs(got-p[r]) > 0.05*p[r] {
			t.Errorf("rank %d drawn %.4f of the time, its mass is %.4f", r, got, p[r])
		}
	}
	k := newKeys(1000, 1.2, 1, 10)
	if k.name(3) != "client-1000000003" || k.name(999) != "client-1000000999" || len(k.name(0)) != 17 {
		t.Errorf("key names %q %q", k.name(3), k.name(999))
	}
}

func slicesEqual(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestJudgedRanks: the derived judged ranks are exactly those expected at
// a quarter of the limit in a window.
func TestJudgedRanks(t *testing.T) {
	for _, n := range []int{4, 8, 64} {
		cfg := DefaultConfig()
		sc := clustersim.DefaultConfig()
		j := judgedRanks(cfg, n, sc.Limit, sc.Window.Seconds())
		p := zipfMass(cfg.KeysPerNode*n, cfg.Zipf, j+1)
		expect := func(r int) float64 { return p[r] * float64(cfg.RatePerNode) * float64(n) * sc.Window.Seconds() }
		if j < 1 || expect(j-1) < float64(sc.Limit)/4 || expect(j) >= float64(sc.Limit)/4 {
			t.Errorf("%d nodes: %d judged; rank %d expects %.1f, rank %d %.1f, threshold %d", n, j, j-1, expect(j-1), j, expect(j), sc.Limit/4)
		}
		cfg.Judged = 200
		if got := judgedRanks(cfg, n, sc.Limit, sc.Window.Seconds()); got != 200 {
			t.Errorf("%d nodes, 200 asked: %d judged", n, got)
		}
	}
}

// TestAccuracySmallClusters: on a healthy cluster of 4 and 8 nodes the
// hottest keys pass their limit, no request that fitted is rejected and
// no key gets more than the derived bound into a window.
func TestAccuracySmallClusters(t *testing.T) {
	rows, err := Run(quick(4, 8), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Rejections == 0 || r.WorstRatio < 1 {
			t.Errorf("%d nodes: %d rejections, worst ratio %.3f: the hottest keys should pass their limit", r.Nodes, r.Rejections, r.WorstRatio)
		}
		if r.FalseRejections != 0 || r.UnjudgedRejections != 0 {
			t.Errorf("%d nodes: %d false rejections (%d of keys not judged)", r.Nodes, r.FalseRejections, r.UnjudgedRejections)
		}
		sc := SimConfig(quick(), r.Nodes)
		if bound := float64(sc.Bound().WorstCase) / float64(sc.Limit); r.WorstRatio > bound || r.BoundRatio != bound {
			t.Errorf("%d nodes: worst ratio %.3f, bound %.3f (row says %.3f)", r.Nodes, r.WorstRatio, bound, r.BoundRatio)
		}
		if r.Checks != 500*int64(r.Nodes)*3 || r.Keys != 2500*r.Nodes {
			t.Errorf("%d nodes: %d checks over %d keys", r.Nodes, r.Checks, r.Keys)
		}
		if r.FallbackShare != 0 || r.FallbacksLive != 0 {
			t.Errorf("%d nodes: healthy, yet %.4f of the checks fell back", r.Nodes, r.FallbackShare)
		}
		// Past their blind share, checks ask the coordinator: some on
		// another node, not all (a node coordinates some keys itself).
		if r.NetworkWaitShare <= 0 || r.NetworkWaitShare >= 1 {
			t.Errorf("%d nodes: network wait share %.4f", r.Nodes, r.NetworkWaitShare)
		}
		// The demand classes hold every check, and every ask once: none
		// is lost, so none is sent again. The hottest keys pass their
		// limit ten times over.
		var checks, waited int64
		for _, d := range r.WaitByDemand {
			checks, waited = checks+d.Checks, waited+d.Waited
		}
		if asks := int64(math.Round(r.NetworkWaitShare * float64(r.Checks))); checks != r.Checks || waited != asks {
			t.Errorf("%d nodes: the demand classes hold %d checks and %d waits, want %d and %d", r.Nodes, checks, waited, r.Checks, asks)
		}
		if top := r.WaitByDemand[DemandClasses-1]; top.Keys == 0 {
			t.Errorf("%d nodes: no key ten times past its limit: %+v", r.Nodes, r.WaitByDemand)
		}
		// Every answer comes in time; some asks are granted.
		if r.AskGrantedShare <= 0 || r.AskGrantedShare > 1 {
			t.Errorf("%d nodes: %.4f of the asks granted", r.Nodes, r.AskGrantedShare)
		}
		if r.SyncBytesPerNodeS <= r.CoordBytesPerNodeS || r.CoordBytesPerNodeS <= 0 || r.SyncMsgsPerNodeS <= 0 {
			t.Errorf("%d nodes: sync %.0f B/s (coordination %.0f), %.0f msgs/s", r.Nodes, r.SyncBytesPerNodeS, r.CoordBytesPerNodeS, r.SyncMsgsPerNodeS)
		}
		if r.EngineNsPerCheck <= 0 || r.EngineNsPerCheckAlone <= 0 || r.HeapBytesPerNode <= 0 || r.PairsPerNode <= 0 || r.Untracked != 0 {
			t.Errorf("%d nodes: engine %.0f ns/check (%.0f alone), heap %.0f B/node, %.0f pairs/node, %d untracked", r.Nodes, r.EngineNsPerCheck, r.EngineNsPerCheckAlone, r.HeapBytesPerNode, r.PairsPerNode, r.Untracked)
		}
	}
}

// TestFallbackFailsOver: with node 0 silent from the start, the other
// nodes ask it for its keys at the margin, miss, fall back and pass it
// over: fewer fallbacks than with failover turned off, and the bound and
// the exactness hold meanwhile. With node 0 cut off but serving (a
// partition of one), its own checks at the margin fall back for the whole
// cut. The runs are deterministic.
//
// Few checks ask a coordinator at all (most are decided within the blind
// share, or rejected on the merged count), so the asks to one node in a
// few seconds are few and failover saves only some of them.
func TestFallbackFailsOver(t *testing.T) {
	cfg := quick(4)
	cfg.Scenarios = []Scenario{Fallback, Partition, Healthy}
	var runs [2][]Row
	for k := range runs {
		rows, err := Run(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		runs[k] = rows
	}
	for i := range runs[0] {
		if d := sameRun(runs[0][i], runs[1][i]); d != "" {
			t.Errorf("the same run twice: %s", d)
		}
	}
	fb, part, healthy := runs[0][0], runs[0][1], runs[0][2]
	if fb.Scenario != Fallback || part.Scenario != Partition || healthy.Scenario != Healthy {
		t.Fatalf("scenarios %s, %s, %s", fb.Scenario, part.Scenario, healthy.Scenario)
	}
	// Without failover the live nodes ask the silent node for its keys
	// until the cut ends.
	never := cfg
	never.Scenarios = []Scenario{Fallback}
	never.editEngine = func(c *engine.Config) { c.FailoverMisses, c.FailoverSilence = math.MaxInt32, time.Hour }
	rows, err := Run(never, nil)
	if err != nil {
		t.Fatal(err)
	}
	stuck := rows[0]
	if fb.FallbacksLive <= 0 || fb.FallbacksLive >= stuck.FallbacksLive || fb.FallbackShare != float64(fb.FallbacksLive)/float64(fb.Checks) {
		t.Errorf("fallback: %d fallbacks on the live nodes (%.5f of the checks), %d without failover",
			fb.FallbacksLive, fb.FallbackShare, stuck.FallbacksLive)
	}
	// Meanwhile the checks the budget decides are bounded by the budget,
	// and while the nodes differ on the silent node's keys two
	// coordinators grant: a limit and a lease pool more (package counter,
	// "Two coordinators at once"). The budget is not exact: its false
	// rejections are counted apart, and every other decision is exact.
	sc := SimConfig(cfg, 4)
	b := sc.Bound()
	meanwhile := float64(max(b.WorstCase, b.Fallback)+sc.Limit+b.Leases) / float64(sc.Limit)
	if fb.WorstRatio < 1 || fb.WorstRatio > meanwhile || fb.BoundRatio != healthy.BoundRatio || fb.FalseRejections != fb.FalseInFallback {
		t.Errorf("fallback: worst ratio %.3f, bound meanwhile %.3f (healthy %.3f), %d false rejections, %d of them by the budget",
			fb.WorstRatio, meanwhile, healthy.BoundRatio, fb.FalseRejections, fb.FalseInFallback)
	}
	// The partitioned node keeps deciding its share alone, by the budget:
	// more fallbacks than the silent node's peers make. (Not many more:
	// a peer whose turn it is after the silent node for a key decides
	// that key alone too, engine.Asked.Alone, and on 4 nodes that is a
	// third of the silent node's keys for each.)
	if part.FallbackShare <= fb.FallbackShare {
		t.Errorf("partition: %.5f of the checks fell back (fallback: %.5f)", part.FallbackShare, fb.FallbackShare)
	}
}

// TestWriteJSON: one object a line, with the fields scripts read, as
// numbers.
func TestWriteJSON(t *testing.T) {
	rows := []Row{{Scenario: Healthy, Nodes: 8, SyncBytesPerNodeS: 1.5, WorstRatio: 1.05}, {Scenario: Fallback, Nodes: 64}}
	var out bytes.Buffer
	if err := WriteJSON(&out, rows); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != len(rows) {
		t.Fatalf("%d lines for %d rows: %q", len(lines), len(rows), out.String())
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("line %d %q: %v", i, line, err)
		}
		for _, f := range []string{"nodes", "sync_bytes_per_node_s", "sync_msgs_per_node_s", "engine_ns_per_check",
			"heap_bytes_per_node", "network_wait_share", "worst_ratio", "false_rejections"} {
			if _, ok := m[f].(float64); !ok {
				t.Errorf("line %d: field %q is %v, want a number", i, f, m[f])
			}
		}
		if m["scenario"] != string(rows[i].Scenario) || m["nodes"] != float64(rows[i].Nodes) {
			t.Errorf("line %d: %v", i, m)
		}
	}
	var table bytes.Buffer
	if err := WriteTable(&table, DefaultConfig(), rows); err != nil || !strings.Contains(table.String(), "fallback     64") {
		t.Errorf("table %q, %v", table.String(), err)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"default", func(*Config) {}, ""},
		{"no sizes", func(c *Config) { c.Nodes = nil }, "no cluster size"},
		{"one node", func(c *Config) { c.Nodes = []int{1} }, "between 2 and 4096"},
		{"too many", func(c *Config) { c.Nodes = []int{8, clustersim.MaxNodes + 1} }, "between 2 and 4096"},
		{"no scenario", func(c *Config) { c.Scenarios = nil }, "no scenario"},
		{"unknown scenario", func(c *Config) { c.Scenarios = []Scenario{"flood"} }, `unknown scenario "flood"`},
		{"partition", func(c *Config) { c.Scenarios = []Scenario{Partition} }, ""},
		{"no rate", func(c *Config) { c.RatePerNode = 0 }, "rate per node"},
		{"no keys", func(c *Config) { c.KeysPerNode = 0 }, "keys per node"},
		{"flat zipf", func(c *Config) { c.Zipf = 1 }, "Zipf exponent"},
		{"short", func(c *Config) { c.Duration = 0 }, "duration"},
		{"fractional", func(c *Config) { c.Duration = 1500 * time.Microsecond }, "duration"},
		{"judge", func(c *Config) { c.Judged = -1 }, "judged"},
		{"cut late", func(c *Config) { c.CutAt = 58 * time.Second }, "end within the run"},
		{"cut late, healthy only", func(c *Config) { c.CutAt, c.Scenarios = 58*time.Second, []Scenario{Healthy} }, ""},
		{"cut node", func(c *Config) { c.CutNode = 6 }, ""},
		{"cut node alone", func(c *Config) { c.CutNode = 7 }, "cut node"},
		{"cut node negative", func(c *Config) { c.CutNode = -1 }, "cut node"},
		{"cut node, healthy only", func(c *Config) { c.CutNode, c.Scenarios = 7, []Scenario{Healthy} }, ""},
		{"random spread", func(c *Config) { c.Spread = Random }, ""},
		{"unknown spread", func(c *Config) { c.Spread = "hash" }, `unknown spread "hash"`},
		{"no spread", func(c *Config) { c.Spread = "" }, "unknown spread"},
		{"workers", func(c *Config) { c.Workers = -1 }, "workers"},
		{"sync", func(c *Config) { c.Sync = 50 * time.Millisecond }, ""},
		{"no sync", func(c *Config) { c.Sync = 0 }, "sync interval"},
		{"fractional sync", func(c *Config) { c.Sync = 1500 * time.Microsecond }, "sync interval"},
		{"latency", func(c *Config) { c.Latency = 2 * time.Millisecond }, ""},
		{"latency past the deadline", func(c *Config) { c.Latency = 3 * time.Millisecond }, "round trip"},
		{"negative latency", func(c *Config) { c.Latency = -time.Millisecond }, "latency"},
		{"fractional latency", func(c *Config) { c.Latency = 1500 * time.Microsecond }, "latency"},
		{"grace", func(c *Config) { c.Grace = 1 }, ""},
		{"no grace", func(c *Config) { c.Grace = 0 }, ""},
		{"negative grace", func(c *Config) { c.Grace = -0.1 }, "delivery grace"},
		{"grace past the interval", func(c *Config) { c.Grace = 1.5 }, "delivery grace"},
		{"tolerance", func(c *Config) { c.Tolerance = 0.5 }, ""},
		{"no tolerance", func(c *Config) { c.Tolerance = 0 }, "tolerance"},
		{"tolerance past the limit", func(c *Config) { c.Tolerance = 1.5 }, "tolerance"},
		{"no leases", func(c *Config) { c.LeaseShare, c.LeaseTime = 0, 0 }, ""},
		{"lease share past 1", func(c *Config) { c.LeaseShare = 1.5 }, "lease share"},
		{"no lease time", func(c *Config) { c.LeaseTime = 0 }, "lease time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := DefaultConfig()
			tc.edit(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Errorf("unexpected %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want ErrInvalidConfig with %q", err, tc.want)
			}
		})
	}
	// Every problem is reported.
	c := DefaultConfig()
	c.RatePerNode, c.Zipf = 0, 0.5
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "rate per node") || !strings.Contains(err.Error(), "Zipf") {
		t.Errorf("two problems: %v", err)
	}
}

// TestWaitAfterTheFirstWindow: a run of two windows reports the share of
// its second window's checks that asked another node, which is what it
// adds to a run of one window (the model is deterministic, and the first
// window of both is the same run); a run of one window reports none.
func TestWaitAfterTheFirstWindow(t *testing.T) {
	cfg := quick(3)
	cfg.RatePerNode, cfg.KeysPerNode = 100, 20
	w := SimConfig(cfg, 3).Window
	var rows [2]Row
	for i, d := range []time.Duration{w, 2 * w} {
		cfg.Duration = d
		rs, err := Run(cfg, nil)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = rs[0]
	}
	one, two := rows[0], rows[1]
	if one.NetworkWaitShareLater != 0 {
		t.Errorf("a run of one window reports a share after it: %v", one.NetworkWaitShareLater)
	}
	asks := func(r Row) float64 { return math.Round(r.NetworkWaitShare * float64(r.Checks)) }
	want := (asks(two) - asks(one)) / float64(two.Checks-one.Checks)
	if math.Abs(two.NetworkWaitShareLater-want) > 1e-9 || want == 0 {
		t.Errorf("after the first window: %v, want %v (asks %v then %v)", two.NetworkWaitShareLater, want, asks(one), asks(two))
	}
	t.Logf("network wait: first window %.4f, second %.4f", one.NetworkWaitShare, two.NetworkWaitShareLater)
}

// TestLooserSettings: --tolerance, --sync, --delivery-grace and
// --lease-share reach every node. A looser
// tolerance raises the derived bound and lets fewer checks wait on the
// network (each node's blind share and the lease pool grow with it); a
// faster sync leaves the bound as it is (the blind share follows the pace
// of a client at the limit, not the interval) and lets fewer wait too,
// each node learning its peers' admissions sooner. A longer delivery
// grace leaves the bound as it is too, and lets more wait: a node counts
// its admissions of the interval before as unseen for longer, so its
// blind share runs out sooner. Every run keeps both halves of the promise
// against its own bound.
func TestLooserSettings(t *testing.T) {
	cfg := quick(4)
	cfg.Duration = 10 * time.Second
	run := func(edit func(*Config)) Row {
		t.Helper()
		c := cfg
		edit(&c)
		rows, err := Run(c, nil)
		if err != nil {
			t.Fatal(err)
		}
		r := rows[0]
		if r.WorstRatio > r.BoundRatio || r.FalseRejections != 0 {
			t.Errorf("%+v: worst %.3f past its bound %.3f, or %d false rejections", c, r.WorstRatio, r.BoundRatio, r.FalseRejections)
		}
		return r
	}
	base := run(func(*Config) {})
	loose := run(func(c *Config) { c.Tolerance = 0.5 })
	fast := run(func(c *Config) { c.Sync = 50 * time.Millisecond })
	noLeases := run(func(c *Config) { c.LeaseShare = 0 })
	longGrace := run(func(c *Config) { c.Grace = 1 })
	t.Logf("waited: %.4f at limiterd's settings, %.4f at tolerance 0.5, %.4f syncing every 50ms, %.4f without leases, %.4f with a grace of the whole interval; bounds %.3f, %.3f, %.3f, %.3f, %.3f",
		base.NetworkWaitShare, loose.NetworkWaitShare, fast.NetworkWaitShare, noLeases.NetworkWaitShare, longGrace.NetworkWaitShare,
		base.BoundRatio, loose.BoundRatio, fast.BoundRatio, noLeases.BoundRatio, longGrace.BoundRatio)
	if !(longGrace.NetworkWaitShare > base.NetworkWaitShare) || longGrace.BoundRatio != base.BoundRatio {
		t.Errorf("grace of the whole interval: waited %.4f, bound %.3f; limiterd's: %.4f, %.3f", longGrace.NetworkWaitShare, longGrace.BoundRatio, base.NetworkWaitShare, base.BoundRatio)
	}
	if noLeases.NetworkWaitShare == base.NetworkWaitShare {
		t.Errorf("without leases as many checks waited as with them (%.4f): the lease share did not reach the nodes", base.NetworkWaitShare)
	}
	if base.NetworkWaitShare == 0 {
		t.Fatal("no check waited at limiterd's settings: the run says nothing")
	}
	if !(loose.BoundRatio > base.BoundRatio+0.3) || !(loose.NetworkWaitShare < base.NetworkWaitShare) {
		t.Errorf("tolerance 0.5: bound %.3f, waited %.4f; limiterd's: %.3f, %.4f", loose.BoundRatio, loose.NetworkWaitShare, base.BoundRatio, base.NetworkWaitShare)
	}
	if !(fast.NetworkWaitShare < base.NetworkWaitShare) {
		t.Errorf("sync every 50ms: waited %.4f, limiterd's %.4f", fast.NetworkWaitShare, base.NetworkWaitShare)
	}
}

// TestSimConfigCarriesTheNetwork: the latency, interval and grace of a run
// reach the simulated cluster it builds.
func TestSimConfigCarriesTheNetwork(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Latency, cfg.Sync, cfg.Grace = 2*time.Millisecond, 25*time.Millisecond, 0.8
	sc := SimConfig(cfg, 8)
	if sc.Latency != cfg.Latency || sc.Sync != cfg.Sync || sc.Grace != cfg.Grace || sc.Nodes != 8 {
		t.Errorf("SimConfig: latency %v, sync %v, grace %v, nodes %d; want %v, %v, %v, 8", sc.Latency, sc.Sync, sc.Grace, sc.Nodes, cfg.Latency, cfg.Sync, cfg.Grace)
	}
}
