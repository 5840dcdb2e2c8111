package nodetest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The programs the tests run: this module's commands, built once per test
// binary, and the system's, from Debian's packages, installed by the first
// test that needs one when the machine lacks it (CI's machine is a fresh
// Debian, as root).

// builds holds one *build per command of cmd/, and installs one
// *debianPackage per Debian package: the test binary's processes share
// them, so that each is built or installed once however many tests and
// packages' helpers ask (package state, as a cache of what is on disk).
var builds, installs sync.Map

type build struct {
	once sync.Once
	path string
	err  error
}

// modulePath is this module's, whose commands Build builds.
const modulePath = "github.com/limiterd/limiterd"

// Build returns the path of this module's command name (cmd/name), built
// once per test binary into a directory of its own; for limiterd,
// LIMITERD_E2E_BIN names a binary built elsewhere instead (a clean tree,
// an older commit). It fails t if the build fails.
func Build(t testing.TB, name string) string {
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
		// By import path: go test runs in the test's package directory,
		// anywhere in the module.
		out, err := exec.Command("go", "build", "-o", b.path, modulePath+"/cmd/"+name).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", name, err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

type debianPackage struct {
	once sync.Once
	took time.Duration
	err  error
}

// DebianProgram returns the path of the program name, installing Debian's
// package pkg first when it is missing. It skips the test when the
// package cannot be installed (not root, no apt-get, no network...),
// saying why.
func DebianProgram(t testing.TB, pkg, name string) string {
	t.Helper()
	if path, ok := debianLookPath(name); ok {
		return path
	}
	v, _ := installs.LoadOrStore(pkg, &debianPackage{})
	in := v.(*debianPackage)
	in.once.Do(func() {
		start := time.Now()
		in.err = debianAptInstall(pkg, name)
		in.took = time.Since(start)
	})
	if in.err != nil {
		t.Skipf("%s is not installed, and Debian's package %s could not be installed: %v", name, pkg, in.err)
	}
	path, ok := debianLookPath(name)
	if !ok {
		t.Fatalf("apt-get installed %s, but there is no %s on PATH, in /usr/sbin or /usr/bin", pkg, name)
	}
	t.Logf("installed %s from Debian's packages in %v", pkg, in.took.Round(time.Millisecond))
	return path
}

// debianLookPath finds name on PATH or where Debian puts it (/usr/sbin is not
// on every user's PATH).
func debianLookPath(name string) (string, bool) {
	if path, err := exec.LookPath(name); err == nil {
		return path, true
	}
	for _, dir := range []string{"/usr/sbin", "/usr/bin", "/sbin"} {
		path := filepath.Join(dir, name)
		if fi, err := os.Stat(path); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return path, true
		}
	}
	return "", false
}

// debianPolicyRC is Debian's hook that invoke-rc.d and deb-systemd-invoke ask
// before starting a service: exit 101 means "do not".
const debianPolicyRC = "/usr/sbin/policy-rc.d"

// debianAptInstall installs pkg with apt-get, without letting its postinst
// start the system service it ships (nginx, caddy and haproxy would bind
// ports 80 and 443; prometheus its own): policy-rc.d forbids it for the duration, and whatever
// was started anyway is stopped.
func debianAptInstall(pkg, name string) error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("not root (uid %d), and apt-get install needs root", uid)
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return errors.New("there is no apt-get on this machine")
	}
	if _, err := os.Lstat(debianPolicyRC); errors.Is(err, fs.ErrNotExist) {
		// Removed afterwards only if written here: an existing one (Docker
		// images have one) is the machine's.
		if err := os.WriteFile(debianPolicyRC, []byte("#!/bin/sh\n# Written by limiterd's e2e tests for the duration of an apt-get install.\nexit 101\n"), 0o755); err == nil {
			defer os.Remove(debianPolicyRC)
		}
	}
	before := debianProcessesOf(name, pkg)
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		// Wait for a dpkg lock another apt-get holds rather than fail.
		cmd := exec.CommandContext(ctx, apt, append([]string{"-o", "DPkg::Lock::Timeout=300"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	install := []string{"install", "-y", "--no-install-recommends", pkg}
	out, err := run(install...)
	// Package lists missing (a fresh image has none) or out of date (the
	// version they name is no longer on the mirror): refresh them, once.
	if err != nil && (strings.Contains(out, "Unable to locate package") || strings.Contains(out, "Unable to fetch some archives")) {
		if uout, uerr := run("update"); uerr != nil {
			return fmt.Errorf("apt-get update: %v: %s", uerr, lastLines(uout, 5))
		}
		out, err = run(install...)
	}
	debianStopStarted(pkg, name, before)
	if err != nil {
		return fmt.Errorf("apt-get install %s: %v: %s", pkg, err, lastLines(out, 5))
	}
	return nil
}

// debianStopStarted stops the system service of pkg if its installation
// started it anyway (a policy-rc.d that allows it, systemd without the
// hook): systemctl disable --now when systemd runs (so that it does not
// come back), then SIGKILL for every process of the program that was not
// running before the installation.
func debianStopStarted(pkg, name string, before map[int]bool) {
	if _, err := os.Stat("/run/systemd/system"); err == nil {
		if systemctl, err := exec.LookPath("systemctl"); err == nil {
			exec.Command(systemctl, "disable", "--now", pkg+".service").Run()
		}
	}
	for pid := range debianProcessesOf(name, pkg) {
		if !before[pid] {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// debianProcessesOf returns the processes running Debian's binaries of names.
func debianProcessesOf(names ...string) map[int]bool {
	paths := map[string]bool{}
	for _, name := range names { // the program, and the daemon named as its package (prometheus for promtool)
		for _, dir := range []string{"/usr/sbin", "/usr/bin"} {
			if p, err := filepath.EvalSymlinks(filepath.Join(dir, name)); err == nil {
				paths[p] = true
			}
		}
	}
	pids := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(filepath.Join("/proc", e.Name(), "exe")); err == nil && paths[exe] {
			pids[pid] = true
		}
	}
	return pids
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
