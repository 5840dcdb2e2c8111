package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/netlab"
)

// builds holds one *build per command of cmd/, each built at most once per
// test binary run, into a directory of its own.
var builds sync.Map

type build struct {
	once sync.Once
	path string
	err  error
}

func limiterdBinary(t *testing.T) string { return goBinary(t, "limiterd") }

// goBinary builds ../cmd/name once and returns its path; for limiterd,
// LIMITERD_E2E_BIN names a binary built elsewhere instead (a clean tree,
// an older commit).
func goBinary(t *testing.T, name string) string {
	t.Helper()
	v, _ := builds.LoadOrStore(name, &build{})
	b := v.(*build)
	b.once.Do(func() {
		if bin := os.Getenv("LIMITERD_E2E_BIN"); bin != "" && name == "limiterd" {
			b.path = bin
			return
		}
		dir, err := os.MkdirTemp("", "limiterd-e2e-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		out, err := exec.Command("go", "build", "-o", b.path, "../cmd/"+name).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// freePort returns a port that was free on 127.0.0.1 for both TCP and UDP.
func freePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		l.Close()
		if err == nil {
			u.Close()
			return port
		}
	}
	t.Fatal("no free port")
	return 0
}

// proc is one limiterd process of a test cluster.
type proc struct {
	index    int          // in its cluster, the lab node it runs on
	hc       *http.Client // reaches it (nil: client)
	name     string
	http     string // base URL
	gossip   string // HOST:PORT
	grpc     string // HOST:PORT of Envoy's rate limit service
	args     []string
	cmd      *exec.Cmd
	stderr   *lockedBuffer
	exited   chan struct{}
	exitCode int
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// testCluster is n limiterd processes, node 0 the seed the others join.
type testCluster struct {
	t     *testing.T
	bin   string
	rules string
	procs []*proc
	// lab, when set, runs process i in the lab's node i, and hc is the
	// client that reaches them (from the lab's hub); else hc is client.
	lab *netlab.Lab
	hc  *http.Client
}

func startCluster(t *testing.T, n int, rules string, extra ...string) *testCluster {
	t.Helper()
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &testCluster{t: t, bin: limiterdBinary(t), rules: path, hc: client}
	// Before the first start: a start that fails must not leave the
	// processes already started running.
	t.Cleanup(c.stopAll)
	for i := range n {
		p := &proc{index: i, name: fmt.Sprintf("node-%d", i), hc: c.hc}
		// A port found free may be taken by another test before the node
		// binds it: pick new ones and start again, a few times.
		for attempt := 0; ; attempt++ {
			p.http = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			p.gossip = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			p.grpc = fmt.Sprintf("127.0.0.1:%d", freePort(t))
			p.args = []string{"-node-name", p.name, "-http-addr", p.http, "-bind-addr", p.gossip, "-grpc-addr", p.grpc, "-rules", path, "-log-level", "warn"}
			if i > 0 {
				p.args = append(p.args, "-join", c.procs[0].gossip)
			}
			p.args = append(p.args, extra...)
			c.startProcess(p)
			if c.healthyOrExited(p) || attempt == 2 || !strings.Contains(p.stderr.String(), "address already in use") {
				break
			}
		}
		c.procs = append(c.procs, p)
		c.waitFor(p, "/readyz")
	}
	return c
}

// healthyOrExited waits until p answers /healthz (true) or exits (false).
func (c *testCluster) healthyOrExited(p *proc) bool {
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			return false
		default:
		}
		if code, _, err := p.get("/healthz"); err == nil && code == 200 {
			return true
		}
	}
	return true // waitFor reports it
}

// start starts p and waits until it is ready (joined, when it has -join).
func (c *testCluster) start(p *proc) {
	c.t.Helper()
	c.startProcess(p)
	c.waitFor(p, "/readyz")
}

// startUnready starts p and waits only until it answers /healthz: a node
// that cannot join never becomes ready.
func (c *testCluster) startUnready(p *proc) {
	c.t.Helper()
	c.startProcess(p)
	c.waitFor(p, "/healthz")
}

func (c *testCluster) startProcess(p *proc) {
	c.t.Helper()
	p.stderr = &lockedBuffer{}
	if c.lab != nil {
		p.cmd = c.lab.Command(p.index, c.bin, p.args...)
	} else {
		p.cmd = exec.Command(c.bin, p.args...)
	}
	p.cmd.Stderr = p.stderr
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
}

func (c *testCluster) waitFor(p *proc, path string) {
	c.t.Helper()
	eventually(c.t, p.name+" "+path, 20*time.Second, func() bool {
		select {
		case <-p.exited:
			c.t.Fatalf("%s exited (%d):\n%s", p.name, p.exitCode, p.stderr.String())
		default:
		}
		code, _, err := p.get(path)
		return err == nil && code == 200
	})
}

func (c *testCluster) kill(p *proc) {
	c.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	<-p.exited
}

// terminate stops p with SIGTERM (a graceful leave) and waits for it.
func (c *testCluster) terminate(p *proc) {
	c.t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s did not stop within 20 s of SIGTERM", p.name)
	}
}

func (c *testCluster) stopAll() {
	for _, p := range c.procs {
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		select {
		case <-p.exited:
			continue
		default:
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			p.cmd.Process.Kill()
			<-p.exited
		}
		if c.t.Failed() {
			c.t.Logf("%s stderr:\n%s", p.name, p.stderr.String())
		}
	}
}

var client = &http.Client{
	Timeout:   5 * time.Second,
	Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256},
}

func request(method, url string) (int, []byte, error) {
	return requestWith(client, method, url)
}

// get asks p for path with the client that reaches it.
func (p *proc) get(path string) (int, []byte, error) {
	hc := p.hc
	if hc == nil {
		hc = client
	}
	return requestWith(hc, "GET", "http://"+p.http+path)
}

func requestWith(hc *http.Client, method, url string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// checkResult is the JSON body of /check.
type checkResult struct {
	Allowed   bool   `json:"allowed"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Rule      string `json:"rule"`
}

func check(t *testing.T, p *proc, key string) (int, checkResult) {
	t.Helper()
	code, body, err := p.get("/check?key=" + key)
	if err != nil {
		t.Fatalf("check on %s: %v", p.name, err)
	}
	var r checkResult
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("check on %s: %d %s: %v", p.name, code, body, err)
	}
	return code, r
}

// clusterView is the JSON of /cluster.
type clusterView struct {
	Self    string `json:"self"`
	Members []struct {
		Name  string `json:"name"`
		State string `json:"state"`
	} `json:"members"`
}

func members(p *proc) (map[string]string, error) {
	code, body, err := p.get("/cluster")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/cluster: %d %s", code, body)
	}
	var v clusterView
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, mb := range v.Members {
		m[mb.Name] = mb.State
	}
	return m, nil
}

func countState(m map[string]string, state string) int {
	n := 0
	for _, s := range m {
		if s == state {
			n++
		}
	}
	return n
}

// eventually polls cond until it holds or the deadline passes (a bound on
// waiting for an event, not a timing assertion).
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); ; time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
	}
}

func metric(t *testing.T, p *proc, name string) string {
	t.Helper()
	_, body, err := p.get("/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(l, name) {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

func itoa(i int) string { return strconv.Itoa(i) }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// residentBytes reads a process's resident memory (VmRSS) from /proc.
func residentBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
