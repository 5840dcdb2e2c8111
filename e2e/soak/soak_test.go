package soak

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/loadgen"
	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/promtest"
	"github.com/limiterd/limiterd/internal/svgchart/svgtest"
)

// The soak (issue 12): 8 nodes under half the HS2 rate this machine
// sustains, one node restarted every minute, for LIMITERD_SOAK_DURATION.
// Each minute it records what grows when something leaks (resident
// memory, goroutines, open file descriptors), what the clients see
// (latency, 5xx, errors) and what the limiter decides for a few judge
// keys whose whole decision logs it keeps (internal/oracle). It writes
// docs/img/soak.svg and the Soak section of docs/faults.md.

// soakRules is HS2's rule: 600 per 60 s in 12 slices.
const soakRules = `rules:
  - name: default
    limit: 600
    window: 60s
    slices: 12
`

const (
	soakNodes  = 8
	soakLimit  = 600
	soakWindow = 60 * time.Second
	soakKeys   = 200_000 // HS1's clients, drawn by Zipf(soakZipfS) as in HS2
	soakZipfS  = 1.1
	// soakDefaultRate is half of the 12,000 checks/s BENCHMARKS.md's "HS2
	// on this machine" measures as sustained with p99 under 10 ms: a soak
	// looks for what grows, not for the ceiling.
	soakDefaultRate = 6000
	// soakLate is how late a check may be sent: one later is not sent at
	// all (and counted as unsent), so that a generator that fell behind
	// never catches up in a burst the nodes did not get on time, nor
	// bunches a compliant key's checks above its limit.
	soakLate    = time.Second
	soakTimeout = 5 * time.Second
	// soakDrain is how long a node is out of the load before its SIGTERM.
	soakDrain = time.Second
	// soakConns is how many keep-alive connections the load holds to each
	// node, its checks in flight there at most: 6,000/s at HS2's p99 of 5
	// ms needs 30 in all, and a node's descriptors and goroutines are then
	// its own plus a bounded number of clients', not the peaks of a stall.
	soakConns = 32
	// soakMinute is the sampling period and the restart period.
	soakMinute = time.Minute
	// soakTail is how long the load goes on past the last minute, its
	// checks not counted, so that the last sample, like every other, finds
	// the clients' connections open.
	soakTail = 5 * time.Second
)

// soakJudgeRates are the judge keys' rates as multiples of the limit's
// rate (10/s): below 1 compliant (never to be denied), above abusive.
func soakJudgeRates() []float64 { return []float64{0.5, 0.8, 0.9, 2, 5, 20} }

// soakJudge is one judge key and its decision log: the send instants
// (since the load's start) of its admitted and its denied checks.
type soakJudge struct {
	key       string
	rate      float64 // checks/s
	compliant bool
	mu        sync.Mutex
	admitted  []time.Duration
	rejected  []time.Duration
}

// soakMinuteLog is what the clients saw of the checks sent in one minute,
// in all and (node) at each node.
type soakMinuteLog struct {
	mu     sync.Mutex
	node   []soakNodeChecks
	checks int // sent
	unsent int // not sent: the generator was more than soakLate behind
	fiveXX int
	errs   int           // no answer from a node not being restarted
	errMsg string        // the first of them
	lost   int           // no answer from the node being restarted (expected)
	behind time.Duration // most a check was sent after its scheduled instant
	p50    time.Duration // of every answered check, once summed up
	p99    time.Duration
}

// soakNodeChecks is what the clients saw of one node's checks in a minute.
type soakNodeChecks struct {
	lat                        []time.Duration // answered, send to answer; nil once summed up
	checks, fiveXX, errs, lost int
	p99                        time.Duration
}

// soakNodeSample is one node at a minute's end.
type soakNodeSample struct {
	rssMB      float64
	goroutines int
	fds        int
	err        error
}

// soakRestart is one restart.
type soakRestart struct {
	node    string
	signal  string
	exit    int           // exit code (-1: killed)
	down    time.Duration // signal to /readyz
	rejoin  time.Duration // /readyz to seeing every member alive (-1: not within the bound)
	stderrN int           // lines the stopped process logged (-log-level warn)
}

