package faults

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	commonv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/loadgen"
	"github.com/limiterd/limiterd/internal/netlab"
	"github.com/limiterd/limiterd/internal/nodetest"
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

// startLab starts n limiterd nodes (with args added to their flags), node i in the lab's node i at
// 10.213.0.i+1 (HTTP :8080, cluster :7946, gRPC :8081, encrypted with a
// key made here), every other node joining node 0, and waits until every
// node sees all n alive. It skips, saying why, where the machine refuses
// namespaces or nftables cannot be installed.
func startLab(t *testing.T, n int, args ...string) *nodetest.Cluster {
	t.Helper()
	cfg := netlab.DefaultConfig()
	cfg.Nodes = n
	cfg.IP = nodetest.DebianProgram(t, "iproute2", "ip")
	cfg.NFT = nodetest.DebianProgram(t, "nftables", "nft")
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
	key := make([]byte, 16)
	rand.Read(key)
	c := nodetest.Start(t, nodetest.Config{Nodes: n, Rules: []string{labRules, labProbes}, Lab: lab,
		Args: append([]string{"-gossip-key", base64.StdEncoding.EncodeToString(key)}, args...)})
	c.WaitAlive(c.Procs, n, 30*time.Second)
	return c
}

// scenarioNote names, in a scenario's figures, the flags a variant of it
// adds to every node (none: "").
func scenarioNote(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " (" + strings.Join(args, " ") + ")"
}

// loadClient is one client of a load run: it asks for key every every,
// at a node that takes requests.
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

// labMaxLate is how late a load run's check may go out: one later is
// dropped, as a client's ticker drops the ticks it missed, so that a node
// that stalls the generator for a moment never makes a compliant client
// bunch its checks over its limit (40 a window, and a second's 4 more,
// stay under 50).
const labMaxLate = time.Second

// loadRun is a load run: limitload's driver (package loadgen) sending
// each client's checks as a stream of its own, from the lab's hub, each
// through the next node in turn that takes requests, and keeping every
// check's outcome. A client sends one check at a time (loadgen's
// OnePerKey): one due while its last is unanswered is dropped, as a
// client's ticker drops the ticks it missed.
type loadRun struct {
	up   []atomic.Bool // nodes that get requests now
	mu   sync.Mutex
	log  map[string][]outcome
	done chan struct{}
	res  *loadgen.Result // once done
}

