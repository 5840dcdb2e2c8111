package clustersim

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// recordRun runs a busy load on cfg (Zipf keys, round robin over the
// nodes, the hottest past their limit, so that checks ask, lease and are
// denied) with node 2 recorded, and returns the record.
func recordRun(t *testing.T, cfg Config) []byte {
	t.Helper()
	var rec bytes.Buffer
	cfg.Record, cfg.RecordNode = &rec, 2
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 8))
	zipf := rand.NewZipf(rng, 1.2, 1, 199)
	var d limiter.Decision
	for i := range 6000 {
		at := int64(i) / 2 // 2,000 checks a second over 3 s
		if err := s.Check(at, fmt.Sprint("k", zipf.Uint64()), i%cfg.Nodes, 1, &d); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Finish(); err != nil {
		t.Fatal(err)
	}
	return rec.Bytes()
}

// recordedConfig is the cluster of the replay tests: 6 nodes, 60 a minute.
func recordedConfig() Config {
	cfg := DefaultConfig()
	cfg.Nodes, cfg.Limit, cfg.RecordNode = 6, 60, 2
	return cfg
}

// TestReplayAloneDecidesAsRecorded: a node replayed alone takes every
// decision it took in the simulation, asks included, broadcast or routed
// and on a lossy, duplicating network, and its engine is timed.
func TestReplayAloneDecidesAsRecorded(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
	}{
		{"mesh", func(*Config) {}},
		{"routed", func(c *Config) { c.Routing = counter.RouteAlways }},
		{"lossy routed", func(c *Config) {
			c.Routing, c.Loss, c.NetSeed, c.Dup = counter.RouteAlways, 0.05, 3, true
			c.Latency, c.Deadline = time.Millisecond, 5*time.Millisecond
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := recordedConfig()
			tc.edit(&cfg)
			got, err := Replay(cfg, bytes.NewReader(recordRun(t, cfg)))
			if err != nil {
				t.Fatal(err)
			}
			if got.Checks != 1000 || got.Asks == 0 || got.Messages == 0 {
				t.Fatalf("replayed %d checks, %d asks, %d messages: want 1,000 checks (a sixth of 6,000), some asks and messages", got.Checks, got.Asks, got.Messages)
			}
			if got.Engine.Wall <= 0 {
				t.Errorf("replay timed the engine at %d ns, want above 0", got.Engine.Wall)
			}
		})
	}
}

// TestReplayNoticesADifferentRun: a replay whose inputs are not what the
// node took in fails rather than time a different run: a record cut
// short, or replayed on a node with another limit.
func TestReplayNoticesADifferentRun(t *testing.T) {
	cfg := recordedConfig()
	cfg.Routing = counter.RouteAlways
	rec := recordRun(t, cfg)
	other := cfg
	other.Limit = 30
	for _, tc := range []struct {
		name string
		cfg  Config
		rec  []byte
	}{
		{"cut short", cfg, rec[:len(rec)*2/3]},
		{"without its end", cfg, rec[:bytes.LastIndexByte(rec, recEnd)]},
		{"another limit", other, rec},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Replay(tc.cfg, bytes.NewReader(tc.rec)); !errors.Is(err, ErrReplayDiffers) {
				t.Fatalf("replay: %v, want ErrReplayDiffers", err)
			}
		})
	}
}
