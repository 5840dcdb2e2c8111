package middleware_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"

	"github.com/limiterd/limiterd/client/middleware"
)

func TestClientIP(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("2001:db8:ffff::/48")}
	tests := []struct {
		name    string
		trusted []netip.Prefix
		remote  string
		xff     []string // X-Forwarded-For lines
		want    string   // "" for an ErrNoKey
	}{
		{"peer", nil, "203.0.113.7:4711", nil, "203.0.113.7"},
		{"spoof refused: no proxy trusted", nil, "203.0.113.7:4711", []string{"198.51.100.1"}, "203.0.113.7"},
		{"spoof refused: peer not trusted", proxies, "203.0.113.7:4711", []string{"198.51.100.1"}, "203.0.113.7"},
		{"spoof refused: a trusted address from an untrusted peer", proxies, "203.0.113.7:4711", []string{"10.0.0.9"}, "203.0.113.7"},
		{"via a trusted proxy", proxies, "10.0.0.1:4711", []string{"198.51.100.1"}, "198.51.100.1"},
		{"spoofed prefix ignored", proxies, "10.0.0.1:4711", []string{"192.0.2.66, 198.51.100.1"}, "198.51.100.1"},
		{"two trusted proxies", proxies, "10.0.0.1:4711", []string{"192.0.2.66, 198.51.100.1, 10.0.0.2"}, "198.51.100.1"},
		{"several header lines are one list", proxies, "10.0.0.1:4711", []string{"192.0.2.66", "198.51.100.1, 10.0.0.2"}, "198.51.100.1"},
		{"spoofed trusted address left of the client", proxies, "10.0.0.1:4711", []string{"10.9.9.9, 198.51.100.1"}, "198.51.100.1"},
		{"trusted peer without the header", proxies, "10.0.0.1:4711", nil, "10.0.0.1"},
		{"every address trusted: the leftmost", proxies, "10.0.0.1:4711", []string{"10.0.0.3, 10.0.0.2"}, "10.0.0.3"},
		{"junk from the peer: the peer", proxies, "10.0.0.1:4711", []string{"198.51.100.1, unknown"}, "10.0.0.1"},
		{"junk from the second proxy: that proxy", proxies, "10.0.0.1:4711", []string{"198.51.100.1, unknown, 10.0.0.2"}, "10.0.0.2"},
		{"empty elements and blanks", proxies, "10.0.0.1:4711", []string{" 198.51.100.1 ,\t, "}, "198.51.100.1"},
		{"entry with a port", proxies, "10.0.0.1:4711", []string{"198.51.100.1:5555"}, "198.51.100.1"},
		{"IPv6 entry with a port", proxies, "10.0.0.1:4711", []string{"[2001:db8::1]:5555"}, "2001:db8::1"},
		{"IPv6 entry in brackets", proxies, "10.0.0.1:4711", []string{"[2001:db8::1]"}, "2001:db8::1"},
		{"IPv6 peer", nil, "[2001:db8::5]:443", nil, "2001:db8::5"},
		{"IPv6 trusted proxy", proxies, "[2001:db8:ffff::1]:443", []string{"2001:db8::7"}, "2001:db8::7"},
		{"zone dropped", nil, "[fe80::1%eth0]:443", nil, "fe80::1"},
		{"IPv4-mapped peer is IPv4", proxies, "[::ffff:10.0.0.1]:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"IPv4-mapped entry is IPv4", nil, "[::ffff:203.0.113.7]:80", nil, "203.0.113.7"},
		{"IPv4-mapped prefix is IPv4", []netip.Prefix{netip.MustParsePrefix("::ffff:10.0.0.0/104")}, "10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"unmasked prefix", []netip.Prefix{netip.MustParsePrefix("10.1.2.3/8")}, "10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"bare address", nil, "203.0.113.7", nil, "203.0.113.7"},
		{"unix socket", nil, "@", nil, ""},
		{"empty RemoteAddr", nil, "", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tt.remote
			if tt.xff != nil {
				r.Header["X-Forwarded-For"] = tt.xff
			}
			got, err := middleware.ClientIP(tt.trusted...)(r)
			if tt.want == "" {
				if !errors.Is(err, middleware.ErrNoKey) {
					t.Errorf("ClientIP = %q, %v; want ErrNoKey", got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("ClientIP = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestHeader(t *testing.T) {
	tests := []struct {
		name   string
		values []string
		want   string // "" for ErrNoKey
	}{
		{"present", []string{"key-1"}, "key-1"},
		{"trimmed", []string{" \tkey-1 "}, "key-1"},
		{"first of several", []string{"key-1", "key-2"}, "key-1"},
		{"missing", nil, ""},
		{"empty", []string{"  "}, ""},
	}
	kf := middleware.Header("x-api-key") // any case
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if tt.values != nil {
			r.Header["X-Api-Key"] = tt.values
		}
		got, err := kf(r)
		if tt.want == "" && !errors.Is(err, middleware.ErrNoKey) || tt.want != "" && (err != nil || got != tt.want) {
			t.Errorf("%s: Header = %q, %v; want %q", tt.name, got, err, tt.want)
		}
	}
}

// TestRoute routes through a real ServeMux, which sets the pattern.
func TestRoute(t *testing.T) {
	var got string
	record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := middleware.Route(r)
		if err != nil {
			t.Error(err)
		}
		got = k
	})
	mux := http.NewServeMux()
	mux.Handle("GET /items/{id}", record)
	mux.Handle("/files/", record)
	tests := []struct{ method, path, want string }{
		{"GET", "/items/1", "GET /items/{id}"},
		{"GET", "/items/2", "GET /items/{id}"},
		{"HEAD", "/items/2", "GET /items/{id}"},
		{"POST", "/files/a/b", "POST /files/"},
		{"GET", "/files/c", "GET /files/"},
	}
	for _, tt := range tests {
		got = ""
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
		if got != tt.want {
			t.Errorf("%s %s: key %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
	// Outside a ServeMux: the path.
	if k, err := middleware.Route(httptest.NewRequest("DELETE", "/raw/path?q=1", nil)); err != nil || k != "DELETE /raw/path" {
		t.Errorf("without a pattern: %q, %v", k, err)
	}
}