// soak is one run.
type soak struct {
	t       *testing.T
	c       *nodetest.Cluster
	up      []atomic.Bool  // nodes in the load
	changed []atomic.Int64 // when a node last went out of the load or back (UnixNano)
	judges  []*soakJudge
	minutes []*soakMinuteLog
	start   time.Time
	d       time.Duration
	rate    int
}

func TestSoak(t *testing.T) {
	ds := os.Getenv("LIMITERD_SOAK_DURATION")
	if ds == "" {
		t.Skip("the soak runs only with LIMITERD_SOAK_DURATION set: `make soak` runs it (DURATION=30m, RATE=6000)")
	}
	d, err := time.ParseDuration(ds)
	if err != nil || d < 2*soakMinute {
		t.Fatalf("LIMITERD_SOAK_DURATION=%q: want a duration of at least 2m", ds)
	}
	// Whole minutes: every figure is per minute.
	d = d.Truncate(soakMinute)
	rate := nodetest.EnvInt("LIMITERD_SOAK_RATE", soakDefaultRate)
	machine := soakMachine()
	t.Logf("soak: %d nodes, %d checks/s, %v, a restart every %v; %s", soakNodes, rate, d, soakMinute, machine)

	c := nodetest.Start(t, nodetest.Config{Nodes: soakNodes, Rules: []string{soakRules}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees all members alive", 30*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == soakNodes
		})
	}
	s := &soak{
		t: t, c: c, d: d, rate: rate,
		up:      make([]atomic.Bool, soakNodes),
		changed: make([]atomic.Int64, soakNodes),
	}
	for i := range s.up {
		s.up[i].Store(true)
	}
	for i, f := range soakJudgeRates() {
		kind := "abusive"
		if f < 1 {
			kind = "compliant"
		}
		s.judges = append(s.judges, &soakJudge{key: fmt.Sprintf("judge-%s-%d", kind, i), rate: f * soakLimit / soakWindow.Seconds(), compliant: f < 1})
	}
	n := int(d / soakMinute)
	for range n {
		s.minutes = append(s.minutes, &soakMinuteLog{node: make([]soakNodeChecks, soakNodes)})
	}

	ctx, cancel := context.WithCancel(context.Background())
	s.start = time.Now().Add(100 * time.Millisecond) // the load's instant 0, to the millisecond
	done := s.load(ctx)
	// Before the cluster's cleanup (cleanups run last first): no sender
	// outlives the test, whatever ends it.
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(2 * soakTimeout):
			t.Error("the load did not stop")
		}
	})

	samples := make([][]soakNodeSample, n)
	restarts := make([]soakRestart, n)
	for m := range n {
		time.Sleep(time.Until(s.start.Add(time.Duration(m)*soakMinute + soakMinute/2)))
		restarts[m] = s.restart(m)
		time.Sleep(time.Until(s.start.Add(time.Duration(m+1) * soakMinute)))
		samples[m] = s.sample()
		s.logSamples(m, samples[m], restarts[m])
		if m > 0 {
			s.minutes[m-1].sum() // all answered: sent a minute or more ago, the timeout is 5 s
			s.logChecks(m - 1)
		}
	}
	select { // the schedule ends at d + soakTail: its last checks are answered within the timeout
	case <-done:
	case <-time.After(soakTail + 2*soakTimeout):
		t.Fatal("the load did not stop")
	}
	s.minutes[n-1].sum()
	s.logChecks(n - 1)

	rows := s.rows(samples, restarts)
	verdict := soakVerdict(rows)
	t.Log(verdict)
	svg := soakChart(rows, rate, d)
	svgtest.Parse(t, svg)
	if err := os.WriteFile(filepath.Join("..", "..", "docs", "img", "soak.svg"), svg, 0o644); err != nil {
		t.Fatal(err)
	}
	section := soakSection(rows, restarts, verdict, rate, d, machine)
	if err := soakWriteSection(filepath.Join("..", "..", "docs", "faults.md"), section); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote docs/img/soak.svg and the Soak section of docs/faults.md:\n%s", section)

	// The README's promises, judged after the figures are written.
	var fiveXX, errs, falseRej int
	for _, r := range rows {
		fiveXX += r.fiveXX
		errs += r.errs
		falseRej += r.falseRejections
	}
	if fiveXX > 0 {
		t.Errorf("%d checks answered 5xx: /check never answers 5xx", fiveXX)
	}
	if errs > 0 {
		t.Errorf("%d checks to nodes not being restarted got no answer", errs)
	}
	if falseRej > 0 {
		t.Errorf("compliant clients were denied %d times while under their limit", falseRej)
	}
}

