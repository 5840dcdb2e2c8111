package nodetest

import (
	"errors"
	"fmt"
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

	"github.com/limiterd/limiterd/internal/netlab"
)

// Config is a cluster of limiterd processes to start.
type Config struct {
	// Nodes is how many processes Start starts: node-0, the seed, first,
	// then the others, each joining it.
	Nodes int
	// Rules are the rule files' texts, written into files of the
	// cluster's own and given to every node as -rules, in order.
	Rules []string
	// Args are more arguments for every node, after the harness's.
	Args []string
	// Lab, if set, runs node i in the lab's node i, at the lab's address
	// for it with ports 8080 (HTTP), 7946 (cluster) and 8081 (gRPC), and
	// reaches it from the lab's hub; else the nodes run on 127.0.0.1 with
	// ports found free.
	Lab *netlab.Lab
	// Binary is the limiterd to run; "" is Build's.
	Binary string
}

// DefaultConfig is three nodes on 127.0.0.1 with no rule file yet.
func DefaultConfig() Config { return Config{Nodes: 3} }

// ErrConfig marks an invalid Config.
var ErrConfig = errors.New("nodetest: invalid configuration")

// Validate returns every problem of c, each wrapping ErrConfig.
func (c Config) Validate() error {
	var errs []error
	if c.Nodes < 0 {
		errs = append(errs, fmt.Errorf("%w: %d nodes", ErrConfig, c.Nodes))
	}
	if len(c.Rules) == 0 {
		errs = append(errs, fmt.Errorf("%w: no rule file", ErrConfig))
	}
	if c.Lab != nil && c.Nodes > c.Lab.Nodes() {
		errs = append(errs, fmt.Errorf("%w: %d nodes in a lab of %d", ErrConfig, c.Nodes, c.Lab.Nodes()))
	}
	return errors.Join(errs...)
}

// Cluster is limiterd processes a test started. They are stopped when the
// test ends (SIGTERM, then SIGKILL), with their output logged if it
// failed. Its methods are called from the test's goroutine (see the
// package's doc for Proc's).
type Cluster struct {
	// Procs are the processes, node-0 first; a test may append its own
	// and start them with Start or StartUnready.
	Procs []*Proc
	// Rules is the -rules argument: the rule files, comma-separated. A
	// test may rewrite them and signal the nodes (SIGHUP) to reload.
	Rules string
	// Lab is Config.Lab.
	Lab *netlab.Lab
	// HTTP reaches the nodes (from the lab's hub in a lab).
	HTTP *http.Client

	t   testing.TB
	bin string
}

// Start starts cfg's cluster and waits until each node is ready (node-0,
// then each one joined). In a lab each node is the lab's; on 127.0.0.1 a
// port found free and taken by another test before the node binds it is
// picked again, a few times. It fails t if a node does not start.
func Start(t testing.TB, cfg Config) *Cluster {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for i, text := range cfg.Rules {
		path := filepath.Join(dir, "rules.yaml")
		if i > 0 {
			path = filepath.Join(dir, "rules-"+strconv.Itoa(i)+".yaml")
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, path)
	}
	c := &Cluster{t: t, bin: cfg.Binary, Rules: strings.Join(paths, ","), Lab: cfg.Lab}
	if c.bin == "" {
		c.bin = Build(t, "limiterd")
	}
	if cfg.Lab != nil {
		c.HTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			DialContext: cfg.Lab.DialContext, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64,
		}}
	} else {
		c.HTTP = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 256, MaxConnsPerHost: 256}}
	}
	// Before the first start: a start that fails must not leave the
	// processes already started running.
	t.Cleanup(c.stop)
	for i := range cfg.Nodes {
		p := &Proc{Index: i, Name: fmt.Sprintf("node-%d", i)}
		for attempt := 0; ; attempt++ {
			if cfg.Lab != nil {
				addr := cfg.Lab.Addr(i).String()
				p.HTTP, p.Gossip, p.GRPC = addr+":8080", addr+":7946", addr+":8081"
			} else {
				p.HTTP = "127.0.0.1:" + strconv.Itoa(FreePort(t))
				p.Gossip = "127.0.0.1:" + strconv.Itoa(FreePort(t))
				p.GRPC = "127.0.0.1:" + strconv.Itoa(FreePort(t))
			}
			p.Args = []string{"-node-name", p.Name, "-http-addr", p.HTTP, "-bind-addr", p.Gossip, "-grpc-addr", p.GRPC, "-rules", c.Rules, "-log-level", "warn"}
			if i > 0 {
				p.Args = append(p.Args, "-join", c.Procs[0].Gossip)
			}
			p.Args = append(p.Args, cfg.Args...)
			c.startProcess(p)
			if c.healthyOrExited(p) || attempt == 2 || !strings.Contains(p.Stderr.String(), "address already in use") {
				break
			}
		}
		c.Procs = append(c.Procs, p)
		c.waitFor(p, "/readyz")
	}
	return c
}

