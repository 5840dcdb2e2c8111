package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/netlab"
	"github.com/limiterd/limiterd/internal/oracle"
)

// The fault tests run each node in a network namespace of its own (package
// netlab), so that nftables can partition and drop between them as a real
// network does; on loopback every packet arrives.

// labRules is the clients' rule, short enough that a scenario spans
// several windows.
const labRules = `rules:
  - name: default
    limit: 50
    window: 10s
`

// labProbes is the convergence probes' rule, an envoyproxy/ratelimit
// file, whose counts stay in the window for the whole test: over gRPC a
// descriptor's hits_addend of 0 reads a count without counting, which GET
// /check cannot (a node that knows nothing yet would count the probe).
const labProbes = `domain: conv
descriptors:
  - key: probe
    rate_limit:
      unit: hour
      requests_per_unit: 100000
`

const (
	labLimit  = 50
	labWindow = 10 * time.Second
)

// startLab starts n limiterd nodes, node i in the lab's node i at
// 10.213.0.i+1 (HTTP :8080, cluster :7946, encrypted with a key made
// here), every other node joining node 0, and waits until every node sees
// all n alive. It skips, saying why, where the machine refuses namespaces
// or nftables cannot be installed.
func startLab(t *testing.T, n int, extra ...string) *testCluster {
	t.Helper()
	cfg := netlab.DefaultConfig()
	cfg.Nodes = n
	cfg.IP = debianProgram(t, "iproute2", "ip")
	cfg.NFT = debianProgram(t, "nftables", "nft")
	lab, err := netlab.New(cfg)
	if errors.Is(err, netlab.ErrUnavailable) {
		t.Skipf("the fault tests need network namespaces, which this machine refuses: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs last: after the processes stopped.
	t.Cleanup(func() {
		if err := lab.Close(); err != nil {
			t.Error(err)
		}
	})
	dir := t.TempDir()
	path := filepath.Join(dir, "rules.yaml") + "," + filepath.Join(dir, "probes.yaml")
	for name, body := range map[string]string{"rules.yaml": labRules, "probes.yaml": labProbes} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	key := make([]byte, 16)
	rand.Read(key)
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: lab.DialContext, MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64,
	}}
	c := &testCluster{t: t, bin: limiterdBinary(t), rules: path, lab: lab, hc: hc}
	t.Cleanup(c.stopAll)
	for i := range n {
		addr := lab.Addr(i).String()
		p := &proc{index: i, name: fmt.Sprintf("node-%d", i), hc: hc, http: addr + ":8080", gossip: addr + ":7946", grpc: addr + ":8081"}
		p.args = []string{"-node-name", p.name, "-http-addr", p.http, "-bind-addr", p.gossip, "-grpc-addr", p.grpc,
			"-rules", path, "-log-level", "warn", "-gossip-key", base64.StdEncoding.EncodeToString(key)}
		if i > 0 {
			p.args = append(p.args, "-join", c.procs[0].gossip)
		}
		p.args = append(p.args, extra...)
		c.procs = append(c.procs, p)
		c.start(p)
	}
	c.waitAlive(c.procs, n, 30*time.Second)
	return c
}

// waitAlive waits until each of ps sees want members alive, and returns
// how long that took.
func (c *testCluster) waitAlive(ps []*proc, want int, within time.Duration) time.Duration {
	c.t.Helper()
	start := time.Now()
	for _, p := range ps {
		eventually(c.t, fmt.Sprintf("%s sees %d members alive", p.name, want), within-time.Since(start), func() bool {
			m, err := members(p)
			return err == nil && countState(m, "alive") == want
		})
	}
	return time.Since(start)
}

// loadClient is one client of a load run: it asks for key every every,
// at the next node that takes requests.
type loadClient struct {
	key       string
	every     time.Duration
	compliant bool // below its limit: it must never be denied
}

// clients returns compliant clients at 80 % of the limit's rate and
// abusive ones at ten times it.
func clients(compliant, abusive int) []loadClient {
	var cs []loadClient
	for i := range compliant {
		cs = append(cs, loadClient{key: fmt.Sprintf("ok-%d", i), every: labWindow / (labLimit * 8 / 10), compliant: true})
	}
	for i := range abusive {
		cs = append(cs, loadClient{key: fmt.Sprintf("abuse-%d", i), every: labWindow / (labLimit * 10)})
	}
	return cs
}

// outcome is one check of a load run.
type outcome struct {
	at   time.Duration // sent, since the run's start
	took time.Duration
	node int
	code int // 0: no answer (err)
	err  error
}

