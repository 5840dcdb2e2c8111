package httpapi

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		cfg     Config
		wantErr string // "" for valid
	}{
		{"zero value means defaults", Config{}, ""},
		{"defaults", DefaultConfig(), ""},
		{"custom header", Config{KeyHeader: "X-Api-Key"}, ""},
		{"header with token characters", Config{KeyHeader: "x_key.v1~!#$%&'*+^`|"}, ""},
		{"header with a space", Config{KeyHeader: "X Api"}, `KeyHeader "X Api" is not a valid header name`},
		{"header with a colon", Config{KeyHeader: "X-Api:"}, "is not a valid header name"},
		{"header with non-ASCII", Config{KeyHeader: "X-Clé"}, "is not a valid header name"},
		{"negative body cap", Config{MaxBodyBytes: -1}, "MaxBodyBytes must be between 1 and 1048576 (0 for the default), got -1"},
		{"huge body cap", Config{MaxBodyBytes: 1<<20 + 1}, "MaxBodyBytes must be between 1 and 1048576"},
		{"largest body cap", Config{MaxBodyBytes: 1 << 20}, ""},
		{"every problem: the header", Config{KeyHeader: "X Api", MaxBodyBytes: -1}, "is not a valid header name"},
		{"every problem: the body cap", Config{KeyHeader: "X Api", MaxBodyBytes: -1}, "MaxBodyBytes must be"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Validate: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("Validate: %v, want an error containing %q", err, tc.wantErr)
			case tc.wantErr != "" && !errors.Is(err, ErrInvalidConfig):
				t.Errorf("Validate: %v does not wrap ErrInvalidConfig", err)
			}
			// New agrees with Validate.
			reg := prometheus.NewRegistry()
			_, nerr := New(tc.cfg, newDecider(t, t0, &recorder{}, reg, nil), reg, nil)
			if (nerr == nil) != (err == nil) {
				t.Errorf("New: %v, Validate: %v", nerr, err)
			}
		})
	}
}

func TestNewRejectsMissingDependencies(t *testing.T) {
	dec := newDecider(t, t0, &recorder{}, prometheus.NewRegistry(), nil)
	if _, err := New(DefaultConfig(), nil, prometheus.NewRegistry(), nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Decider: %v", err)
	}
	if _, err := New(DefaultConfig(), dec, nil, nil); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("nil Registry: %v", err)
	}
	// Metrics registered twice on one registry is a wiring mistake, reported.
	reg := prometheus.NewRegistry()
	if _, err := New(DefaultConfig(), dec, reg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := New(DefaultConfig(), dec, reg, nil); err == nil || !strings.Contains(err.Error(), "registering metrics") {
		t.Errorf("second New on one registry: %v", err)
	}
	// A failed New leaves the registry as it found it.
	reg = prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "limiterd_bad_requests_total", Help: "clash"}))
	if _, err := New(DefaultConfig(), dec, reg, nil); err == nil {
		t.Fatal("New succeeded despite a clashing metric")
	}
	mfs, _ := reg.Gather()
	if len(mfs) != 1 || mfs[0].GetName() != "limiterd_bad_requests_total" {
		t.Errorf("registry after a failed New holds %d families", len(mfs))
	}
}

// TestZeroConfigUsesDefaults: the zero Config takes the key from
// X-Forwarded-For and caps bodies at 4096 bytes. (The default clock is the
// Decider's, tested in package decision.)
func TestZeroConfigUsesDefaults(t *testing.T) {
	rc := &recorder{}
	a, _ := newAPI(t, Config{}, rc, nil)
	rec := serve(a, get("/check", "X-Forwarded-For", "203.0.113.7, 10.0.0.1"))
	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %s", rec.Code, rec.Body)
	}
	if got := rc.calls()[0].Key; got != "203.0.113.7" {
		t.Errorf("key %q: the default header is not X-Forwarded-For", got)
	}
	big := post(`{"key":"`+strings.Repeat("a", 4100)+`"}`, "")
	if rec := serve(a, big); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("4 KiB body: status %d, want 413 (default MaxBodyBytes 4096)", rec.Code)
	}
}

