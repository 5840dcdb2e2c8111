package e2e

// The deployment files under deploy/ (systemd, Prometheus, Grafana) are
// tested here against the tools that consume them (systemd-analyze,
// promtool, a real Prometheus) and against live limiterd processes. Every
// identifier of these files starts with deploy, so that they stay clear of
// the other e2e tests' names.

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// deployPath is a file under deploy/, from the e2e directory go test runs in.
func deployPath(parts ...string) string {
	return filepath.Join(append([]string{"..", "deploy"}, parts...)...)
}

func deployRead(t *testing.T, parts ...string) string {
	t.Helper()
	b, err := os.ReadFile(deployPath(parts...))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// deployNeed returns the path of program, which Debian's package pkg
// installs (debianProgram).
func deployNeed(t *testing.T, program, pkg string) string {
	t.Helper()
	return debianProgram(t, pkg, program)
}

func deployTail(b []byte) string {
	const n = 2000
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// deployRun runs a program and returns its combined output and error.
func deployRun(dir string, env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = env
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// deployFamilies scrapes a node's /metrics and returns its metric
// families by name (# TYPE lines) with their type, and the sample lines.
func deployFamilies(t *testing.T, p *proc) (types map[string]string, samples []string) {
	t.Helper()
	code, body, err := request("GET", "http://"+p.http+"/metrics")
	if err != nil || code != 200 {
		t.Fatalf("%s /metrics: %d %v", p.name, code, err)
	}
	types = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if f := strings.Fields(l); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
		} else if l != "" && !strings.HasPrefix(l, "#") {
			samples = append(samples, l)
		}
	}
	return types, samples
}

// deploySeriesNames maps every series name a scrape can show to its
// family: a histogram's _bucket, _sum and _count, a summary's _sum and
// _count, and the family's own name.
func deploySeriesNames(types map[string]string) map[string]string {
	names := map[string]string{}
	for fam, typ := range types {
		names[fam] = fam
		switch typ {
		case "histogram":
			for _, s := range []string{"_bucket", "_sum", "_count"} {
				names[fam+s] = fam
			}
		case "summary":
			for _, s := range []string{"_sum", "_count"} {
				names[fam+s] = fam
			}
		}
	}
	return names
}

// deployMetricNames returns the limiterd_ identifiers in text, sorted.
func deployMetricNames(text string) []string {
	seen := map[string]bool{}
	for _, m := range regexp.MustCompile(`limiterd_[a-z0-9_]+`).FindAllString(text, -1) {
		seen[m] = true
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// deployDaemon starts limiterd with exactly the given arguments and
// environment (nothing inherited but what env says), waits until it
// answers ready, and ends it when the test ends. With traced, argv[0] is
// strace running limiterd: the daemon is strace's child, and it is the one
// signalled (strace, signalled, would detach and leave it running). It
// returns the process and the daemon's pid.
func deployDaemon(t *testing.T, argv []string, env []string, httpAddr string, traced bool) (*proc, int) {
	t.Helper()
	p := &proc{name: filepath.Base(argv[0]), http: httpAddr, stderr: &lockedBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Env = env
	p.cmd.Stderr = p.stderr
	p.cmd.Stdout = p.stderr
	// A group of its own, so that the daemon under strace goes with it
	// whatever happens; and Wait returns even while a child still holds
	// the output pipe.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.WaitDelay = 5 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.cmd.Wait()
		p.exitCode = p.cmd.ProcessState.ExitCode()
		close(p.exited)
	}()
	daemon := p.cmd.Process.Pid
	t.Cleanup(func() {
		select {
		case <-p.exited:
			return
		default:
		}
		syscall.Kill(daemon, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(30 * time.Second):
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the whole group
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", p.name, deployTail([]byte(p.stderr.String())))
		}
	})
	if traced {
		eventually(t, "strace's child", 20*time.Second, func() bool {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p.cmd.Process.Pid, p.cmd.Process.Pid))
			f := strings.Fields(string(b))
			if err != nil || len(f) != 1 {
				return false
			}
			pid, err := strconv.Atoi(f[0])
			if err != nil {
				return false
			}
			// Once it has exec'd limiterd: before, the child is strace's fork.
			if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || filepath.Base(exe) != "limiterd" {
				return false
			}
			daemon = pid
			return true
		})
	}
	eventually(t, p.name+" ready", 60*time.Second, func() bool {
		select {
		case <-p.exited:
			t.Fatalf("%s exited (%d):\n%s", p.name, p.exitCode, p.stderr.String())
		default:
		}
		code, _, err := request("GET", "http://"+httpAddr+"/readyz")
		return err == nil && code == 200
	})
	return p, daemon
}