// FreePort returns a port that was free on 127.0.0.1 for both TCP and UDP.
func FreePort(t testing.TB) int {
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

// Start starts p and waits until it is ready (joined, when it has -join).
func (c *Cluster) Start(p *Proc) {
	c.t.Helper()
	c.startProcess(p)
	c.waitFor(p, "/readyz")
}

// StartUnready starts p and waits only until it answers /healthz: a node
// that cannot join never becomes ready.
func (c *Cluster) StartUnready(p *Proc) {
	c.t.Helper()
	c.startProcess(p)
	c.waitFor(p, "/healthz")
}

// startProcess starts a new run of p: in its lab node, under its wrapper,
// with its environment.
func (c *Cluster) startProcess(p *Proc) {
	c.t.Helper()
	p.cl = c
	p.Stderr = &LockedBuffer{}
	argv := append(append(append([]string(nil), p.Wrap...), c.bin), p.Args...)
	if c.Lab != nil {
		p.cmd = c.Lab.Command(p.Index, argv[0], argv[1:]...)
	} else {
		p.cmd = exec.Command(argv[0], argv[1:]...)
	}
	p.cmd.Env = p.Env
	p.cmd.Stdout, p.cmd.Stderr = p.Stderr, p.Stderr
	if len(p.Wrap) > 0 {
		// A group of its own, so that the daemon goes with its wrapper
		// whatever happens; and Wait returns even while the daemon still
		// holds the output pipe.
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		p.cmd.WaitDelay = 5 * time.Second
	}
	p.exited = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	p.pid = p.cmd.Process.Pid
	go func() {
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	if len(p.Wrap) > 0 {
		Eventually(c.t, p.Name+" under "+filepath.Base(p.Wrap[0]), p.readyWithin(), func() bool {
			if pid := wrappedChild(p.cmd.Process.Pid, c.bin); pid != 0 {
				p.pid = pid
				return true
			}
			return false
		})
	}
}

// healthyOrExited waits until p answers /healthz (true) or exits (false).
func (c *Cluster) healthyOrExited(p *Proc) bool {
	for deadline := time.Now().Add(p.readyWithin()); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-p.exited:
			return false
		default:
		}
		if code, _, err := p.Get("/healthz"); err == nil && code == 200 {
			return true
		}
	}
	return true // waitFor reports it
}

func (c *Cluster) waitFor(p *Proc, path string) {
	c.t.Helper()
	Eventually(c.t, p.Name+" "+path, p.readyWithin(), func() bool {
		select {
		case <-p.exited:
			c.t.Fatalf("%s exited (%d):\n%s", p.Name, p.exitCode, p.Stderr.String())
		default:
		}
		code, _, err := p.Get(path)
		return err == nil && code == 200
	})
}

// Kill stops p with SIGKILL and waits for it.
func (c *Cluster) Kill(p *Proc) {
	c.t.Helper()
	if err := p.Signal(syscall.SIGKILL); err != nil {
		c.t.Fatal(err)
	}
	<-p.exited
}

// Terminate stops p with SIGTERM (a graceful leave) and waits for it.
func (c *Cluster) Terminate(p *Proc) {
	c.t.Helper()
	if err := p.Signal(syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		c.t.Fatalf("%s did not stop within 20 s of SIGTERM", p.Name)
	}
}

// WaitAlive waits until each of ps sees want members alive, within one
// bound for all, and returns how long that took.
func (c *Cluster) WaitAlive(ps []*Proc, want int, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for _, p := range ps {
		Eventually(c.t, fmt.Sprintf("%s sees %d members alive", p.Name, want), within-time.Since(start), func() bool {
			m, err := p.Members()
			return err == nil && CountState(m, "alive") == want
		})
	}
	return time.Since(start)
}

// stop ends every process still running: SIGTERM, then SIGKILL (for its
// whole group, under a wrapper) if it has not exited in time.
func (c *Cluster) stop() {
	for _, p := range c.Procs {
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		select {
		case <-p.exited:
			continue
		default:
		}
		p.Signal(syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(p.stopWithin()):
			if len(p.Wrap) > 0 {
				syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			} else {
				p.cmd.Process.Kill()
			}
			<-p.exited
		}
		if c.t.Failed() {
			c.t.Logf("%s output:\n%s", p.Name, p.Stderr.String())
		}
	}
	c.HTTP.CloseIdleConnections()
}

// EnvInt is the positive integer the environment variable name holds, or
// def: the knobs of the long runs (LIMITERD_E2E_NODES, LIMITERD_SOAK_RATE).
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}
