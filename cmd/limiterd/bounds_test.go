package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

const boundsRules = `rules:
  - name: default
    limit: 600
    window: 60s
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s}
  - name: burst
    match: "burst:*"
    limit: 600
    window: 10s
  - name: trial
    match: "trial:*"
    limit: 120
    window: 500ms
    shadow: true
`

// boundsFixture is a boundsWatch over a cluster-mode counter at the
// default settings (200 ms sync, tolerance 0.1), logging JSON to a buffer.
type boundsFixture struct {
	ctr *counter.Counter
	lim *limiter.Limiter
	bw  *boundsWatch
	reg *prometheus.Registry
	out bytes.Buffer
}

func newBoundsFixture(t *testing.T, rules string, budget bool) *boundsFixture {
	t.Helper()
	fx := &boundsFixture{reg: prometheus.NewRegistry()}
	var err error
	if fx.ctr, err = counter.New(counter.DefaultConfig()); err != nil {
		t.Fatal(err)
	}
	cc := counter.DefaultClusterConfig("a")
	// The budget alone (-coordinate=false): the settings whose bounds
	// depend on the sync interval and the node count, and need advice.
	cc.Budget, cc.Coordinated = budget, false
	if err := fx.ctr.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	if fx.lim, err = limiter.New(fx.ctr, mustRules(t, rules)); err != nil {
		t.Fatal(err)
	}
	// No time attribute: the output is deterministic.
	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(slog.NewJSONHandler(&fx.out, &slog.HandlerOptions{ReplaceAttr: noTime}))
	if fx.bw, err = newBoundsWatch(fx.lim, counter.DefaultConfig(), &cc, fx.reg, log); err != nil {
		t.Fatal(err)
	}
	return fx
}

func mustRules(t *testing.T, rules string) *limiter.RuleSet {
	t.Helper()
	rs, err := limiter.Parse("rules.yaml", []byte(rules))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

// nodes moves the cluster to n nodes as cluster.Node does: the counter
// first, then the callback.
func (fx *boundsFixture) nodes(t *testing.T, n int) {
	t.Helper()
	if err := fx.ctr.SetNodes(n); err != nil {
		t.Fatal(err)
	}
	fx.bw.setNodes(n)
}

// logs returns the records logged since the last call.
func (fx *boundsFixture) logs(t *testing.T) []map[string]any {
	t.Helper()
	var recs []map[string]any
	for line := range strings.Lines(fx.out.String()) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		recs = append(recs, m)
	}
	fx.out.Reset()
	return recs
}

// gauge returns limiterd_rule_worst_case_ratio by "rule limit".
func (fx *boundsFixture) gauge(t *testing.T) map[string]float64 {
	t.Helper()
	mfs, err := fx.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "limiterd_rule_worst_case_ratio" {
			continue
		}
		for _, m := range mf.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			got[l["rule"]+" "+l["limit"]] = m.GetGauge().GetValue()
		}
	}
	return got
}

// wantLog is one expected record: its level, rule, limit and the other
// fields it must have (numbers as JSON decodes them, float64).
type wantLog struct {
	level, rule, limit string
	fields             map[string]any
	fix                string // a part of the "fix" field
}

func checkLogs(t *testing.T, got []map[string]any, want []wantLog) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d log records, want %d: %v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g["level"] != w.level || g["rule"] != w.rule || g["limit"] != w.limit {
			t.Errorf("record %d: %v, want %s for %s %s", i, g, w.level, w.rule, w.limit)
			continue
		}
		for k, v := range w.fields {
			if g[k] != v {
				t.Errorf("record %d (%s %s): %s = %v (%T), want %v", i, w.rule, w.limit, k, g[k], g[k], v)
			}
		}
		if fix, _ := g["fix"].(string); !strings.Contains(fix, w.fix) {
			t.Errorf("record %d (%s %s): fix %q, want it to contain %q", i, w.rule, w.limit, fix, w.fix)
		}
	}
}

