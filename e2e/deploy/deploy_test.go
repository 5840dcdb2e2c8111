package deploy

// The deployment files under deploy/ (systemd, Prometheus, Grafana) are
// tested here against the tools that consume them (systemd-analyze,
// promtool, a real Prometheus) and against live limiterd processes.

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"testing"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/promtest"
)

// deployPath is a file under deploy/, from the directory go test runs in
// (e2e/deploy).
func deployPath(parts ...string) string {
	return filepath.Join(append([]string{"..", "..", "deploy"}, parts...)...)
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
	return nodetest.DebianProgram(t, pkg, program)
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
// families by name with their type, and its samples.
func deployFamilies(t *testing.T, p *nodetest.Proc) (types map[string]string, samples []promtest.Sample) {
	t.Helper()
	m := p.Metrics(t)
	return m.Types(), m.Samples()
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

// deployCall is a ShouldRateLimit call of one user's descriptor in the
// domain e2e.
func deployCall(user string) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: "e2e", Descriptors: []*commonv3.RateLimitDescriptor{
		{Entries: []*commonv3.RateLimitDescriptor_Entry{{Key: "user", Value: user}}},
	}}
}
