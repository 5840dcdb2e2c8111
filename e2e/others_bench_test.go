package e2e

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// gubernatorModule is the gubernator the comparison builds: v2.13.0, the
// release issue 17's table measured.
const gubernatorModule = "github.com/gubernator-io/gubernator/v2/cmd/gubernator@v2.13.0"

// othersRatelimitRules: envoyproxy/ratelimit's rules for the comparison,
// the design limit (600 a minute) for each client, as limiterd's default
// rule in testdata/rules.yaml and the limit each gubernator request names.
const othersRatelimitRules = `domain: bench
descriptors:
  - key: client
    rate_limit: {unit: minute, requests_per_unit: 600}
`

// httpService is a rate limiter, or the no-op handler, as wrk asks it: a
// request per check, {key} in its path and body replaced by the check's
// client number (scripts/random-key.lua).
type httpService struct {
	name   string
	addr   string // HOST:PORT
	method string
	path   string
	body   string // "": none
	// denied reports whether a response (status, body) is a denial.
	denied func(status int, body []byte) bool
	// statuses are those it answers a check with, allowed first.
	statuses []int
}

// request returns s's request for client key, for a plain HTTP client.
func (s httpService) request(key string) (*http.Request, error) {
	var body io.Reader
	if s.body != "" {
		body = strings.NewReader(strings.ReplaceAll(s.body, "{key}", key))
	}
	req, err := http.NewRequest(s.method, "http://"+s.addr+strings.ReplaceAll(s.path, "{key}", key), body)
	if err == nil && body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, err
}

