package loadgen

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the output; run go test -update if the change is intended\ngot:\n%s", path, got)
	}
}

// fixedResult is a small run built by hand: no clock, no network.
func fixedResult(cfg *Config) *Result {
	start := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	st := &stats{status: map[int]int{}, phase: cfg.Phase, wall: start}
	ms := func(m float64) time.Duration { return time.Duration(m * float64(time.Millisecond)) }
	recs := []record{
		{sent: ms(0), key: 0, status: 200, target: 0},
		{sent: ms(50), key: 0, status: 200, target: 1},
		{sent: ms(100), key: 0, status: 429, target: 0},
		{sent: ms(150), key: 0, status: 200, target: 1, failOpen: true},
		{sent: ms(200), key: 0, status: StatusError, target: 0},
		{sent: ms(250), key: 0, status: 429, target: 1},
	}
	for i, r := range recs {
		sched := time.Duration(i) * 50 * time.Millisecond
		st.add(sched, r.sent, r.sent+ms(0.2+0.1*float64(i)), int(r.status), r.failOpen)
	}
	return &Result{cfg: cfg,
		runID: "rtest", start: start, elapsed: ms(251),
		scheduled: len(recs), schedSpan: ms(250), records: recs, keys: newKeyNamer(cfg, "rtest"), stats: st,
		cpu: 20 * time.Millisecond,
	}
}

func goldenConfig() Config {
	cfg := DefaultConfig()
	cfg.Targets = []string{"127.0.0.1:8081", "127.0.0.1:8082"}
	cfg.Limit, cfg.Window, cfg.Duration = 2, time.Second, 300*time.Millisecond
	cfg.Phase = 100 * time.Millisecond // sends at 0, 50, 100, ... ms: bins 0 and 5
	return cfg
}

func TestReportGolden(t *testing.T) {
	cfg := goldenConfig()
	rep := buildReport(&cfg, fixedResult(&cfg))
	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.golden", text.Bytes())
	golden(t, "report.golden.json", js.Bytes())
}

// TestReportJSONShape pins the top-level field names that doc.go
// documents and scripts read: renaming one breaks them.
func TestReportJSONShape(t *testing.T) {
	cfg := goldenConfig()
	rep := buildReport(&cfg, fixedResult(&cfg))
	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	want := []string{"version", "run_id", "targets", "spread", "pattern", "limit", "window_ms", "seed_scale", "factor", "rate",
		"keys", "zipf_s", "duration_ms", "client", "conns", "seed", "interrupted", "cut_at_deadline", "start_unix_ms", "elapsed_ms", "scheduled",
		"answered", "unsent", "target_rate", "achieved_rate", "latency_ms", "response_ms", "behind_schedule_ms", "latency_by_phase", "behind_schedule",
		"status", "fail_open", "generator_cpu_s", "analysed", "log_truncated", "accuracy"}
	for _, k := range want {
		if _, ok := m[k]; !ok {
			t.Errorf("field %q missing", k)
		}
	}
	for k := range m {
		if !slices.Contains(want, k) {
			t.Errorf("field %q is not in the documented list", k)
		}
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.ByPhase) != phaseBins || back.ByPhase[0].Requests != 3 || back.ByPhase[5].Requests != 3 || back.ByPhase[5].FromMs != 50 {
		t.Errorf("latency by phase: %+v", back.ByPhase)
	}
	if back.Accuracy.MaxInWindow != 3 || back.Status["429"] != 2 || back.Status["error"] != 1 || back.FailOpen != 1 ||
		back.Answered != 6 || back.Latency.Max < 0.7 || back.Accuracy.Worst[0].Key != "limitload-steady-rtest" {
		t.Errorf("report read back: %+v", back)
	}
}

func TestWriteTraces(t *testing.T) {
	cfg := goldenConfig()
	res := fixedResult(&cfg)
	res.records[1].sent = 5 * time.Millisecond // out of order: sorted by send instant
	res.records[0].sent = 7 * time.Millisecond
	var b bytes.Buffer
	if err := res.WriteTrace(&b); err != nil {
		t.Fatal(err)
	}
	golden(t, "trace.golden", b.Bytes())

	cfg.Pattern, cfg.Limit, cfg.Window, cfg.Duration = PatternEdgeBurst, 3, 1200*time.Millisecond, 3600*time.Millisecond
	cfg.Spread = SpreadLCG
	b.Reset()
	if err := WriteSchedule(&b, &cfg, "rtest"); err != nil {
		t.Fatal(err)
	}
	golden(t, "schedule.golden", b.Bytes())
}
