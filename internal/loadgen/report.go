package loadgen

import (
	seedpkg "github.com/limiterd/limiterd/internal/seed"

	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"
)

// reportVersion changes when a field of Report changes meaning or goes
// away; new fields may appear without a change.
const reportVersion = 1

// behindLimit is how late the generator may write the 99th percentile of
// requests before the report says it fell behind schedule.
const behindLimit = 10 * time.Millisecond

// Report is the final report, limitload's JSON with --json (its doc
// documents every field); the names are stable within a Version.
type Report struct {
	Version   int      `json:"version"`
	RunID     string   `json:"run_id"`
	Targets   []string `json:"targets"`
	Spread    string   `json:"spread"`
	Pattern   string   `json:"pattern"`
	Limit     int      `json:"limit"`
	WindowMs  int64    `json:"window_ms"`
	SeedScale float64  `json:"seed_scale"`
	Factor    float64  `json:"factor"`
	Rate      float64  `json:"rate"`
	Keys      int      `json:"keys"`
	ZipfS     float64  `json:"zipf_s"`
	Duration  float64  `json:"duration_ms"`
	Client    string   `json:"client"`
	Conns     int      `json:"conns"`
	Seed      uint64   `json:"seed"`

	Interrupted  bool    `json:"interrupted"`
	Cut          bool    `json:"cut_at_deadline"`
	StartUnixMs  int64   `json:"start_unix_ms"`
	ElapsedMs    float64 `json:"elapsed_ms"`
	Scheduled    int     `json:"scheduled"`
	Answered     int     `json:"answered"`
	Unsent       int     `json:"unsent"`
	TargetRate   float64 `json:"target_rate"`
	AchievedRate float64 `json:"achieved_rate"`

	Latency        Percentiles    `json:"latency_ms"`
	Response       Percentiles    `json:"response_ms"`
	Behind         Percentiles    `json:"behind_schedule_ms"`
	ByPhase        []PhaseBin     `json:"latency_by_phase"`
	BehindSchedule bool           `json:"behind_schedule"`
	Status         map[string]int `json:"status"`
	FailOpen       int            `json:"fail_open"`
	GeneratorCPU   float64        `json:"generator_cpu_s"`

	Analysed     int      `json:"analysed"`
	LogTruncated bool     `json:"log_truncated"`
	Accuracy     Accuracy `json:"accuracy"`
}

// PhaseBin is the latency of the requests sent in one tenth of --phase.
type PhaseBin struct {
	FromMs   float64 `json:"from_ms"`
	ToMs     float64 `json:"to_ms"`
	Requests uint64  `json:"requests"`
	P50      float64 `json:"p50"`
	P99      float64 `json:"p99"`
	Max      float64 `json:"max"`
}

// Percentiles of a histogram, in milliseconds.
type Percentiles struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

func percentilesOf(h *histogram) Percentiles {
	return Percentiles{
		P50: ms(h.quantile(0.50)), P90: ms(h.quantile(0.90)), P99: ms(h.quantile(0.99)),
		P999: ms(h.quantile(0.999)), Max: ms(h.max), Mean: ms(h.mean()),
	}
}

// rateOver is n events over span: (n-1)/span, so that n requests one
// period apart give exactly one per period; 0 when it is undefined.
func rateOver(n int, span time.Duration) float64 {
	if n < 2 || span <= 0 {
		return 0
	}
	return float64(n-1) / span.Seconds()
}

