package loadgen

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// streamsConfig is a PatternStreams run of d over targets.
func streamsConfig(d time.Duration, targets []string, streams ...Stream) Config {
	cfg := DefaultConfig()
	cfg.Pattern, cfg.Streams, cfg.Duration, cfg.Targets = PatternStreams, streams, d, targets
	cfg.Progress = 0
	return cfg
}

// TestStreamsSchedule: a steady stream's requests are evenly spaced from
// instant 0 on its one key, a Poisson stream's keys are its key and an
// index, and the merged schedule is in time order.
func TestStreamsSchedule(t *testing.T) {
	cfg := streamsConfig(time.Second, nil,
		Stream{Key: "steady", Rate: 10},
		Stream{Key: "many-", Keys: 100, ZipfS: 1.1, Rate: 50, Poisson: true})
	cfg.DryRun = true
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteSchedule(&b, &cfg, "r"); err != nil {
		t.Fatal(err)
	}
	var steady []string
	many, last := 0, int64(-1)
	for _, l := range strings.Split(strings.TrimSpace(b.String()), "\n")[1:] {
		f := strings.Fields(l)
		at, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || len(f) != 2 || at < last || at >= 1000 {
			t.Fatalf("line %q after %d ms", l, last)
		}
		last = at
		switch k := f[1]; {
		case k == "steady":
			steady = append(steady, f[0])
		case strings.HasPrefix(k, "many-"):
			if i, err := strconv.Atoi(strings.TrimPrefix(k, "many-")); err != nil || i < 0 || i >= 100 {
				t.Fatalf("key %q: want many-0 to many-99", k)
			}
			many++
		default:
			t.Fatalf("key %q of no stream", k)
		}
	}
	if got := strings.Join(steady, " "); got != "0 100 200 300 400 500 600 700 800 900" {
		t.Errorf("the steady stream at %s ms", got)
	}
	if many < 20 || many > 100 {
		t.Errorf("%d requests of a Poisson stream of 50/s for 1 s", many)
	}
}

func TestStreamsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"streams without the pattern", func(c *Config) { c.Pattern = PatternSteady }, "streams need pattern"},
		{"the pattern without streams", func(c *Config) { c.Streams = nil }, "streams need pattern"},
		{"no key", func(c *Config) { c.Streams[0].Key = "" }, "stream 0: no key"},
		{"space in a key", func(c *Config) { c.Streams[0].Key = "a b" }, "white space"},
		{"no rate", func(c *Config) { c.Streams[0].Rate = 0 }, "stream 0: rate"},
		{"negative keys", func(c *Config) { c.Streams[0].Keys = -1 }, "stream 0: -1 keys"},
		{"flat zipf", func(c *Config) { c.Streams[0].ZipfS = 1 }, "Zipf exponent"},
		{"too many requests", func(c *Config) { c.Streams[0].Rate, c.Duration = maxRateFlag, time.Hour }, "requests"},
		{"key-round-robin over too many keys", func(c *Config) { c.Spread, c.Streams[0].Keys = SpreadKeyRoundRobin, maxKeyRoundRobin+1 }, "key-round-robin"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := streamsConfig(time.Second, []string{"127.0.0.1:1"}, Stream{Key: "k", Rate: 1})
			tc.edit(&cfg)
			err := cfg.Validate(nil)
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want an error with %q", err, tc.want)
			}
		})
	}
	cfg := streamsConfig(0, []string{"127.0.0.1:1"}, Stream{Key: "k", Rate: 1})
	if err := cfg.Validate(nil); err != nil || cfg.Duration != time.Minute {
		t.Fatalf("%v, duration %v: want a valid minute", err, cfg.Duration)
	}
}