// The warning comes once per limit when it goes above 1.1x, not again while
// it stays above, and an info line when it comes back.
func TestBoundsWarnOnceAndRecover(t *testing.T) {
	fx := newBoundsFixture(t, boundsRules, true)
	steps := []struct {
		name  string
		do    func()
		logs  []wantLog
		gauge map[string]float64
	}{
		{
			name: "one node: every limit at 1.1x",
			do:   func() { fx.bw.check("rules loaded") },
			gauge: map[string]float64{
				"default 600/60s": 1.1, "api 10/1s": 1.1, "api 600/60s": 1.1, "burst 600/10s": 1.1, "trial 120/500ms": 1.1,
			},
		},
		{
			// L + 8·f + 8·T: f = ceil(L × 250 ms / W), T = floor(L × 0.03 / 8).
			name: "eight nodes",
			do:   func() { fx.nodes(t, 8) },
			logs: []wantLog{
				{"WARN", "api", "10/1s", map[string]any{"worst_case": 34.0, "ratio": 3.4, "promised": 1.1, "nodes": 8.0, "sync_interval": "200ms", "window": "1s", "shadow": false},
					"the limit is too small to share among 8 nodes: whatever the sync interval, each node may admit a request of a key before its peers hear of it, and those 8 plus slice tails of 0 exceed the 1 over 10 that 1.1x allows; the smallest larger limit per 1s that a short enough sync interval keeps within 1.1x on 8 nodes is 80"},
				// 67 ms: f = ceil(600 × 83 ms / 10 s) = 5, 600 + 40 + 16 = 656 <= 660; 68 ms: f = 6.
				{"WARN", "burst", "600/10s", map[string]any{"worst_case": 736.0, "ratio": 1.227, "nodes": 8.0},
					"shorten -sync-interval to 67ms or less on every node (worst case then 656, 1.093x)"},
				// 3 ms: f = ceil(120 × 3 ms / 500 ms) = 1; 4 ms: 5 ms with the grace, f = 2.
				{"WARN", "trial", "120/500ms", map[string]any{"worst_case": 600.0, "ratio": 5.0, "shadow": true},
					"shorten -sync-interval to 3ms or less on every node (worst case then 128, 1.067x)"},
			},
			gauge: map[string]float64{
				"default 600/60s": 1.067, "api 10/1s": 3.4, "api 600/60s": 1.067, "burst 600/10s": 1.227, "trial 120/500ms": 5,
			},
		},
		{
			name: "same rules reloaded: still above, no repeat",
			do:   func() { fx.bw.check("rules reloaded") },
			gauge: map[string]float64{
				"default 600/60s": 1.067, "api 10/1s": 3.4, "api 600/60s": 1.067, "burst 600/10s": 1.227, "trial 120/500ms": 5,
			},
		},
		{
			// burst: 600 + 2·15 + 2·9 = 648, back within; api 10/1s: 10 + 2·3 = 16.
			name: "two nodes: burst back within",
			do:   func() { fx.nodes(t, 2) },
			logs: []wantLog{
				{"INFO", "burst", "600/10s", map[string]any{"worst_case": 648.0, "ratio": 1.08, "nodes": 2.0}, ""},
			},
			gauge: map[string]float64{
				"default 600/60s": 1.04, "api 10/1s": 1.6, "api 600/60s": 1.04, "burst 600/10s": 1.08, "trial 120/500ms": 2.017,
			},
		},
		{
			// A changed limit is a new one: 20/1s is warned about; the gone
			// 10/1s and burst leave the gauge silently.
			name: "reload: api 20/1s, no burst",
			do: func() {
				rules := strings.Replace(boundsRules, "{limit: 10, window: 1s}", "{limit: 20, window: 1s}", 1)
				rules = rules[:strings.Index(rules, "  - name: burst")] + rules[strings.Index(rules, "  - name: trial"):]
				if err := fx.lim.SetRules(mustRules(t, rules)); err != nil {
					t.Fatal(err)
				}
				fx.bw.check("rules reloaded")
			},
			logs: []wantLog{
				// 20 + 2·ceil(20 × 250 ms / 1 s) + 2·0 = 30; f = 1 up to a
				// span of 50 ms: 40 ms and its 10 ms grace.
				{"WARN", "api", "20/1s", map[string]any{"worst_case": 30.0, "ratio": 1.5, "nodes": 2.0},
					"shorten -sync-interval to 40ms or less on every node (worst case then 22, 1.1x)"},
			},
			gauge: map[string]float64{
				"default 600/60s": 1.04, "api 20/1s": 1.5, "api 600/60s": 1.04, "trial 120/500ms": 2.017,
			},
		},
		{
			name: "back to one node: every limit within",
			do:   func() { fx.nodes(t, 1) },
			logs: []wantLog{
				{"INFO", "api", "20/1s", map[string]any{"worst_case": 22.0, "nodes": 1.0}, ""},
				{"INFO", "trial", "120/500ms", map[string]any{"worst_case": 132.0, "nodes": 1.0}, ""},
			},
			gauge: map[string]float64{
				"default 600/60s": 1.1, "api 20/1s": 1.1, "api 600/60s": 1.1, "trial 120/500ms": 1.1,
			},
		},
	}
	for _, s := range steps {
		s.do()
		t.Run(s.name, func(t *testing.T) {
			checkLogs(t, fx.logs(t), s.logs)
			got := fx.gauge(t)
			if len(got) != len(s.gauge) {
				t.Errorf("gauge %v, want %v", got, s.gauge)
			}
			for k, v := range s.gauge {
				if g, ok := got[k]; !ok || round3(g) != v {
					t.Errorf("gauge %s = %v (present %v), want %v", k, g, ok, v)
				}
			}
		})
	}
}