func TestRouting(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		target     string
		wantStatus int
		wantAllow  string
		wantBody   string // substring
	}{
		{"unknown path", "GET", "/nope", 404, "", `"error":"no such endpoint`},
		{"root", "GET", "/", 404, "", "no such endpoint"},
		{"trailing slash", "GET", "/check/", 404, "", "no such endpoint"},
		{"case matters", "GET", "/Check?key=a", 404, "", "no such endpoint"},
		{"healthz", "GET", "/healthz", 200, "", `{"status":"ok"}`},
		{"healthz HEAD", "HEAD", "/healthz", 200, "", ""},
		{"healthz POST", "POST", "/healthz", 405, "GET, HEAD", "method POST not allowed; use GET or HEAD"},
		{"readyz DELETE", "DELETE", "/readyz", 405, "GET, HEAD", "method DELETE not allowed"},
		{"metrics POST", "POST", "/metrics", 405, "GET, HEAD", "not allowed"},
		{"metrics", "GET", "/metrics", 200, "", "limiterd_check_errors_total 0"},
		{"check", "GET", "/check?key=a", 200, "", `"allowed":true`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAPI(t, testConfig(), &recorder{}, nil)
			rec := serve(a, httptest.NewRequest(tc.method, tc.target, nil))
			if rec.Code != tc.wantStatus {
				t.Errorf("status %d, want %d", rec.Code, tc.wantStatus)
			}
			if got := rec.Header().Get("Allow"); got != tc.wantAllow {
				t.Errorf("Allow %q, want %q", got, tc.wantAllow)
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q does not contain %q", rec.Body, tc.wantBody)
			}
		})
	}
}

func TestReadiness(t *testing.T) {
	var notReady error
	cfg := testConfig()
	cfg.Ready = func() error { return notReady }
	a, _ := newAPI(t, cfg, &recorder{}, nil)

	steps := []struct {
		state      error
		wantReady  int
		wantHealth int
		wantBody   string
	}{
		{errors.New(`rules not loaded: open "/etc/limiterd/rules.yaml": no such file`), 503, 200,
			`{"status":"not ready","error":"rules not loaded: open \"/etc/limiterd/rules.yaml\": no such file"}` + "\n"},
		{nil, 200, 200, `{"status":"ok"}` + "\n"},
		{errors.New("draining"), 503, 200, `{"status":"not ready","error":"draining"}` + "\n"},
	}
	for i, s := range steps {
		notReady = s.state
		rec := serve(a, get("/readyz"))
		if rec.Code != s.wantReady || rec.Body.String() != s.wantBody {
			t.Errorf("step %d: /readyz %d %q, want %d %q", i, rec.Code, rec.Body, s.wantReady, s.wantBody)
		}
		if rec := serve(a, get("/healthz")); rec.Code != s.wantHealth {
			t.Errorf("step %d: /healthz %d, want %d", i, rec.Code, s.wantHealth)
		}
	}

	// nil Ready: always ready.
	b, _ := newAPI(t, testConfig(), &recorder{}, nil)
	if rec := serve(b, get("/readyz")); rec.Code != http.StatusOK {
		t.Errorf("nil Ready: /readyz %d", rec.Code)
	}
}

// TestConcurrentChecksAreExact runs checks from several goroutines against a
// limit-counting fake: the pooled per-request state must not leak between
// requests (the race detector watches too).
func TestConcurrentChecksAreExact(t *testing.T) {
	const workers, each = 8, 200
	var mu sync.Mutex
	count := map[string]int64{}
	a, _ := newAPI(t, testConfig(), checkFunc(func(_ time.Time, req limiter.Request, d *limiter.Decision) error {
		mu.Lock()
		count[req.Key]++
		n := count[req.Key]
		mu.Unlock()
		*d = allowed()
		d.Rule = req.Key // distinct per worker, so a mixed-up state shows
		d.Limits[0].Remaining = 1000 - n
		return nil
	}), nil)
	done := make(chan error, workers)
	for w := range workers {
		go func() {
			key := "k" + string(rune('a'+w))
			for i := range each {
				rec := serve(a, get("/check?key="+key))
				want := `"remaining":` + strconv.Itoa(1000-i-1) + `,`
				if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) || !strings.Contains(rec.Body.String(), `"rule":"`+key+`"`) {
					done <- errors.New("worker " + key + ": " + rec.Body.String() + " lacks " + want)
					return
				}
			}
			done <- nil
		}()
	}
	for range workers {
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