// drive starts cs for d on the nodes of c that take requests (all at
// first: clear up[i] to take node i out); wait ends it.
func drive(t *testing.T, c *nodetest.Cluster, d time.Duration, cs []loadClient) *loadRun {
	t.Helper()
	r := &loadRun{up: make([]atomic.Bool, len(c.Procs)), log: map[string][]outcome{}, done: make(chan struct{})}
	for i := range r.up {
		r.up[i].Store(true)
	}
	cfg := loadgen.DefaultConfig()
	cfg.Targets = nil // the nodes only, not the default
	for _, p := range c.Procs {
		cfg.Targets = append(cfg.Targets, p.HTTP)
	}
	cfg.AllowRemote, cfg.Dial = true, c.Lab.DialContext // the lab's addresses, from its hub
	cfg.Pattern, cfg.Duration, cfg.Limit, cfg.Window = loadgen.PatternStreams, d, labLimit, labWindow
	for _, cl := range cs {
		cfg.Streams = append(cfg.Streams, loadgen.Stream{Key: cl.key, Rate: float64(time.Second) / float64(cl.every)})
	}
	cfg.Spread, cfg.OnePerKey = loadgen.SpreadKeyRoundRobin, true
	cfg.Conns, cfg.Timeout, cfg.MaxLate, cfg.Progress = 8, 5*time.Second, labMaxLate, 0
	cfg.Available = func(i int) bool { return r.up[i].Load() }
	cfg.Observe = func(o loadgen.Outcome) {
		if o.Status == loadgen.StatusNotSent {
			return
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		key := cs[o.Stream].key
		r.log[key] = append(r.log[key], outcome{at: o.Sent, took: o.Done - o.Sent, node: o.Target, code: o.Status, err: o.Err})
	}
	if err := cfg.Validate(nil); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	// Before the cluster's cleanup (cleanups run last first): no check is
	// sent once the test has ended, whatever ended it.
	t.Cleanup(func() {
		cancel()
		<-r.done
	})
	go func() {
		defer close(r.done)
		r.res = loadgen.Run(ctx, &cfg, "lab", nil)
	}()
	return r
}

// wait waits for the run's end.
func (r *loadRun) wait() { <-r.done }

// since is instant at on the run's clock (after wait): the outcomes' at.
func (r *loadRun) since(at time.Time) time.Duration { return at.Sub(r.res.Start()) }

// verdict is what the oracle says of a load run's decision log.
type verdict struct {
	checks, fiveXX, noAnswer int
	compliantDenied          int
	falseRejections          int     // over every client, by the oracle
	worst                    float64 // the most decided in a window ÷ the limit: held against the bounds
	worstSent                float64 // the most sent and admitted in a window ÷ the limit: what a client sees
	worstKey                 string
	// worstByNode is, for worstKey, how many of its admissions in its
	// busiest window by send instant each node made: which node let a key
	// through is what a failure's log must say.
	worstByNode []int
	// worstFrom is where that busiest window starts, since the run's
	// start (loadRun.since).
	worstFrom time.Duration
	p99, max  time.Duration
}

func (v verdict) String() string {
	return fmt.Sprintf("%d checks, %d 5xx, %d unanswered, %d compliant denied, %d false rejections (oracle), worst window %.2f x the limit (%s; %.2f by send instant, admitted by node %v), latency p99 %v max %v",
		v.checks, v.fiveXX, v.noAnswer, v.compliantDenied, v.falseRejections, v.worst, v.worstKey, v.worstSent, v.worstByNode, v.p99.Round(100*time.Microsecond), v.max.Round(100*time.Microsecond))
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

// judge judges the outcomes sent in [from, to) (zero instants: from the
// start, to the end) that keep (nil: all) keeps, with internal/oracle:
// the worst window among the admissions in [from, to), counting those
// sent and answered inside it (decided inside it, whatever the network's
// delay), and the false rejections among the denials there, judged
// against every admission before them. Call it after wait.
func (r *loadRun) judge(cs []loadClient, fromAt, toAt time.Time, keep func(outcome) bool) verdict {
	r.mu.Lock()
	defer r.mu.Unlock()
	var from, to time.Duration
	if !fromAt.IsZero() {
		from = r.since(fromAt)
	}
	if !toAt.IsZero() {
		to = max(r.since(toAt), 1) // 0 is "to the end"
	}
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
		sent, start := oracle.MaxInWindow(inPhase, nil, labWindow)
		if n := oracle.MaxDecidedInWindow(inPhase, inPhaseAnswered, labWindow); float64(n)/labLimit > v.worst {
			v.worst, v.worstKey, v.worstFrom = float64(n)/labLimit, cl.key, start
			v.worstByNode = make([]int, len(r.up))
			for _, o := range log {
				if o.code == http.StatusOK && o.at >= start && o.at < start+labWindow && o.node < len(r.up) {
					v.worstByNode[o.node]++
				}
			}
		}
		if float64(sent)/labLimit > v.worstSent {
			v.worstSent = float64(sent) / labLimit
		}
	}
	slices.Sort(took)
	if len(took) > 0 {
		v.p99, v.max = took[len(took)*99/100], took[len(took)-1]
	}
	return v
}

// convCount counts n checks of the probe key at node p over gRPC, all
// allowed.
func convCount(t *testing.T, p *nodetest.Proc, key string, n int) {
	t.Helper()
	for i := range n {
		if code, _ := probe(t, p, key, 1); code != rlsv3.RateLimitResponse_OK {
			t.Fatalf("probe check %d of %s on %s: %v", i, key, p.Name, code)
		}
	}
}

// convSeen is how many checks of the probe key node p has counted, read
// without counting.
func convSeen(t *testing.T, p *nodetest.Proc, key string) int64 {
	t.Helper()
	_, left := probe(t, p, key, 0)
	return 100000 - int64(left)
}

// probe asks node p over gRPC (dialled from the lab's hub) for hits of
// the probe descriptor with value key.
func probe(t *testing.T, p *nodetest.Proc, key string, hits uint64) (rlsv3.RateLimitResponse_Code, uint32) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := p.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "conv",
		Descriptors: []*commonv3.RateLimitDescriptor{{
			Entries:    []*commonv3.RateLimitDescriptor_Entry{{Key: "probe", Value: key}},
			HitsAddend: wrapperspb.UInt64(hits),
		}}})
	if err != nil {
		t.Fatalf("probe of %s on %s: %v", key, p.Name, err)
	}
	return resp.OverallCode, resp.Statuses[0].LimitRemaining
}

// sumMetric sums the series of name whose labels include the pairs of
// labels over ps (promtest: a trailing * matches a prefix).
func sumMetric(t *testing.T, ps []*nodetest.Proc, name string, labels ...string) (v float64) {
	t.Helper()
	for _, p := range ps {
		v += p.Metric(t, name, labels...)
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
	b, _ := nodetest.DerivedBound(t, n, labLimit, labWindow, 200*time.Millisecond, func(cc *counter.ClusterConfig) {
		cc.Coordinated = !fallback
	})
	return float64(b) / labLimit
}

// labTwoCoordinatorsBound is the worst window while two nodes grant a key
// at once, as a ratio to the limit: package counter, "Two coordinators at
// once", the budget's bound plus a limit and a lease pool, which is within
// the tolerance (0.1). It holds while some nodes have failed a silent
// coordinator over to the key's runner-up and others still ask it.
func labTwoCoordinatorsBound(t *testing.T, n int) float64 {
	t.Helper()
	return labBound(t, n, true) + 1 + 0.1
}
