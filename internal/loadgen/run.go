package loadgen

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Status values of a request that are not HTTP codes.
const (
	StatusError   = 0  // transport error: no answer
	StatusNotSent = -1 // dispatched but not sent: the run ended first, or it was too late (Config.MaxLate)
)

// phaseBins is the number of bins of --phase.
const phaseBins = 10

// A record is one request of the response log the accuracy analysis reads.
type record struct {
	sent     time.Duration // when it was written, after the start of the run
	key      int32
	status   int16 // HTTP status, StatusError or StatusNotSent
	target   uint16
	failOpen bool
}

// recordLog hands out records in chunks, so that a long run neither
// copies a huge slice as it grows nor holds more than MaxLog records.
// Only the scheduler goroutine calls next; a worker writes the record it
// was given; the analysis reads them after every worker has finished.
type recordLog struct {
	chunks [][]record
	n, max int
}

const logChunk = 1 << 14

func (l *recordLog) next() *record {
	if l.n >= l.max {
		return nil
	}
	if l.n%logChunk == 0 {
		l.chunks = append(l.chunks, make([]record, min(logChunk, l.max-l.n)))
	}
	r := &l.chunks[len(l.chunks)-1][l.n%logChunk]
	l.n++
	return r
}

// records returns the log's records in dispatch order.
func (l *recordLog) records() []record {
	out := make([]record, 0, l.n)
	for _, c := range l.chunks {
		out = append(out, c...)
	}
	return out[:l.n]
}

// job is one request handed to a worker.
type job struct {
	rec   *record // nil past MaxLog
	sched time.Duration
	key   int32
}

// stats are the counters and histograms the workers share.
type stats struct {
	mu        sync.Mutex
	latency   histogram     // from the write to the end of the answer
	response  histogram     // from the scheduled instant to the end of the answer (open-loop response time)
	lateness  histogram     // from the scheduled instant to the write
	interval  histogram     // latency since the last progress line
	late      time.Duration // most behind schedule since the last progress line
	status    map[int]int
	phase     time.Duration // Config.Phase
	wall      time.Time     // the start, for the phase of a send instant
	phases    [phaseBins]histogram
	failOpen  int
	lastSent  time.Duration
	firstSent time.Duration
	sent      int

	answered atomic.Int64 // for the progress line
	errors   atomic.Int64
}

// answeredCount is the number of requests sent and answered (or failed).
func (s *stats) answeredCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

func (s *stats) add(sched, sent, done time.Duration, status int, failOpen bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.latency.record(done - sent)
	s.interval.record(done - sent)
	s.response.record(done - sched)
	s.lateness.record(sent - sched)
	s.late = max(s.late, sent-sched)
	s.status[status]++
	if s.phase > 0 {
		t := s.wall.Add(sent)
		s.phases[int(t.Sub(t.Truncate(s.phase))*phaseBins/s.phase)].record(done - sent)
	}
	if failOpen {
		s.failOpen++
	}
	if s.sent == 0 || sent < s.firstSent {
		s.firstSent = sent
	}
	s.lastSent = max(s.lastSent, sent)
	s.sent++
}

// Result is everything a run measured; Report turns it into the report.
type Result struct {
	cfg         *Config
	runID       string
	start       time.Time
	elapsed     time.Duration // from the start to the last answer
	interrupted bool
	cut         bool          // the deadline stopped the generator before the schedule's end
	scheduled   int           // arrivals taken from the schedule (dispatched, or counted when cut)
	schedSpan   time.Duration // first to last of them
	firstSched  time.Duration
	records     []record
	truncated   bool // the log hit MaxLog: later requests are not analysed
	keys        *keyNamer
	stats       *stats
	cpu         time.Duration // limitload's own user+system CPU during the run
}

