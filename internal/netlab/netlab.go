package netlab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrUnavailable is wrapped by New's error when the machine cannot make
// network namespaces (not Linux, not root, no ip command, refused).
var ErrUnavailable = errors.New("netlab: network namespaces unavailable")

// Config describes a lab.
type Config struct {
	// Nodes is how many node namespaces to make (1 to 200).
	Nodes int
	// Prefix is the private /24 the lab's addresses come from: node i
	// has .i+1, the hub's bridge .254. It exists only inside the lab's
	// namespaces, so labs of concurrent tests may share it.
	Prefix netip.Prefix
	// IP and NFT are the paths of the ip and nft commands ("ip" and
	// "nft": looked up on PATH). NFT is needed only for faults.
	IP, NFT string
}

// DefaultConfig is 8 nodes in 10.213.0.0/24.
func DefaultConfig() Config {
	return Config{Nodes: 8, Prefix: netip.MustParsePrefix("10.213.0.0/24"), IP: "ip", NFT: "nft"}
}

// Validate reports a configuration New cannot build.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > 200:
		return fmt.Errorf("netlab: %d nodes, want 1 to 200", c.Nodes)
	case !c.Prefix.Addr().Is4() || c.Prefix.Bits() != 24 || c.Prefix.Masked() != c.Prefix:
		return fmt.Errorf("netlab: prefix %v, want an IPv4 /24 like 10.213.0.0/24", c.Prefix)
	case c.IP == "":
		return errors.New("netlab: no ip command")
	}
	return nil
}

// Lab is a running set of namespaces.
type Lab struct {
	cfg   Config
	name  string // namespace name prefix, nl<pid>x<random>
	hub   string
	nodes []string

	mu     sync.Mutex // serialises rule changes
	closed bool
}

// New builds the lab: the hub namespace with bridge br0 at .254, and node
// namespaces n0…, each with loopback up and eth0 at .i+1, wired to br0.
// On error it removes what it made.
func New(cfg Config) (*Lab, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if runtime.GOOS != "linux" {
		return nil, fmt.Errorf("%w: %s is not Linux", ErrUnavailable, runtime.GOOS)
	}
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("%w: not root (uid %d)", ErrUnavailable, os.Geteuid())
	}
	if _, err := exec.LookPath(cfg.IP); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	removeOrphans(cfg.IP)
	// The pid tells a dead lab's leftovers apart (removeOrphans); the
	// random part, the labs of one process.
	l := &Lab{cfg: cfg, name: fmt.Sprintf("nl%dx%04x", os.Getpid(), rand.Uint32()&0xffff)}
	l.hub = l.name + "-hub"
	if err := l.build(); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

func (l *Lab) build() error {
	if err := l.ip("netns", "add", l.hub); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	hubAddr := l.HubAddr().String() + "/24"
	for _, args := range [][]string{
		{"-n", l.hub, "link", "set", "lo", "up"},
		{"-n", l.hub, "link", "add", "br0", "type", "bridge"},
		{"-n", l.hub, "addr", "add", hubAddr, "dev", "br0"},
		{"-n", l.hub, "link", "set", "br0", "up"},
	} {
		if err := l.ip(args...); err != nil {
			return err
		}
	}
	for i := range l.cfg.Nodes {
		ns := fmt.Sprintf("%s-n%d", l.name, i)
		if err := l.ip("netns", "add", ns); err != nil {
			return err
		}
		l.nodes = append(l.nodes, ns)
		veth := "v" + strconv.Itoa(i)
		for _, args := range [][]string{
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", l.hub, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
			{"-n", l.hub, "link", "set", veth, "master", "br0", "up"},
			{"-n", ns, "addr", "add", l.Addr(i).String() + "/24", "dev", "eth0"},
			{"-n", ns, "link", "set", "eth0", "up"},
		} {
			if err := l.ip(args...); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close removes the lab's namespaces (processes still running in one keep
// it alive, unnamed, until they exit: stop them first). It is safe to call
// more than once.
func (l *Lab) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	l.closed = true
	var errs []error
	for _, ns := range append(l.nodes, l.hub) {
		if err := l.ip("netns", "del", ns); err != nil && !strings.Contains(err.Error(), "No such file") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Nodes returns how many nodes the lab has.
func (l *Lab) Nodes() int { return len(l.nodes) }

// Addr returns node i's address.
func (l *Lab) Addr(i int) netip.Addr {
	b := l.cfg.Prefix.Addr().As4()
	b[3] = byte(i + 1)
	return netip.AddrFrom4(b)
}

// HubAddr returns the hub's address, the one the test's clients use.
func (l *Lab) HubAddr() netip.Addr {
	b := l.cfg.Prefix.Addr().As4()
	b[3] = 254
	return netip.AddrFrom4(b)
}

// Namespace returns node i's namespace name (for ip netns exec).
func (l *Lab) Namespace(i int) string { return l.nodes[i] }

// Command returns a command that runs name in node i's namespace.
func (l *Lab) Command(i int, name string, args ...string) *exec.Cmd {
	return exec.Command(l.cfg.IP, append([]string{"netns", "exec", l.nodes[i], name}, args...)...)
}

// DialContext dials addr from the hub namespace, as the test's clients:
// use it as an http.Transport's DialContext. addr must be an IP literal
// (no resolver runs in the namespace).
func (l *Lab) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace("/run/netns/"+l.hub, func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// DialFrom dials addr from node i's namespace.
func (l *Lab) DialFrom(ctx context.Context, i int, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := inNamespace("/run/netns/"+l.nodes[i], func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen listens on addr in node i's namespace.
func (l *Lab) Listen(i int, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := inNamespace("/run/netns/"+l.nodes[i], func() (err error) {
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// inNamespace runs fn on a thread of its own that has entered the network
// namespace at path. A socket belongs to the namespace it was created in,
// whichever thread uses it later, and fn's socket is created on that
// thread (an IP literal: no resolver goroutine). A thread that cannot go
// back stays locked and ends with its goroutine, so nothing else ever
// runs in the namespace.
func inNamespace(path string, fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netlab: %w", err)
			return
		}
		defer self.Close()
		target, err := os.Open(path)
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netlab: %w", err)
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netlab: entering %s: %w", path, err)
			return
		}
		err = fn()
		if unix.Setns(int(self.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		done <- err
	}()
	return <-done
}

func (l *Lab) ip(args ...string) error {
	out, err := exec.Command(l.cfg.IP, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("netlab: ip %s: %v: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}

// removeOrphans deletes the namespaces of labs whose process is gone (a
// test binary killed before its cleanup ran).
func removeOrphans(ip string) {
	entries, err := os.ReadDir("/run/netns")
	if err != nil {
		return
	}
	orphan := regexp.MustCompile(`^nl([0-9]+)x[0-9a-f]+-`) // a lab's: nl<pid>x<random>-…
	for _, e := range entries {
		m := orphan.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		pid, _ := strconv.Atoi(m[1])
		if err := syscall.Kill(pid, 0); err == nil || errors.Is(err, syscall.EPERM) {
			continue // its process still runs
		}
		exec.Command(ip, "netns", "del", e.Name()).Run()
	}
}