// loadRun drives clients through the nodes that take requests and keeps
// every outcome. Each client sends one check at a time, so a slow answer
// delays its next one (a time.Ticker drops the ticks it missed).
type loadRun struct {
	c     *testCluster
	start time.Time
	up    []atomic.Bool // nodes that get requests now
	mu    sync.Mutex
	log   map[string][]outcome
	wg    sync.WaitGroup
}

// drive starts cs for at most d (and at most d/every checks each) on every
// node; wait ends it.
func (c *testCluster) drive(ctx context.Context, d time.Duration, cs []loadClient) *loadRun {
	r := &loadRun{c: c, start: time.Now(), up: make([]atomic.Bool, len(c.procs)), log: map[string][]outcome{}}
	for i := range r.up {
		r.up[i].Store(true)
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	var running sync.WaitGroup
	for ci, cl := range cs {
		running.Add(1)
		go func() {
			defer running.Done()
			tick := time.NewTicker(cl.every)
			defer tick.Stop()
			next := ci
			for n := int64(0); n <= int64(d/cl.every); n++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				node := r.pick(&next)
				if node < 0 {
					continue
				}
				p := c.procs[node]
				at := time.Since(r.start)
				code, _, err := p.get("/check?key=" + cl.key)
				o := outcome{at: at, took: time.Since(r.start) - at, node: node, code: code, err: err}
				r.mu.Lock()
				r.log[cl.key] = append(r.log[cl.key], o)
				r.mu.Unlock()
			}
		}()
	}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		running.Wait()
		cancel()
	}()
	return r
}

// pick returns the next node after *next that takes requests, or -1.
func (r *loadRun) pick(next *int) int {
	for range len(r.up) {
		*next = (*next + 1) % len(r.up)
		if r.up[*next].Load() {
			return *next
		}
	}
	return -1
}

// wait waits for the run's end.
func (r *loadRun) wait() { r.wg.Wait() }

// now is the instant of the run's clock.
func (r *loadRun) now() time.Duration { return time.Since(r.start) }

// verdict is what the oracle says of a load run's decision log.
type verdict struct {
	checks, fiveXX, noAnswer int
	compliantDenied          int
	falseRejections          int     // over every client, by the oracle
	worst                    float64 // the most decided in a window ÷ the limit: held against the bounds
	worstSent                float64 // the most sent and admitted in a window ÷ the limit: what a client sees
	worstKey                 string
	p99, max                 time.Duration
}

func (v verdict) String() string {
	return fmt.Sprintf("%d checks, %d 5xx, %d unanswered, %d compliant denied, %d false rejections (oracle), worst window %.2f x the limit (%s; %.2f by send instant), latency p99 %v max %v",
		v.checks, v.fiveXX, v.noAnswer, v.compliantDenied, v.falseRejections, v.worst, v.worstKey, v.worstSent, v.p99.Round(100*time.Microsecond), v.max.Round(100*time.Microsecond))
}

// holdsPromise fails t unless every check was answered, none with a 5xx,
// and no compliant client was denied; what names the phase in the error.
func (v verdict) holdsPromise(t *testing.T, what string) {
	t.Helper()
	if v.fiveXX != 0 || v.noAnswer != 0 || v.compliantDenied != 0 {
		if what != "" {
			what += ": "
		}
		t.Errorf("%s%d 5xx, %d unanswered, %d checks of compliant clients denied; want none", what, v.fiveXX, v.noAnswer, v.compliantDenied)
	}
}