// Run sends cfg's schedule to cfg.Targets and returns what it measured.
// cfg must have passed Validate; Run keeps it, and it must not change
// while Run or the Result uses it.
// ctx ends the run early (Ctrl-C): nothing more is sent, requests already
// written are answered (within Timeout), and the result says interrupted.
// The run also stops sending at its deadline, Duration + Timeout after the
// start, so that a generator far behind an impossible schedule does not run
// on for minutes: the rest of the schedule is counted as unsent and the
// result says cut. progress receives a line every cfg.Progress.
func Run(ctx context.Context, cfg *Config, runID string, progress io.Writer) *Result {
	keys := newKeyNamer(cfg, runID)
	st := &stats{status: map[int]int{}, phase: cfg.Phase}
	log := &recordLog{max: cfg.MaxLog}
	sched := newSchedule(cfg)
	picker := newTargetPicker(cfg.Spread, cfg.Seed, len(cfg.Targets), keys.total())
	cpu0 := cpuTime()

	start := time.Now().Add(100 * time.Millisecond) // time to dial before the first instant
	if cfg.Align > 0 {
		start = start.Truncate(cfg.Align).Add(cfg.Align)
	}
	// Every request is timed against start's monotonic reading.
	start = time.Now().Add(time.Until(start))
	st.wall = start
	runCtx, cancel := context.WithDeadline(ctx, start.Add(cfg.Duration+cfg.Timeout))
	defer cancel()

	// Workers: cfg.Conns per target, each with its own connection.
	path := checkPathPrefix(cfg.Rule)
	var client *http.Client
	if cfg.Client == ClientHTTP {
		client = newHTTPClient(cfg.Conns, cfg.Timeout, cfg.Dial)
	}
	var busy []atomic.Bool // OnePerKey: the keys with a request in flight
	if cfg.OnePerKey {
		busy = make([]atomic.Bool, keys.total())
	}
	queues := make([]chan job, len(cfg.Targets))
	var wg sync.WaitGroup
	for t, addr := range cfg.Targets {
		queues[t] = make(chan job, cfg.Conns)
		for range cfg.Conns {
			var s sender
			if client != nil {
				s = &httpSender{client: client, base: "http://" + addr + path, keys: keys}
			} else {
				s = newRawSender(addr, path, keys, cfg.Timeout, cfg.Dial)
			}
			w := &worker{q: queues[t], s: s, target: t, start: start, st: st, maxLate: cfg.MaxLate, busy: busy, observe: cfg.Observe, keys: keys}
			wg.Go(func() { w.work(runCtx) })
		}
	}

	stopProgress := make(chan struct{})
	var progressDone sync.WaitGroup
	if cfg.Progress > 0 && progress != nil {
		progressDone.Go(func() { reportProgress(progress, cfg.Progress, start, st, stopProgress) })
	}

	res := &Result{cfg: cfg, runID: runID, start: start, keys: keys, stats: st}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
dispatch:
	for {
		a, ok := sched.next()
		if !ok {
			break
		}
		if d := time.Until(start.Add(a.at)); d > 0 {
			timer.Reset(d)
			select {
			case <-runCtx.Done():
				timer.Stop()
				break dispatch
			case <-timer.C:
			}
		}
		t := picker.pick(a.key, cfg.Available)
		if busy != nil {
			if busy[a.key].Load() {
				res.count(a)
				observe(cfg.Observe, keys, Outcome{Target: t, Sched: a.at, Status: StatusNotSent}, a.key)
				continue
			}
			busy[a.key].Store(true)
		}
		rec := log.next()
		if rec != nil {
			rec.key, rec.target, rec.status = a.key, uint16(t), StatusNotSent
		}
		res.count(a)
		select {
		case queues[t] <- job{rec: rec, sched: a.at, key: a.key}:
		case <-runCtx.Done():
			break dispatch
		}
	}
	if ctx.Err() == nil && runCtx.Err() != nil {
		// The deadline: count the arrivals never dispatched, so that the
		// report shows how much of the schedule was not sent.
		for a, ok := sched.next(); ok; a, ok = sched.next() {
			res.count(a)
		}
	}
	for _, q := range queues {
		close(q)
	}
	wg.Wait()
	res.elapsed = time.Since(start)
	res.interrupted = ctx.Err() != nil
	res.cut = !res.interrupted && st.answeredCount() < res.scheduled
	close(stopProgress)
	progressDone.Wait()

	if client != nil {
		client.CloseIdleConnections()
	}
	res.records = log.records()
	res.truncated = log.n >= log.max && res.scheduled > log.n
	res.cpu = cpuTime() - cpu0
	return res
}

