package nodetest

import (
	"context"
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
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/limiterd/limiterd/internal/promtest"
)

// Proc is one limiterd process of a Cluster. A test may make one itself
// (an intruder, a node configured by its environment alone), append it to
// the Cluster's Procs and start it there; the fields are read when it
// starts, and may change between two runs of it.
type Proc struct {
	Index  int      // its place in the cluster; in a lab, the lab node it runs in
	Name   string   // its node name (-node-name)
	HTTP   string   // HOST:PORT of its HTTP API
	Gossip string   // HOST:PORT of its cluster traffic (-bind-addr)
	GRPC   string   // HOST:PORT of its Envoy rate limit service ("": none)
	Args   []string // every argument it runs with
	Env    []string // its whole environment; nil: the test's
	// Wrap is a program and its arguments that limiterd runs under
	// (strace ... --): the daemon is the wrapper's child, and Signal,
	// Kill and Terminate go to it, not to the wrapper.
	Wrap []string

	// Stderr holds what the current run wrote, stdout and stderr.
	Stderr *LockedBuffer

	cl       *Cluster
	cmd      *exec.Cmd
	pid      int // the daemon's: cmd's, or its child's under Wrap
	exited   chan struct{}
	exitCode int
}

// Pid is the running daemon's process id.
func (p *Proc) Pid() int { return p.pid }

// Exited is closed when the current run has ended (the wrapper's, under
// Wrap).
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// ExitCode is the run's exit code (-1 when a signal ended it), once it
// has ended: it waits for that.
func (p *Proc) ExitCode() int {
	<-p.exited
	return p.exitCode
}

// Signal sends sig to the daemon.
func (p *Proc) Signal(sig syscall.Signal) error {
	if p.pid <= 0 { // never started: kill(0) would signal the test's own group
		return fmt.Errorf("nodetest: %s to %s: not started", sig, p.Name)
	}
	if err := syscall.Kill(p.pid, sig); err != nil {
		return fmt.Errorf("nodetest: %s to %s: %w", sig, p.Name, err)
	}
	return nil
}

// Get asks p for path (GET, with the client that reaches it) and reads
// the answer.
func (p *Proc) Get(path string) (int, []byte, error) {
	return Get(p.cl.HTTP, "http://"+p.HTTP+path)
}

// Get GETs url with hc and reads the answer.
func Get(hc *http.Client, url string) (int, []byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// CheckResult is the JSON body of /check.
type CheckResult struct {
	Allowed   bool   `json:"allowed"`
	Limit     int64  `json:"limit"`
	Remaining int64  `json:"remaining"`
	Rule      string `json:"rule"`
}

// Check asks p for key and fails t unless it answers a /check body.
func (p *Proc) Check(t testing.TB, key string) (int, CheckResult) {
	t.Helper()
	code, body, err := p.Get("/check?key=" + key)
	if err != nil {
		t.Fatalf("check on %s: %v", p.Name, err)
	}
	var r CheckResult
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatalf("check on %s: %d %s: %v", p.Name, code, body, err)
	}
	return code, r
}

// Members returns each member's state as p's /cluster shows it, by name.
func (p *Proc) Members() (map[string]string, error) {
	code, body, err := p.Get("/cluster")
	if err != nil {
		return nil, err
	}
	if code != 200 {
		return nil, fmt.Errorf("/cluster: %d %s", code, body)
	}
	var v struct {
		Members []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		} `json:"members"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	m := map[string]string{}
	for _, mb := range v.Members {
		m[mb.Name] = mb.State
	}
	return m, nil
}

// CountState counts the members of m in state.
func CountState(m map[string]string, state string) int {
	n := 0
	for _, s := range m {
		if s == state {
			n++
		}
	}
	return n
}

// Metrics scrapes p's /metrics, failing t if it cannot.
func (p *Proc) Metrics(t testing.TB) promtest.Metrics {
	t.Helper()
	return promtest.MustScrape(t, p.cl.HTTP, "http://"+p.HTTP+"/metrics")
}

// Metric sums the series of name on p whose labels include the pairs of
// labels (promtest.Metrics.Sum: a trailing * matches a prefix).
func (p *Proc) Metric(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	return p.Metrics(t).Sum(name, labels...)
}

// Names returns the names of ps.
func Names(ps []*Proc) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Name)
	}
	return out
}

// dialGRPC connects to p's Envoy rate limit service (from the lab's hub
// in a lab).
func (p *Proc) dialGRPC() (*grpc.ClientConn, error) {
	if p.cl.Lab == nil {
		return grpc.NewClient(p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	return grpc.NewClient("passthrough:///"+p.GRPC, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return p.cl.Lab.DialContext(ctx, "tcp", addr)
		}))
}

// RLS returns a client of p's Envoy rate limit service, on a connection
// closed when t ends.
func (p *Proc) RLS(t testing.TB) rlsv3.RateLimitServiceClient {
	t.Helper()
	conn, err := p.dialGRPC()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return rlsv3.NewRateLimitServiceClient(conn)
}

// ShouldRateLimit asks p one call on a connection of its own, closed
// after it: a node just restarted is asked afresh, not after a broken
// connection's backoff.
func (p *Proc) ShouldRateLimit(ctx context.Context, req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	conn, err := p.dialGRPC()
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, req)
}

// ResidentBytes reads the daemon's resident memory (VmRSS) from /proc.
func (p *Proc) ResidentBytes() (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid))
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", p.pid)
}

// OpenFiles counts the daemon's open file descriptors (/proc/PID/fd).
func (p *Proc) OpenFiles() (int, error) {
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid))
	if err != nil {
		return 0, fmt.Errorf("open descriptors of %s: %w", p.Name, err)
	}
	return len(fds), nil
}

// wrappedChild returns the pid of the wrapper's child once it runs bin
// (before, the child is the wrapper's fork), or 0.
func wrappedChild(wrapper int, bin string) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", wrapper, wrapper))
	f := strings.Fields(string(b))
	if err != nil || len(f) != 1 {
		return 0
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil {
		return 0
	}
	if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != filepath.Base(bin) {
		return 0
	}
	return pid
}

// readyWithin bounds the wait for p to answer ready, and stopWithin for
// it to stop on SIGTERM: a daemon under a wrapper (strace) runs several
// times slower.
func (p *Proc) readyWithin() time.Duration {
	if len(p.Wrap) > 0 {
		return 60 * time.Second
	}
	return 20 * time.Second
}

func (p *Proc) stopWithin() time.Duration {
	if len(p.Wrap) > 0 {
		return 30 * time.Second
	}
	return 10 * time.Second
}