// load runs limitload's driver (package loadgen) until d (and soakTail)
// or until ctx ends, with a stream for the many keys at the rate the judges leave and
// one for each judge key at its own rate, each check at its instant (open
// loop: a slow answer does not delay the next), to a node at random among
// those in the load, or not at all when more than soakLate behind; done
// closes when it has returned.
func (s *soak) load(ctx context.Context) <-chan struct{} {
	cfg := loadgen.DefaultConfig()
	cfg.Targets = nil // the nodes only, not the default
	for _, p := range s.c.Procs {
		cfg.Targets = append(cfg.Targets, p.HTTP)
	}
	cfg.Pattern, cfg.Duration, cfg.Limit, cfg.Window = loadgen.PatternStreams, s.d+soakTail, soakLimit, soakWindow
	bulk := float64(s.rate)
	for _, j := range s.judges {
		cfg.Streams = append(cfg.Streams, loadgen.Stream{Key: j.key, Rate: j.rate})
		bulk -= j.rate
	}
	cfg.Streams = append(cfg.Streams, loadgen.Stream{Key: "k", Keys: soakKeys, ZipfS: soakZipfS, Rate: bulk})
	cfg.Conns, cfg.Timeout, cfg.MaxLate, cfg.Progress = soakConns, soakTimeout, soakLate, 0
	cfg.MaxLog = 1 // the soak keeps its own logs, a minute at a time (observe)
	cfg.Available = func(i int) bool { return s.up[i].Load() }
	cfg.Observe = s.observe
	if err := cfg.Validate(nil); err != nil {
		s.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		loadgen.Run(ctx, &cfg, "soak", nil)
	}()
	return done
}

// observe counts one check in the minute it was sent in (unsent: it was
// due in), at its node, and in its judge key's decision log. A check that
// got no answer is lost to a restart when its node went out of the load
// or back while it was on its way (or is out now), an error otherwise.
func (s *soak) observe(o loadgen.Outcome) {
	if o.Sched >= s.d {
		return // the tail
	}
	if o.Status == loadgen.StatusNotSent {
		m := s.minuteAt(o.Sched)
		m.mu.Lock()
		m.unsent++
		m.mu.Unlock()
		return
	}
	took := o.Done - o.Sent
	m := s.minuteAt(o.Sent)
	m.mu.Lock()
	nc := &m.node[o.Target]
	m.checks++
	nc.checks++
	m.behind = max(m.behind, o.Sent-o.Sched)
	switch {
	case o.Status == loadgen.StatusError && (!s.up[o.Target].Load() || s.changed[o.Target].Load() > time.Now().Add(-took).UnixNano()):
		m.lost++
		nc.lost++
	case o.Status == loadgen.StatusError:
		if m.errs == 0 {
			m.errMsg = fmt.Sprintf("%s: %v", s.c.Procs[o.Target].Name, o.Err)
		}
		m.errs++
		nc.errs++
	default:
		if o.Status >= 500 {
			m.fiveXX++
			nc.fiveXX++
		}
		nc.lat = append(nc.lat, took)
	}
	m.mu.Unlock()
	if o.Stream < len(s.judges) && o.Status != loadgen.StatusError {
		jd := s.judges[o.Stream]
		jd.mu.Lock()
		switch o.Status {
		case http.StatusOK:
			jd.admitted = append(jd.admitted, o.Sent)
		case http.StatusTooManyRequests:
			jd.rejected = append(jd.rejected, o.Sent)
		}
		jd.mu.Unlock()
	}
}