// TestRunHooks: Dial opens every connection, Available passes a target
// over, and Observe sees every request with its stream, key, target and
// instants; the report counts the streams' keys and rate.
func TestRunHooks(t *testing.T) {
	srv := nodetest.Serve(t, "rules:\n  - name: default\n    limit: 20\n    window: 1s\n")
	addr := strings.TrimPrefix(srv.URL, "http://")
	cfg := streamsConfig(500*time.Millisecond, []string{addr, addr},
		Stream{Key: "hooks-a", Rate: 40}, Stream{Key: "hooks-b-", Keys: 3, Rate: 20})
	cfg.Limit, cfg.Window, cfg.Spread, cfg.Conns = 20, time.Second, SpreadRoundRobin, 2
	var dials atomic.Int64
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials.Add(1)
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cfg.Available = func(target int) bool { return target == 1 }
	var mu sync.Mutex
	var seen []Outcome
	cfg.Observe = func(o Outcome) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, o)
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	res := Run(context.Background(), &cfg, "r", nil)
	rep := res.Report()
	if rep.Scheduled != 30 || rep.Answered != 30 || rep.Keys != 4 || rep.Rate != 60 || rep.Pattern != PatternStreams {
		t.Fatalf("report: scheduled %d answered %d keys %d rate %v pattern %s", rep.Scheduled, rep.Answered, rep.Keys, rep.Rate, rep.Pattern)
	}
	if dials.Load() == 0 {
		t.Error("Dial was never called")
	}
	perStream, keysOfB := map[int]int{}, map[int]bool{}
	for _, o := range seen {
		perStream[o.Stream]++
		if o.Stream == 1 {
			keysOfB[o.Key] = true
		}
		if o.Target != 1 || (o.Status != http.StatusOK && o.Status != http.StatusTooManyRequests) || o.Err != nil ||
			o.Sent < o.Sched || o.Done < o.Sent || (o.Stream == 0 && o.Key != 0) || o.Key < 0 || o.Key > 2 {
			t.Fatalf("outcome %+v", o)
		}
	}
	if len(seen) != 30 || perStream[0] != 20 || perStream[1] != 10 {
		t.Fatalf("%d outcomes, by stream %v: want 20 and 10", len(seen), perStream)
	}
	if a := rep.Accuracy; a.Keys != 1+len(keysOfB) {
		t.Errorf("accuracy over %d keys, want hooks-a and the %d of stream 1 seen", a.Keys, len(keysOfB))
	}
}

// TestMaxLate: against a server slower than the schedule, the requests
// that would go out more than MaxLate late are dropped, observed unsent,
// and counted unsent in the report.
func TestMaxLate(t *testing.T) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(100 * time.Millisecond)
		w.WriteHeader(http.StatusTooManyRequests)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	// 10 requests in 500 ms on one connection that takes 100 ms each.
	cfg := streamsConfig(500*time.Millisecond, []string{ln.Addr().String()}, Stream{Key: "late", Rate: 20})
	cfg.Conns, cfg.MaxLate = 1, 50*time.Millisecond
	var sent, dropped atomic.Int64
	cfg.Observe = func(o Outcome) {
		if o.Status == StatusNotSent {
			if o.Sent != 0 || o.Done != 0 {
				t.Errorf("an unsent request with instants: %+v", o)
			}
			dropped.Add(1)
		} else {
			sent.Add(1)
		}
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), &cfg, "r", nil).Report()
	if dropped.Load() == 0 || sent.Load()+dropped.Load() != 10 || rep.Unsent != int(dropped.Load()) || rep.Answered != int(sent.Load()) {
		t.Fatalf("%d sent, %d dropped; report answered %d unsent %d", sent.Load(), dropped.Load(), rep.Answered, rep.Unsent)
	}
}

// TestOnePerKey: a key's requests never overlap, whatever the rate: one
// due while the key's last is unanswered is dropped, observed unsent and
// counted unsent; two keys still go at once.
func TestOnePerKey(t *testing.T) {
	var inFlight, most sync.Map // key -> *atomic.Int64
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.URL.Query().Get("key")
		v, _ := inFlight.LoadOrStore(key, new(atomic.Int64))
		m, _ := most.LoadOrStore(key, new(atomic.Int64))
		n := v.(*atomic.Int64).Add(1)
		for old := m.(*atomic.Int64).Load(); n > old && !m.(*atomic.Int64).CompareAndSwap(old, n); old = m.(*atomic.Int64).Load() {
		}
		time.Sleep(50 * time.Millisecond)
		v.(*atomic.Int64).Add(-1)
		w.WriteHeader(http.StatusOK)
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	// 30 requests of each key in 300 ms, on connections enough for all.
	cfg := streamsConfig(300*time.Millisecond, []string{ln.Addr().String()}, Stream{Key: "one-a", Rate: 100}, Stream{Key: "one-b", Rate: 100})
	cfg.Conns, cfg.OnePerKey = 16, true
	var sent, dropped atomic.Int64
	cfg.Observe = func(o Outcome) {
		if o.Status == StatusNotSent {
			dropped.Add(1)
		} else {
			sent.Add(1)
		}
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	rep := Run(context.Background(), &cfg, "r", nil).Report()
	for _, key := range []string{"one-a", "one-b"} {
		m, ok := most.Load(key)
		if !ok || m.(*atomic.Int64).Load() != 1 {
			t.Errorf("%s: at most %v in flight at once, want 1", key, m)
		}
	}
	if sent.Load() < 2 || sent.Load() > 20 || sent.Load()+dropped.Load() != 60 || rep.Answered != int(sent.Load()) || rep.Unsent != int(dropped.Load()) {
		t.Fatalf("%d sent, %d dropped; report answered %d unsent %d", sent.Load(), dropped.Load(), rep.Answered, rep.Unsent)
	}
}