// With the coordinator deciding at the margin (the default) every limit,
// 10 per second on 8 nodes included, is within its promised bound: nothing
// is warned about, and every ratio is at most 1.1.
func TestBoundsCoordinatedKeepsEveryLimit(t *testing.T) {
	fx := newBoundsFixture(t, boundsRules, true)
	cc, _ := fx.ctr.Cluster()
	cc.Coordinated = true
	if err := fx.ctr.SetCluster(cc); err != nil {
		t.Fatal(err)
	}
	fx.bw.cc.Coordinated = true
	fx.bw.check("rules loaded")
	fx.nodes(t, 8)
	checkLogs(t, fx.logs(t), nil)
	for k, v := range fx.gauge(t) {
		if v > 1.1 {
			t.Errorf("gauge %s = %v, want at most 1.1", k, v)
		}
	}
}

// With the budget off the advice is to turn it on, and what remains to do
// after that.
func TestBoundsAdviceWithoutBudget(t *testing.T) {
	fx := newBoundsFixture(t, boundsRules, false)
	fx.nodes(t, 2)
	fx.bw.mu.Lock()
	defer fx.bw.mu.Unlock()
	tests := []struct {
		limit  int64
		window time.Duration
		want   string
	}{
		// Without: 2·(600 + 9) = 1218. With: 600 + 2·3 + 2·9 = 624.
		{600, time.Minute, "turn the per-node budget on (-budget=true) on every node: without it each node may admit the whole limit between two syncs; with it the worst case is 624 (1.04x)"},
		// With: 600 + 2·30 + 2·9 = 678; at 140 ms (175 ms with the grace) f = 21.
		{600, 5 * time.Second, "turn the per-node budget on (-budget=true) on every node, and then: shorten -sync-interval to 140ms or less on every node (worst case then 660, 1.1x)"},
		{10, time.Second, "turn the per-node budget on (-budget=true) on every node, and then: the limit is too small to share among 2 nodes"},
	}
	for _, tt := range tests {
		if got := fx.bw.advice(tt.limit, tt.window); !strings.HasPrefix(got, tt.want) {
			t.Errorf("%d/%v: %q, want it to start with %q", tt.limit, tt.window, got, tt.want)
		}
	}
}

// A single node never warns: its bound is the promised one.
func TestBoundsSingleNode(t *testing.T) {
	reg := prometheus.NewRegistry()
	var out bytes.Buffer
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(c, mustRules(t, boundsRules))
	if err != nil {
		t.Fatal(err)
	}
	bw, err := newBoundsWatch(lim, counter.DefaultConfig(), nil, reg, slog.New(slog.NewTextHandler(&out, nil)))
	if err != nil {
		t.Fatal(err)
	}
	bw.check("rules loaded")
	if out.Len() != 0 {
		t.Errorf("a single node logged: %s", out.String())
	}
	mfs, err := reg.Gather()
	if err != nil || len(mfs) != 1 || len(mfs[0].GetMetric()) != 5 {
		t.Fatalf("gauge: %v %v", mfs, err)
	}
	for _, m := range mfs[0].GetMetric() {
		if v := m.GetGauge().GetValue(); round3(v) != 1.1 {
			t.Errorf("%v: %v, want 1.1", m.GetLabel(), v)
		}
	}
}