// buildReport turns a run into its report.
func buildReport(cfg *Config, res *Result) Report {
	st := res.stats
	r := Report{
		Version: reportVersion, RunID: res.runID, Targets: cfg.Targets, Spread: cfg.Spread, Pattern: cfg.Pattern,
		Limit: cfg.Limit, WindowMs: cfg.Window.Milliseconds(), SeedScale: float64(cfg.Window) / float64(seedWindow),
		Factor: cfg.Factor, Rate: cfg.Rate, Keys: 1, Duration: ms(cfg.Duration),
		Client: cfg.Client, Conns: cfg.Conns, Seed: cfg.Seed,

		Interrupted: res.interrupted, Cut: res.cut, Unsent: res.scheduled - st.sent, StartUnixMs: res.start.UnixMilli(), ElapsedMs: ms(res.elapsed),
		Scheduled: res.scheduled, Answered: st.sent,
		TargetRate:   rateOver(res.scheduled, res.schedSpan),
		AchievedRate: rateOver(st.sent, st.lastSent-min(res.firstSched, st.firstSent)),

		Latency: percentilesOf(&st.latency), Response: percentilesOf(&st.response), Behind: percentilesOf(&st.lateness),
		BehindSchedule: st.lateness.quantile(0.99) > behindLimit,
		Status:         map[string]int{}, FailOpen: st.failOpen, GeneratorCPU: res.cpu.Seconds(),
		LogTruncated: res.truncated,
	}
	switch cfg.Pattern {
	case PatternKeys:
		r.Keys, r.ZipfS = cfg.Keys, cfg.ZipfS
	case PatternStreams:
		r.Keys, r.Rate = cfg.streamsKeys(), cfg.streamsRate()
	}
	r.ByPhase = []PhaseBin{}
	for i := range st.phases {
		if cfg.Phase == 0 {
			break
		}
		h := &st.phases[i]
		r.ByPhase = append(r.ByPhase, PhaseBin{
			FromMs: ms(cfg.Phase * time.Duration(i) / phaseBins), ToMs: ms(cfg.Phase * time.Duration(i+1) / phaseBins),
			Requests: h.n, P50: ms(h.quantile(0.5)), P99: ms(h.quantile(0.99)), Max: ms(h.max),
		})
	}
	for code, n := range st.status {
		r.Status[statusName(code)] = n
	}
	for _, rec := range res.records {
		if rec.status != StatusNotSent {
			r.Analysed++
		}
	}
	r.Accuracy = analyse(res.records, cfg.Window, cfg.Limit, cfg.Worst, res.keys.name)
	return r
}

func statusName(code int) string {
	if code == StatusError {
		return "error"
	}
	return strconv.Itoa(code)
}