// minuteAt is the log of the minute at since the start lies in (the
// last for a check sent after the end).
func (s *soak) minuteAt(at time.Duration) *soakMinuteLog {
	return s.minutes[min(max(int(at/soakMinute), 0), len(s.minutes)-1)]
}

// restart stops node m mod 8, SIGTERM in even minutes and SIGKILL in odd
// ones, and starts it again with the same name and ports. A SIGTERM'd
// node is taken out of the load first, as a load balancer drains it; a
// SIGKILL'd one only once dead, so the checks it had in flight fail (and
// count as lost, not as errors). It is back in the load once /readyz
// answers, as a load balancer's readiness check would put it back.
func (s *soak) restart(m int) soakRestart {
	t := s.t
	i := m % len(s.c.Procs)
	p := s.c.Procs[i]
	r := soakRestart{node: p.Name, signal: "SIGTERM", rejoin: -1}
	sig := syscall.SIGTERM
	if m%2 == 1 {
		r.signal, sig = "SIGKILL", syscall.SIGKILL
	}
	// node-0, the seed, was started without -join (nodetest.Start's): back
	// alone it would be ready at once, a cluster of one, until the others'
	// rejoin loop found it. A deployment lists seeds on every node, so it
	// comes back joining the others.
	if i == 0 && !slices.Contains(p.Args, "-join") {
		var seeds []string
		for _, q := range s.c.Procs[1:] {
			seeds = append(seeds, q.Gossip)
		}
		p.Args = append(p.Args, "-join", strings.Join(seeds, ","))
	}
	if sig == syscall.SIGTERM {
		s.setUp(i, false)
		// A load balancer's drain: the checks already on their way
		// (some queued in the client for a connection) are answered
		// before the signal, rather than refused by a closed listener.
		time.Sleep(soakDrain)
	} else {
		// Still in the load until dead, but a check in flight that fails
		// from now on is the kill's, even one that fails before the node
		// is marked down.
		s.changed[i].Store(time.Now().UnixNano())
	}
	stopped := time.Now()
	if err := p.Signal(sig); err != nil {
		t.Fatalf("%s %s: %v", r.signal, p.Name, err)
	}
	if sig == syscall.SIGKILL {
		s.setUp(i, false)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not exit within 30 s of %s", p.Name, r.signal)
	}
	r.exit = p.ExitCode()
	if out := strings.TrimSpace(p.Stderr.String()); out != "" {
		r.stderrN = strings.Count(out, "\n") + 1
		t.Logf("%s logged %d lines before %s: %s", p.Name, r.stderrN, r.signal, soakLogSummary(out))
	}
	s.c.Start(p)
	r.down = time.Since(stopped)
	s.setUp(i, true)
	ready := time.Now()
	for deadline := ready.Add(25 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if ms, err := p.Members(); err == nil && nodetest.CountState(ms, "alive") == len(s.c.Procs) {
			r.rejoin = time.Since(ready)
			break
		}
	}
	return r
}

