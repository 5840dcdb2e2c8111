package loadgen

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		in   string
		want []policy
		err  bool
	}{
		{in: `"default";q=600;w=60`, want: []policy{{"default", 600, 60}}},
		{in: `"api/1s";q=10;w=1, "api/60s";q=600;w=60`, want: []policy{{"api/1s", 10, 1}, {"api/60s", 600, 60}}},
		{in: `"a\"b";q=1;w=2;pk=:abc=:`, want: []policy{{`a"b`, 1, 2}}},
		{in: `token;w=5`, want: []policy{{"token", 0, 5}}},
		{in: `"x"`, want: []policy{{"x", 0, 0}}},
		{in: ``, err: true},
		{in: `"open`, err: true},
		{in: `"x";q=-1`, err: true},
		{in: `"x";q=ten`, err: true},
		{in: `"x" junk`, err: true},
		{in: `;q=1`, err: true},
		{in: `"x",`, want: []policy{{"x", 0, 0}}},
	}
	for _, tt := range tests {
		got, err := parsePolicy(tt.in)
		if (err != nil) != tt.err || !slices.Equal(got, tt.want) {
			t.Errorf("parsePolicy(%q) = %+v, %v; want %+v (error %v)", tt.in, got, err, tt.want, tt.err)
		}
	}
}

// FuzzParsePolicy: any header value ends with members or an error, never
// a panic; what it accepts has non-negative q and w and is read the same
// when printed back the way limiterd prints it.
func FuzzParsePolicy(f *testing.F) {
	f.Add(`"default";q=600;w=60`)
	f.Add(`"api/1s";q=10;w=1, "api/60s";q=600;w=60`)
	f.Add(`"a\\b";q=1`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parsePolicy(s)
		if err != nil {
			return
		}
		var parts []string
		for _, p := range got {
			if p.q < 0 || p.w < 0 {
				t.Fatalf("negative parameter in %+v", p)
			}
			name := strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(p.name)
			parts = append(parts, fmt.Sprintf(`"%s";q=%d;w=%d`, name, p.q, p.w))
		}
		again, err := parsePolicy(strings.Join(parts, ", "))
		if err != nil || !slices.Equal(again, got) {
			t.Fatalf("%q read as %+v, printed back and read as %+v, %v", s, got, again, err)
		}
	})
}

func TestPreflight(t *testing.T) {
	srv := nodetest.Serve(t, `
rules:
  - name: default
    limit: 600
    window: 10s
  - name: multi
    match: "multi:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 10s}
  - name: dry
    match: "dry:*"
    limit: 600
    window: 10s
    shadow: true
`)
	addr := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name   string
		limit  int
		window time.Duration
		key    string
		target string
		err    string
	}{
		{"match", 600, 10 * time.Second, "k", addr, ""},
		{"one of several limits", 600, 10 * time.Second, "multi:k", addr, ""},
		{"other limit", 60, 10 * time.Second, "k", addr, "q=600;w=10"},
		{"other window", 600, time.Minute, "k", addr, "--window 1m0s"},
		{"shadow rule", 600, 10 * time.Second, "dry:k", addr, "no RateLimit-Policy"},
		{"not listening", 600, 10 * time.Second, "k", "127.0.0.1:1", "does not answer"},
	}
	for _, tt := range tests {
		cfg := DefaultConfig()
		cfg.Limit, cfg.Window, cfg.Targets = tt.limit, tt.window, []string{addr, tt.target}
		err := preflight(&cfg, tt.key)
		switch {
		case tt.err == "" && err != nil:
			t.Errorf("%s: %v", tt.name, err)
		case tt.err != "" && (err == nil || !errors.Is(err, ErrPreflight) || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s: %v, want an error with %q", tt.name, err, tt.err)
		}
	}
}