// Start is the run's instant 0: the instants of the schedule, of a trace
// and of an Outcome are after it.
func (r *Result) Start() time.Time { return r.start }

// Interrupted reports whether ctx ended the run early.
func (r *Result) Interrupted() bool { return r.interrupted }

// Report is the run's report, judged against the Config given to Run.
func (r *Result) Report() Report { return buildReport(r.cfg, r) }

// count adds an arrival taken from the schedule.
func (r *Result) count(a arrival) {
	if r.scheduled == 0 {
		r.firstSched = a.at
	}
	r.scheduled++
	r.schedSpan = a.at - r.firstSched
}

// worker sends the jobs of one queue on one connection.
type worker struct {
	q       <-chan job
	s       sender
	target  int
	start   time.Time
	st      *stats
	maxLate time.Duration
	busy    []atomic.Bool // OnePerKey's flags, cleared when a job is done
	observe func(Outcome)
	keys    *keyNamer // to number an Outcome's key in its stream
}

// work sends the jobs until the queue is closed. Once ctx ends (Ctrl-C,
// the deadline) the queued jobs are dropped unsent, and so is a job that
// comes more than maxLate after its instant.
func (w *worker) work(ctx context.Context) {
	defer w.s.close()
	for j := range w.q {
		if ctx.Err() != nil || w.maxLate > 0 && time.Since(w.start)-j.sched > w.maxLate {
			w.done(j.key)
			w.report(Outcome{Sched: j.sched, Status: StatusNotSent}, j.key) // rec stays StatusNotSent
			continue
		}
		sent := time.Since(w.start)
		r, err := w.s.do(j.key)
		done := time.Since(w.start)
		status := r.status
		if err != nil {
			status = StatusError
			w.st.errors.Add(1)
		}
		failOpen := err == nil && r.failOpen
		w.st.answered.Add(1)
		w.st.add(j.sched, sent, done, status, failOpen)
		if j.rec != nil {
			j.rec.sent, j.rec.status, j.rec.failOpen = sent, int16(status), failOpen
		}
		w.done(j.key)
		w.report(Outcome{Sched: j.sched, Sent: sent, Done: done, Status: status, Err: err, FailOpen: failOpen}, j.key)
	}
}

// done frees key for its next request (OnePerKey).
func (w *worker) done(key int32) {
	if w.busy != nil {
		w.busy[key].Store(false)
	}
}

// report gives o, of key, to Config.Observe.
func (w *worker) report(o Outcome, key int32) {
	o.Target = w.target
	observe(w.observe, w.keys, o, key)
}

// observe gives o, of the run's key, to fn (Config.Observe) if set,
// numbered in its stream.
func observe(fn func(Outcome), keys *keyNamer, o Outcome, key int32) {
	if fn == nil {
		return
	}
	g, k := keys.group(key)
	o.Stream, o.Key = g, int(k)
	fn(o)
}

// reportProgress prints one line every interval until stop is closed:
// elapsed time, answers per second over the interval, errors, the p99 of
// the interval's latencies and how far behind schedule the generator is.
func reportProgress(w io.Writer, every time.Duration, start time.Time, st *stats, stop <-chan struct{}) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	var lastAnswered int64
	last := time.Now()
	for {
		select {
		case <-stop:
			return
		case now := <-tick.C:
			st.mu.Lock()
			p99 := st.interval.quantile(0.99)
			n := st.interval.n
			st.interval = histogram{}
			behind := st.late
			st.late = 0
			ok, denied := st.status[200], st.status[429]
			st.mu.Unlock()
			answered := st.answered.Load()
			rate := float64(answered-lastAnswered) / now.Sub(last).Seconds()
			lastAnswered, last = answered, now
			p99s := "-"
			if n > 0 {
				p99s = fmtMs(p99)
			}
			fmt.Fprintf(w, "limitload: %6.1fs  %8.0f/s  answered %d (200: %d, 429: %d)  errors %d  p99(last %v) %s ms  max behind schedule %s ms\n",
				time.Since(start).Seconds(), rate, answered, ok, denied, st.errors.Load(), every, p99s, fmtMs(behind))
		}
	}
}

// cpuTime is this process's user+system CPU time so far (0 if unknown).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