// soakLogSummary counts a node's log lines by their msg, most first: a
// restart's log is mostly a few messages many times.
func soakLogSummary(log string) string {
	counts := map[string]int{}
	for _, l := range strings.Split(log, "\n") {
		msg := l
		if _, v, ok := strings.Cut(l, ` msg="`); ok {
			// The value ends at the first unescaped quote.
			for j := 0; j < len(v); j++ {
				if v[j] == '\\' {
					j++
				} else if v[j] == '"' {
					v = v[:j]
					break
				}
			}
			msg = v
			if u, err := strconv.Unquote(`"` + v + `"`); err == nil {
				msg = u
			}
		}
		counts[msg]++
	}
	msgs := slices.Collect(maps.Keys(counts))
	slices.SortFunc(msgs, func(a, b string) int {
		if c := counts[b] - counts[a]; c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, m := range msgs {
		parts = append(parts, fmt.Sprintf("%d× %q", counts[m], m))
	}
	return strings.Join(parts, ", ")
}

// setUp takes node i out of the load or puts it back.
func (s *soak) setUp(i int, up bool) {
	s.up[i].Store(up)
	s.changed[i].Store(time.Now().UnixNano())
}

// sample reads every node's resident memory and open descriptors from
// /proc and its goroutines from /metrics.
func (s *soak) sample() []soakNodeSample {
	out := make([]soakNodeSample, len(s.c.Procs))
	for i, p := range s.c.Procs {
		o := &out[i]
		rss, err := p.ResidentBytes()
		if err != nil {
			o.err = err
			continue
		}
		o.rssMB = float64(rss) / (1 << 20)
		if o.fds, o.err = p.OpenFiles(); o.err != nil {
			continue
		}
		o.goroutines, o.err = s.goroutines(p)
	}
	return out
}

// goroutines is go_goroutines of the node's /metrics.
func (s *soak) goroutines(p *nodetest.Proc) (int, error) {
	m, err := promtest.Scrape(s.c.HTTP, "http://"+p.HTTP+"/metrics")
	if err != nil {
		return 0, fmt.Errorf("metrics of %s: %w", p.Name, err)
	}
	v, ok := m.Value("go_goroutines")
	if !ok {
		return 0, fmt.Errorf("no go_goroutines in the metrics of %s", p.Name)
	}
	return int(v), nil
}

// sum turns the minute's latencies into its percentiles and lets them go:
// a minute at 6,000/s holds 360,000 of them.
func (m *soakMinuteLog) sum() {
	m.mu.Lock()
	defer m.mu.Unlock()
	var all []time.Duration
	for i := range m.node {
		nc := &m.node[i]
		slices.Sort(nc.lat)
		if len(nc.lat) > 0 {
			nc.p99 = nc.lat[len(nc.lat)*99/100]
		}
		all = append(all, nc.lat...)
		nc.lat = nil
	}
	slices.Sort(all)
	if len(all) > 0 {
		m.p50, m.p99 = all[len(all)/2], all[len(all)*99/100]
	}
}

// logSamples logs minute m's restart and the nodes at its end.
func (s *soak) logSamples(m int, ns []soakNodeSample, r soakRestart) {
	var b strings.Builder
	for _, x := range ns {
		if x.err != nil {
			fmt.Fprintf(&b, " [%v]", x.err)
			continue
		}
		fmt.Fprintf(&b, " %.1f/%d/%d", x.rssMB, x.goroutines, x.fds)
	}
	s.t.Logf("minute %d: %s; per node MB/goroutines/fds:%s", m+1, r, b.String())
}

// logChecks logs what the clients saw of minute m's checks, once summed.
func (s *soak) logChecks(m int) {
	ml := s.minutes[m]
	ml.mu.Lock()
	defer ml.mu.Unlock()
	first := ""
	if ml.errs > 0 {
		first = " (the first: " + ml.errMsg + ")"
	}
	var b strings.Builder
	for i, nc := range ml.node {
		fmt.Fprintf(&b, " %s %d/%v/%d/%d/%d", s.c.Procs[i].Name, nc.checks, nc.p99.Round(10*time.Microsecond), nc.fiveXX, nc.errs, nc.lost)
	}
	s.t.Logf("minute %d: %d checks sent, %d not (the generator over %v behind), %d 5xx, %d errors%s, %d lost to the restart, p50 %v, p99 %v, sent at most %v behind schedule; per node checks/p99/5xx/errors/lost:%s",
		m+1, ml.checks, ml.unsent, soakLate, ml.fiveXX, ml.errs, first, ml.lost, ml.p50.Round(10*time.Microsecond), ml.p99.Round(10*time.Microsecond), ml.behind.Round(time.Millisecond), b.String())
}

func (r soakRestart) String() string {
	rejoin := "not within 25 s"
	if r.rejoin >= 0 {
		rejoin = r.rejoin.Round(100 * time.Millisecond).String()
	}
	return fmt.Sprintf("%s %s: exit %d, log lines %d, ready %v after the signal, all alive %s later",
		r.signal, r.node, r.exit, r.stderrN, r.down.Round(100*time.Millisecond), rejoin)
}