// WriteJSON writes the report as one indented JSON object.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes the report for people.
func (r *Report) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	window := time.Duration(r.WindowMs) * time.Millisecond
	fmt.Fprintf(bw, "limitload %s: pattern %s, limit %d per %v, %d target(s), spread %s, client %s x %d conns/target\n",
		r.RunID, describePattern(r), r.Limit, window, len(r.Targets), r.Spread, r.Client, r.Conns)
	if r.Pattern != PatternKeys && r.Pattern != PatternRandom && r.SeedScale != 1 {
		fmt.Fprintf(bw, "  window %v: the seed's 60 s patterns are scaled by %.4g (its 5 s slice is %v here)\n",
			window, r.SeedScale, seedpkg.SliceOf(window))
	}
	if r.Interrupted {
		fmt.Fprintln(bw, "  INTERRUPTED: a partial report of what was answered")
	}
	if r.Cut {
		fmt.Fprintf(bw, "  CUT AT THE DEADLINE (duration + timeout): the generator was behind schedule and left %d requests unsent\n", r.Unsent)
	}
	fmt.Fprintf(bw, "requests: %d scheduled, %d answered in %.1f s; rate: target %.1f/s, achieved %.1f/s; generator CPU %.2f s\n",
		r.Scheduled, r.Answered, r.ElapsedMs/1000, r.TargetRate, r.AchievedRate, r.GeneratorCPU)
	fmt.Fprintf(bw, "status: %s; fail-open %d\n", statusLine(r.Status), r.FailOpen)
	writePercentiles(bw, "latency ms (write to answer)", r.Latency)
	writePercentiles(bw, "response ms (scheduled instant to answer)", r.Response)
	writePercentiles(bw, "behind schedule ms", r.Behind)
	if len(r.ByPhase) > 0 {
		fmt.Fprintf(bw, "latency ms by phase of the send instant in wall-clock multiples of %v:\n", time.Duration(r.ByPhase[len(r.ByPhase)-1].ToMs*float64(time.Millisecond)))
		for _, b := range r.ByPhase {
			fmt.Fprintf(bw, "  [%7.2f, %7.2f) ms  %9d requests  p50 %.3f  p99 %.3f  max %.3f\n", b.FromMs, b.ToMs, b.Requests, b.P50, b.P99, b.Max)
		}
	}
	if r.BehindSchedule {
		fmt.Fprintf(bw, "  WARNING: the generator fell behind schedule (p99 %.3f ms > %v): more connections (--conns) or fewer requests\n",
			r.Behind.P99, behindLimit)
	}

	a := &r.Accuracy
	fmt.Fprintf(bw, "accuracy (send instants of %d answered requests; limit %d per %v):\n", r.Analysed, r.Limit, window)
	if r.LogTruncated {
		fmt.Fprintln(bw, "  the log was full (--max-log): later requests were sent but not analysed")
	}
	if r.Pattern == PatternKeys {
		fmt.Fprintf(bw, "  %d keys; most accepted in any %v: %d (%.3f x limit, key %s); keys over the limit %d, over 1.1x %d\n",
			a.Keys, window, a.MaxInWindow, a.MaxRatio, a.MaxKey, a.KeysOverLimit, a.KeysOver1_1)
		fmt.Fprintf(bw, "  false rejections %d in %d keys; the %d worst keys:\n", a.FalseRejections, a.KeysWithFalseRejections, len(a.Worst))
	}
	fmt.Fprintf(bw, "  %-32s %9s %9s %9s %6s %11s %7s %6s %10s\n", "key", "requests", "accepted", "rejected", "other",
		"max in "+window.String(), "ratio", "≤1.1x", "false rej")
	for _, k := range a.Worst {
		within := "yes"
		if k.Ratio > nfr1 {
			within = "NO"
		}
		fmt.Fprintf(bw, "  %-32s %9d %9d %9d %6d %11d %7.3f %6s %10d\n", k.Key, k.Requests, k.Accepted, k.Rejected, k.Other,
			k.MaxInWindow, k.Ratio, within, k.FalseRejections)
	}
	if r.Pattern == PatternKeys && len(a.MostFalseRejections) > 0 {
		fmt.Fprintln(bw, "  most false rejections:")
		for _, k := range a.MostFalseRejections {
			fmt.Fprintf(bw, "  %-32s %9d %9d %9d %6d %11d %7.3f %6s %10d\n", k.Key, k.Requests, k.Accepted, k.Rejected, k.Other,
				k.MaxInWindow, k.Ratio, "", k.FalseRejections)
		}
	}
	return bw.Flush()
}

func describePattern(r *Report) string {
	switch r.Pattern {
	case PatternSteady:
		return fmt.Sprintf("steady %gx", r.Factor)
	case PatternRandom:
		return fmt.Sprintf("random (Poisson, %g/s)", r.Rate)
	case PatternStreams:
		return fmt.Sprintf("streams (%d keys, %g/s in total, %v)", r.Keys, r.Rate, time.Duration(r.Duration*float64(time.Millisecond)))
	case PatternKeys:
		skew := "uniform"
		if r.ZipfS != 0 {
			skew = fmt.Sprintf("Zipf s=%g", r.ZipfS)
		}
		return fmt.Sprintf("keys (%d keys, %s, Poisson %g/s in total, %v)", r.Keys, skew, r.Rate,
			time.Duration(r.Duration*float64(time.Millisecond)))
	default:
		return r.Pattern
	}
}

func statusLine(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	s := ""
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			s += ", "
		}
		s += fmt.Sprintf("%s %d", k, m[k])
	}
	return s
}

func writePercentiles(w io.Writer, what string, p Percentiles) {
	fmt.Fprintf(w, "%s: p50 %.3f  p90 %.3f  p99 %.3f  p99.9 %.3f  max %.3f  (mean %.3f)\n",
		what, p.P50, p.P90, p.P99, p.P999, p.Max, p.Mean)
}

// fmtMs formats d in milliseconds with three decimals.
func fmtMs(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 3, 64) }
