package loadgen

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"time"
)

// Traces are what "limitsim replay" reads: one request a line,
// "TIME_MS KEY" or, for a cluster, "TIME_MS KEY NODE", TIME_MS
// non-decreasing; lines starting with # are comments. limitload writes
// two: the schedule (--dry-run), to replay the same pattern on limitsim's
// simulated cluster, and the run as it happened (--trace-out), send
// instants and targets, to replay exactly what the real cluster saw.

// WriteSchedule prints cfg's schedule, with the keys of run runID, as a
// trace; with targets, each line carries the target index the spread
// picks (the same one a real run with the same --seed and --spread sends
// to). cfg must have passed Validate.
func WriteSchedule(w io.Writer, cfg *Config, runID string) error {
	keys := newKeyNamer(cfg, runID)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# limitload --dry-run: pattern %s, limit %d per %v, %d target(s), spread %s, seed %d\n",
		cfg.Pattern, cfg.Limit, cfg.Window, len(cfg.Targets), cfg.Spread, cfg.Seed)
	sched := newSchedule(cfg)
	var picker targetPicker
	if len(cfg.Targets) > 0 {
		picker = newTargetPicker(cfg.Spread, cfg.Seed, len(cfg.Targets), keys.total())
	}
	for {
		a, ok := sched.next()
		if !ok {
			break
		}
		if picker != nil {
			fmt.Fprintf(bw, "%d %s %d\n", a.at.Milliseconds(), keys.name(a.key), picker.pick(a.key, nil))
		} else {
			fmt.Fprintf(bw, "%d %s\n", a.at.Milliseconds(), keys.name(a.key))
		}
	}
	return bw.Flush()
}

// WriteTrace prints the answered requests of the run (200, 429 or another
// status; transport errors and unsent requests are left out) by send
// instant, in whole milliseconds after the start, with their target.
func (res *Result) WriteTrace(w io.Writer) error {
	recs := make([]record, 0, len(res.records))
	for _, r := range res.records {
		if r.status > 0 {
			recs = append(recs, r)
		}
	}
	slices.SortStableFunc(recs, func(a, b record) int { return cmp.Compare(a.sent, b.sent) })
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "# limitload run %s: %d answered requests by send instant (ms after %s), key, target index\n",
		res.runID, len(recs), res.start.UTC().Format(time.RFC3339Nano))
	for _, r := range recs {
		fmt.Fprintf(bw, "%d %s %d\n", r.sent.Milliseconds(), res.keys.name(r.key), r.target)
	}
	return bw.Flush()
}