// judge judges the outcomes sent in [from, to) (to 0: to the end) that
// keep (nil: all) keeps, with internal/oracle: the worst window among the
// admissions in [from, to), counting those sent and answered inside it
// (decided inside it, whatever the network's delay), and the false
// rejections among the denials there, judged against every admission
// before them.
func (r *loadRun) judge(cs []loadClient, from, to time.Duration, keep func(outcome) bool) verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	var v verdict
	var took []time.Duration
	for _, cl := range cs {
		var admitted, answered, rejected, inPhase, inPhaseAnswered []time.Duration
		log := slices.Clone(r.log[cl.key])
		slices.SortFunc(log, func(a, b outcome) int { return int(a.at - b.at) })
		for _, o := range log {
			switch o.code {
			case http.StatusOK:
				admitted = append(admitted, o.at)
				answered = append(answered, o.at+o.took)
				if o.at >= from && (to == 0 || o.at < to) {
					inPhase = append(inPhase, o.at)
					inPhaseAnswered = append(inPhaseAnswered, o.at+o.took)
				}
			case http.StatusTooManyRequests:
				if o.at >= from && (to == 0 || o.at < to) {
					rejected = append(rejected, o.at)
				}
			}
			if o.at < from || (to > 0 && o.at >= to) || (keep != nil && !keep(o)) {
				continue
			}
			v.checks++
			took = append(took, o.took)
			switch {
			case o.err != nil:
				v.noAnswer++
			case o.code >= 500:
				v.fiveXX++
			case o.code == http.StatusTooManyRequests && cl.compliant:
				v.compliantDenied++
			}
		}
		// A node decided each check between its sending and its answer.
		// An admission is judged at its answer and a denial at its
		// sending, so that the network's delay never makes a denial look
		// false: each key has one client, which sends a check only once
		// the one before it was answered, so every admission in the
		// node's window then is in the oracle's.
		slices.Sort(answered)
		v.falseRejections += oracle.FalseRejections(answered, rejected, labWindow, labLimit)
		if n := oracle.MaxDecidedInWindow(inPhase, inPhaseAnswered, labWindow); float64(n)/labLimit > v.worst {
			v.worst, v.worstKey = float64(n)/labLimit, cl.key
		}
		if n, _ := oracle.MaxInWindow(inPhase, nil, labWindow); float64(n)/labLimit > v.worstSent {
			v.worstSent = float64(n) / labLimit
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		v.p99, v.max = took[len(took)*99/100], took[len(took)-1]
	}
	return v
}

// figures logs a scenario's figures in one line, the line docs/faults.md
// quotes, and appends it to the file LIMITERD_FIGURES names, if any: go
// test shows a passing test's log only with -v, and make test prints that
// file at its end.
func figures(t *testing.T, scenario string, kv ...any) {
	t.Helper()
	var b strings.Builder
	for i := 0; i+1 < len(kv); i += 2 {
		fmt.Fprintf(&b, "; %v: %v", kv[i], kv[i+1])
	}
	line := "FIGURES " + scenario + b.String()
	t.Log(line)
	if path := os.Getenv("LIMITERD_FIGURES"); path != "" {
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(line + "\n"); err != nil { // one write: appends of parallel tests do not mix
			t.Fatal(err)
		}
	}
}

// convCount counts n checks of the probe key at node p over gRPC, all
// allowed.
func (c *testCluster) convCount(p *proc, key string, n int) {
	c.t.Helper()
	for i := range n {
		if code, _ := c.probe(p, key, 1); code != rlsv3.RateLimitResponse_OK {
			c.t.Fatalf("probe check %d of %s on %s: %v", i, key, p.name, code)
		}
	}
}

// convSeen is how many checks of the probe key node p has counted, read
// without counting.
func (c *testCluster) convSeen(p *proc, key string) int64 {
	c.t.Helper()
	_, left := c.probe(p, key, 0)
	return 100000 - int64(left)
}

// probe asks node p over gRPC (dialled from the lab's hub) for hits of
// the probe descriptor with value key.
func (c *testCluster) probe(p *proc, key string, hits uint64) (rlsv3.RateLimitResponse_Code, uint32) {
	c.t.Helper()
	conn, err := grpc.NewClient("passthrough:///"+p.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
			return c.lab.DialContext(ctx, "tcp", addr)
		}))
	if err != nil {
		c.t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rlsv3.NewRateLimitServiceClient(conn).ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "conv",
		Descriptors: []*commonv3.RateLimitDescriptor{{
			Entries:    []*commonv3.RateLimitDescriptor_Entry{{Key: "probe", Value: key}},
			HitsAddend: wrapperspb.UInt64(hits),
		}}})
	if err != nil {
		c.t.Fatalf("probe of %s on %s: %v", key, p.name, err)
	}
	return resp.OverallCode, resp.Statuses[0].LimitRemaining
}

// sumMetric sums the series starting with prefix over ps.
func sumMetric(t *testing.T, ps []*proc, prefix string) (v float64) {
	t.Helper()
	for _, p := range ps {
		v += metricValue(t, p, prefix)
	}
	return v
}

// labBound is the worst window the counter derives for the clients' rule
// on n nodes at the default sync interval, as a ratio to the limit: with
// the coordinator answering, or (fallback) for checks the budget decides
// because it does not, the bound a fault that cuts the coordinator off
// keeps.
func labBound(t *testing.T, n int, fallback bool) float64 {
	t.Helper()
	b, _ := derivedBound(t, n, labLimit, labWindow, 200*time.Millisecond, func(cc *counter.ClusterConfig) {
		cc.Coordinated = !fallback
	})
	return float64(b) / labLimit
}
