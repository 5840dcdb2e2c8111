package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// replayConfig is what the replay command's flags set.
type replayConfig struct {
	limit     int64
	window    time.Duration
	slices    int
	decisions bool // print one line per request before the summary
	// sim.nodes > 0 replays on a simulated cluster (replaycluster.go); the
	// limit fields of sim are taken from the fields above.
	sim  simConfig
	seed uint32 // seeds the LCG that picks a node for lines without one
}

// replaySummary is what a replay found. Accepted includes untracked
// requests: they were let through, so they count towards max-in-window.
type replaySummary struct {
	requests, accepted, rejected, untracked int
	keys                                    int
	maxInWindow                             int    // most accepted for one key in any [t, t+window)
	maxKey                                  string // that key; the smallest such key on a tie
}

// replayer replays a trace through one counter with one limit. It is
// single-use: a second run would start from the first one's counts.
type replayer struct {
	cfg    replayConfig
	c      *counter.Counter
	limits []counter.Limit
}

// newReplayer builds a fresh counter (counter.DefaultConfig()) with the
// limit cfg describes. An invalid limit wraps counter.ErrInvalidLimit.
func newReplayer(cfg replayConfig) (*replayer, error) {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		return nil, err
	}
	lim, err := c.Limit("replay", cfg.limit, cfg.window, cfg.slices)
	if err != nil {
		return nil, err
	}
	return &replayer{cfg: cfg, c: c, limits: []counter.Limit{lim}}, nil
}

// run replays the trace from r on a simulated clock: each request is one
// Allow of one hit at time.UnixMilli(TIME_MS). With cfg.decisions it writes
// "TIME_MS KEY allow|deny" per request to w, in input order.
func (rp *replayer) run(r io.Reader, w io.Writer) (replaySummary, error) {
	var res [counter.MaxLimitsPerCall]counter.Result
	accepted := make(map[string][]int64) // every key seen, with its accepted instants
	tr := newTraceReader(r)
	var sum replaySummary
	var line []byte
	for {
		req, err := tr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, err
		}
		d, err := rp.c.Allow(time.UnixMilli(req.at), req.key, 1, rp.limits, res[:])
		if err != nil {
			return sum, fmt.Errorf("trace line %d: %w", tr.line, err)
		}
		sum.requests++
		acc := accepted[req.key]
		verdict := "deny"
		if d.Allowed {
			verdict = "allow"
			acc = append(acc, req.at)
			sum.accepted++
			if d.Untracked {
				sum.untracked++
			}
		} else {
			sum.rejected++
		}
		accepted[req.key] = acc
		if rp.cfg.decisions {
			line = strconv.AppendInt(line[:0], req.at, 10)
			line = append(line, ' ')
			line = append(line, req.key...)
			line = append(line, ' ')
			line = append(line, verdict...)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return sum, err
			}
		}
	}
	sum.keys = len(accepted)
	windowMs := rp.cfg.window.Milliseconds()
	for _, k := range slices.Sorted(maps.Keys(accepted)) {
		if n := maxInWindow(accepted[k], windowMs); n > sum.maxInWindow {
			sum.maxInWindow, sum.maxKey = n, k
		}
	}
	return sum, nil
}

// writeReplaySummary writes the summary: one "# NAME VALUE" line each, in a
// fixed order, so that `grep -v '^#'` keeps only the decision lines. The
// names and their order are part of the command's interface (see doc.go).
func writeReplaySummary(w io.Writer, cfg replayConfig, s replaySummary) error {
	bw := bufio.NewWriter(w)
	key := s.maxKey
	if key == "" {
		key = "-"
	}
	fmt.Fprintf(bw, "# requests %d\n", s.requests)
	fmt.Fprintf(bw, "# accepted %d\n", s.accepted)
	fmt.Fprintf(bw, "# rejected %d\n", s.rejected)
	fmt.Fprintf(bw, "# untracked %d\n", s.untracked)
	fmt.Fprintf(bw, "# keys %d\n", s.keys)
	fmt.Fprintf(bw, "# limit %d\n", cfg.limit)
	fmt.Fprintf(bw, "# window_ms %d\n", cfg.window.Milliseconds())
	fmt.Fprintf(bw, "# slices %d\n", cfg.slices)
	fmt.Fprintf(bw, "# max_in_window %d\n", s.maxInWindow)
	fmt.Fprintf(bw, "# max_in_window_key %s\n", key)
	fmt.Fprintf(bw, "# max_in_window_ratio %.3f\n", ratio(s.maxInWindow, cfg.limit))
	return bw.Flush()
}