// BenchmarkAgainstOthers: issue 17's table, re-run. Requests per second
// over loopback, with wrk drawing a random client out of
// OTHERS_BENCH_KEYS (1,000) for each request (scripts/random-key.lua, as
// scripts/bench-loopback.sh draws them), in interleaved rounds of:
//
//   - no-op: limiterd's /healthz (fixed JSON, no limiter work);
//   - limiterd: /check on a node alone;
//   - node of 8: /check on one node of an 8-node cluster on the same
//     machine, its 7 peers merging what it counts;
//   - gubernator: one node of gubernator v2.13.0, its HTTP API
//     (POST /v1/GetRateLimits), built from its Go module;
//   - ratelimit: envoyproxy/ratelimit's HTTP API (POST /json) with Redis
//     (Debian's), built from its Go module.
//
// Every service limits each client to 600 a minute. Before the rounds each
// is asked 601 times for one client, and must allow the first 600 and deny
// the 601st: the services compared all count. A first round, not counted,
// warms them all, and fails unless each answered only the statuses it
// answers a check with (gubernator 200 alone, OVER_LIMIT in its body).
// It reports each one's median, its ratio to the no-op handler's, and the
// share of the node of 8's checks in the rounds that asked another node;
// run it alone on a quiet machine (BENCHMARKS.md, "Issue 17's table
// again"):
//
//	go test ./e2e -run '^$' -bench AgainstOthers -benchtime 1x -timeout 30m
//
// OTHERS_BENCH_SECONDS (8), OTHERS_BENCH_ROUNDS (3), OTHERS_BENCH_CONNS
// (32) and OTHERS_BENCH_THREADS (2) shape each wrk run, the issue's.
func BenchmarkAgainstOthers(b *testing.B) {
	keys := nodetest.EnvInt("OTHERS_BENCH_KEYS", 1000)
	seconds := nodetest.EnvInt("OTHERS_BENCH_SECONDS", 8)
	rounds := nodetest.EnvInt("OTHERS_BENCH_ROUNDS", 3)
	conns := nodetest.EnvInt("OTHERS_BENCH_CONNS", 32)
	threads := nodetest.EnvInt("OTHERS_BENCH_THREADS", 2)
	wrk := nodetest.DebianProgram(b, "wrk", "wrk")
	redis := nodetest.DebianProgram(b, "redis-server", "redis-server")
	ratelimit := goInstall(b, envoyRatelimitModule, "service_cmd")
	gubernator := goInstall(b, gubernatorModule, "gubernator")

	rules, err := os.ReadFile(filepath.Join("..", "testdata", "rules.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	// A node alone: no -bind-addr (the last one given wins), as
	// scripts/bench-loopback.sh runs it.
	single := nodetest.Start(b, nodetest.Config{Nodes: 1, Rules: []string{string(rules)}, Args: []string{"-bind-addr", ""}})
	cluster := nodetest.Start(b, nodetest.Config{Nodes: 8, Rules: []string{string(rules)}})
	cluster.WaitAlive(cluster.Procs, 8, 30*time.Second)
	rl := startEnvoyRatelimit(b, ratelimit, redis, othersRatelimitRules)
	gub := startGubernator(b, gubernator)

	status := func(code int) func(int, []byte) bool {
		return func(got int, _ []byte) bool { return got == code }
	}
	limiterd := func(name, addr string) httpService {
		return httpService{name: name, addr: addr, method: "GET", path: "/check?key=client:{key}", denied: status(http.StatusTooManyRequests), statuses: []int{http.StatusOK, http.StatusTooManyRequests}}
	}
	services := []httpService{
		{name: "no-op", addr: single.Procs[0].HTTP, method: "GET", path: "/healthz?key=client:{key}", statuses: []int{http.StatusOK}},
		limiterd("limiterd", single.Procs[0].HTTP),
		limiterd("node of 8", cluster.Procs[0].HTTP),
		{
			name: "gubernator", addr: gub, method: "POST", path: "/v1/GetRateLimits",
			body: `{"requests":[{"name":"bench","unique_key":"client:{key}","hits":1,"limit":600,"duration":60000}]}`,
			denied: func(code int, body []byte) bool {
				return code == http.StatusOK && bytes.Contains(body, []byte(`"status":"OVER_LIMIT"`))
			},
			statuses: []int{http.StatusOK}, // OVER_LIMIT in the body
		},
		{
			name: "ratelimit", addr: rl.http, method: "POST", path: "/json",
			body:     `{"domain":"bench","descriptors":[{"entries":[{"key":"client","value":"{key}"}]}]}`,
			denied:   status(http.StatusTooManyRequests),
			statuses: []int{http.StatusOK, http.StatusTooManyRequests},
		},
	}
	for _, s := range services[1:] {
		checkLimits(b, s, 600)
	}
	// scripts/bench-loopback.sh's request generator.
	script, err := filepath.Abs(filepath.Join("..", "scripts", "random-key.lua"))
	if err != nil {
		b.Fatal(err)
	}
	runs := make([]wrkRun, len(services))
	for i, s := range services {
		args := []string{
			"-t" + strconv.Itoa(threads), "-c" + strconv.Itoa(conns), "-d" + strconv.Itoa(seconds) + "s",
			"-s", script, "http://" + s.addr, "--", strconv.Itoa(keys), s.method, s.path,
		}
		if s.body != "" {
			args = append(args, s.body)
		}
		runs[i] = wrkRun{name: s.name, args: args, statuses: s.statuses}
	}
	// A round first, not counted: it meets every key new, on each of the
	// cluster's 8 nodes, which a cluster up for a window no longer does
	// (scripts/bench-loopback.sh's WARMUP). It also counts each service's
	// statuses: every request must have been understood.
	wrkRounds(b, wrk, 1, runs, true)
	node := cluster.Procs[0]
	asks0, checks0 := node.Metrics(b).Sum("limiterd_coordinator_asks_total"), node.Metrics(b).Sum("limiterd_decisions_total")
	b.ResetTimer()
	med := wrkRounds(b, wrk, rounds, runs, false)
	b.StopTimer()
	m := node.Metrics(b)
	b.ReportMetric(100*(m.Sum("limiterd_coordinator_asks_total")-asks0)/(m.Sum("limiterd_decisions_total")-checks0), "node-of-8_asked_%")
	for _, s := range services {
		b.ReportMetric(med[s.name], strings.ReplaceAll(s.name, " ", "-")+"_req/s")
		if s.name != "no-op" {
			b.ReportMetric(med[s.name]/med["no-op"], strings.ReplaceAll(s.name, " ", "-")+"/no-op")
		}
	}
	b.ReportMetric(med["node of 8"]/med["limiterd"], "node-of-8/limiterd")
}

// checkLimits asks s limit+1 times for one client of its own and fails b
// unless each answer has one of s's statuses, the first limit allow and
// the last denies.
func checkLimits(b *testing.B, s httpService, limit int) {
	b.Helper()
	key := "limits-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	for i := 1; i <= limit+1; i++ {
		req, err := s.request(key)
		if err != nil {
			b.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			b.Fatalf("%s: %v", s.name, err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if !slices.Contains(s.statuses, resp.StatusCode) {
			b.Fatalf("%s: request %d answered %d, want one of %v: %s", s.name, i, resp.StatusCode, s.statuses, body.Bytes())
		}
		if denied := s.denied(resp.StatusCode, body.Bytes()); denied != (i > limit) {
			b.Fatalf("%s: request %d of a limit of %d: denied %v (%d %s)", s.name, i, limit, denied, resp.StatusCode, body.Bytes())
		}
	}
}

// startGubernator starts one gubernator node on loopback ports of its own,
// a cluster of itself, and returns its HTTP API's address.
func startGubernator(t testing.TB, bin string) string {
	t.Helper()
	httpAddr := "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
	gossip := "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
	env := []string{
		"GUBER_HTTP_ADDRESS=" + httpAddr,
		"GUBER_GRPC_ADDRESS=127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t)),
		// memberlist on loopback alone, joining itself: gubernator
		// requires a known node.
		"GUBER_MEMBERLIST_ADDRESS=" + gossip, "GUBER_MEMBERLIST_BIND_ADDRESS=" + gossip,
		"GUBER_MEMBERLIST_KNOWN_NODES=" + gossip,
		"GUBER_LOG_LEVEL=warn", "OTEL_TRACES_EXPORTER=none",
	}
	runProxy(t, proxyRecipe{dir: "gubernator", args: func(string) []string { return nil }, env: func(string) []string { return env }}, bin, t.TempDir(), "")
	listening(t, "gubernator", httpAddr)
	return httpAddr
}
