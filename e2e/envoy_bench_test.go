package e2e

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/peerbin"
)

// envoyBenchRules: the recipe's descriptors with room for every request
// of the run, so that each is asked about and allowed: the work a
// compliant client's request costs (a denial is cheaper: it never reaches
// the app). envoyproxy/ratelimit reads the same file.
const envoyBenchRules = `domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: second, requests_per_unit: 1000000}
  - key: path
    value: /login
    descriptors:
      - key: remote_address
        rate_limit: {name: login, unit: minute, requests_per_unit: 5}
`

// envoyFilterBlock is the rate limit filter of examples/envoy/envoy.yaml,
// removed for the ceiling: the same Envoy asking no rate limit service.
var envoyFilterBlock = regexp.MustCompile(`(?s)\n                  - name: envoy\.filters\.http\.ratelimit\n.*?(\n                  - name: envoy\.filters\.http\.router)`)

// envoyRatelimitModule is the envoyproxy/ratelimit the comparison builds:
// its main branch of 2026-01-22 (it tags no releases).
const envoyRatelimitModule = "github.com/envoyproxy/ratelimit/src/service_cmd@v1.4.1-0.20260122083618-3fb702589d36"

// BenchmarkEnvoyRecipe: requests per second through the real Envoy
// (examples/envoy/envoy.yaml, one worker) in front of a no-op app, driven
// by wrk from one address (one key), in interleaved rounds of:
//
//   - ceiling: the same Envoy with the rate limit filter removed;
//   - limiterd: the recipe, one limiterd node as the rate limit service;
//   - ratelimit: the recipe, envoyproxy/ratelimit with Redis (Debian's)
//     as the rate limit service, built from its Go module.
//
// It reports each one's median and their ratios; run it alone on a quiet
// machine (BENCHMARKS.md, "Envoy in front"):
//
//	go test ./e2e -run '^$' -bench EnvoyRecipe -benchtime 1x -timeout 20m
//
// ENVOY_BENCH_SECONDS (8), ENVOY_BENCH_ROUNDS (3) and ENVOY_BENCH_CONNS
// (32) shape each wrk run.
func BenchmarkEnvoyRecipe(b *testing.B) {
	seconds := nodetest.EnvInt("ENVOY_BENCH_SECONDS", 8)
	rounds := nodetest.EnvInt("ENVOY_BENCH_ROUNDS", 3)
	conns := nodetest.EnvInt("ENVOY_BENCH_CONNS", 32)
	envoy := peerBinary(b, peerbin.Envoy())
	wrk := nodetest.DebianProgram(b, "wrk", "wrk")
	redis := nodetest.DebianProgram(b, "redis-server", "redis-server")
	ratelimit := goInstall(b, envoyRatelimitModule, "service_cmd")

	app := startProxiedApp(b)
	c := nodetest.Start(b, nodetest.Config{Nodes: 1, Rules: []string{envoyBenchRules}})
	rl := startEnvoyRatelimit(b, ratelimit, redis, envoyBenchRules)
	lim := []string{c.Procs[0].GRPC}
	setups := []struct {
		name string
		px   *proxyProcess
	}{
		{"ceiling", startEnvoy(b, envoy, lim, app.addr(), func(s string) string {
			out := envoyFilterBlock.ReplaceAllString(s, "$1")
			if out == s {
				b.Fatal("examples/envoy/envoy.yaml: the rate limit filter's block was not found")
			}
			return out
		})},
		{"limiterd", startEnvoy(b, envoy, lim, app.addr(), nil)},
		{"ratelimit", startEnvoy(b, envoy, []string{rl.grpc}, app.addr(), nil)},
	}
	runs := make([]wrkRun, len(setups))
	for i, s := range setups {
		runs[i] = wrkRun{name: s.name, args: []string{"-t1", "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(seconds) + "s", s.px.url + "/item"}, allAllowed: true}
	}
	b.ResetTimer()
	med := wrkRounds(b, wrk, rounds, runs, false)
	b.StopTimer()
	for name, v := range med {
		b.ReportMetric(v, name+"_req/s")
	}
	b.ReportMetric(med["limiterd"]/med["ceiling"], "limiterd/ceiling")
	b.ReportMetric(med["ratelimit"]/med["ceiling"], "ratelimit/ceiling")
	b.ReportMetric(med["limiterd"]/med["ratelimit"], "limiterd/ratelimit")
}

// goInstall builds module (path@version) into a directory of the test's
// and returns the program named name.
func goInstall(t testing.TB, module, name string) string {
	t.Helper()
	dir := t.TempDir()
	cmd := exec.Command("go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s: %v\n%s", module, err, out)
	}
	return filepath.Join(dir, name)
}

// envoyRatelimit is a running envoyproxy/ratelimit's addresses.
type envoyRatelimit struct {
	grpc string // its rate limit service, as Envoy asks it
	http string // its HTTP API (POST /json)
}

// startEnvoyRatelimit starts Redis and envoyproxy/ratelimit with rules on
// loopback ports of their own.
func startEnvoyRatelimit(t testing.TB, bin, redis, rules string) envoyRatelimit {
	t.Helper()
	dir := t.TempDir()
	redisPort := nodetest.FreePort(t)
	runProxy(t, proxyRecipe{dir: "redis", args: func(string) []string {
		return []string{"--port", strconv.Itoa(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"}
	}}, redis, dir, "")
	// ratelimit panics if Redis does not answer at its start.
	listening(t, "Redis", fmt.Sprintf("127.0.0.1:%d", redisPort))
	conf := filepath.Join(dir, "runtime", "ratelimit", "config")
	if err := os.MkdirAll(conf, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(conf, "edge.yaml"), []byte(rules), 0o644); err != nil {
		t.Fatal(err)
	}
	grpcPort, httpPort := nodetest.FreePort(t), nodetest.FreePort(t)
	env := []string{
		"USE_STATSD=false", "LOG_LEVEL=warn", "REDIS_SOCKET_TYPE=tcp",
		fmt.Sprintf("REDIS_URL=127.0.0.1:%d", redisPort),
		"RUNTIME_ROOT=" + filepath.Join(dir, "runtime"), "RUNTIME_SUBDIRECTORY=ratelimit", "RUNTIME_WATCH_ROOT=false",
		"HOST=127.0.0.1", "GRPC_HOST=127.0.0.1", "DEBUG_HOST=127.0.0.1",
		fmt.Sprintf("PORT=%d", httpPort), fmt.Sprintf("GRPC_PORT=%d", grpcPort), fmt.Sprintf("DEBUG_PORT=%d", nodetest.FreePort(t)),
	}
	runProxy(t, proxyRecipe{dir: "ratelimit", args: func(string) []string { return nil }, env: func(string) []string { return env }}, bin, dir, "")
	rl := envoyRatelimit{grpc: fmt.Sprintf("127.0.0.1:%d", grpcPort), http: fmt.Sprintf("127.0.0.1:%d", httpPort)}
	listening(t, "envoyproxy/ratelimit", rl.grpc)
	listening(t, "envoyproxy/ratelimit's HTTP API", rl.http)
	return rl
}

// listening waits until what accepts connections on addr.
func listening(t testing.TB, what, addr string) {
	t.Helper()
	nodetest.Eventually(t, what+" to listen on "+addr, 20*time.Second, func() bool {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
		}
		return err == nil
	})
}
