package replay

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seed"
)

// Config is what a replay runs: one limit, on one node or on a simulated
// cluster.
type Config struct {
	Limit     int64
	Window    time.Duration
	Slices    int
	Decisions bool // print one line per request before the summary
	// Sim.Nodes > 0 replays on a simulated cluster (RunCluster); the
	// limit fields of Sim are taken from the fields above.
	Sim  clustersim.Config
	Seed uint32 // seeds the LCG that picks a node for lines without one
}

// DefaultConfig is the seed's limit (600 per 60 s in 12 slices) on one
// node; Sim holds limiterd's cluster defaults (clustersim.DefaultConfig)
// for a replay that sets Sim.Nodes, and Seed the seed's LCG seed.
func DefaultConfig() Config {
	sim := clustersim.DefaultConfig()
	c := Config{Limit: sim.Limit, Window: sim.Window, Slices: sim.Slices, Sim: sim, Seed: seed.LCGSeed}
	c.Sim.Nodes = 0
	return c
}

// Summary is what a replay found. Accepted includes untracked requests:
// they were let through, so they count towards MaxInWindow.
type Summary struct {
	Requests, Accepted, Rejected, Untracked int
	Keys                                    int
	MaxInWindow                             int    // most accepted for one key in any [t, t+window)
	MaxKey                                  string // that key; the smallest such key on a tie
}

// Replayer replays a trace through one counter with one limit. It is
// single-use: a second run would start from the first one's counts.
type Replayer struct {
	cfg    Config
	c      *counter.Counter
	limits []counter.Limit
}

// New builds a fresh counter (counter.DefaultConfig()) with the limit cfg
// describes. An invalid limit wraps counter.ErrInvalidLimit.
func New(cfg Config) (*Replayer, error) {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		return nil, err
	}
	lim, err := c.Limit("replay", cfg.Limit, cfg.Window, cfg.Slices)
	if err != nil {
		return nil, err
	}
	return &Replayer{cfg: cfg, c: c, limits: []counter.Limit{lim}}, nil
}

// Run replays the trace from r on a simulated clock: each request is one
// Allow of one hit at time.UnixMilli(TIME_MS). With cfg.Decisions it writes
// "TIME_MS KEY allow|deny" per request to w, in input order.
func (rp *Replayer) Run(r io.Reader, w io.Writer) (Summary, error) {
	var res [counter.MaxLimitsPerCall]counter.Result
	accepted := make(map[string][]int64) // every key seen, with its accepted instants
	tr := NewReader(r, 0)
	var sum Summary
	var line []byte
	for {
		req, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return sum, err
		}
		d, err := rp.c.Allow(time.UnixMilli(req.At), req.Key, 1, rp.limits, res[:])
		if err != nil {
			return sum, fmt.Errorf("trace line %d: %w", tr.line, err)
		}
		sum.Requests++
		acc := accepted[req.Key]
		verdict := "deny"
		if d.Allowed {
			verdict = "allow"
			acc = append(acc, req.At)
			sum.Accepted++
			if d.Untracked {
				sum.Untracked++
			}
		} else {
			sum.Rejected++
		}
		accepted[req.Key] = acc
		if rp.cfg.Decisions {
			line = strconv.AppendInt(line[:0], req.At, 10)
			line = append(line, ' ')
			line = append(line, req.Key...)
			line = append(line, ' ')
			line = append(line, verdict...)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return sum, err
			}
		}
	}
	sum.Keys = len(accepted)
	windowMs := rp.cfg.Window.Milliseconds()
	for _, k := range slices.Sorted(maps.Keys(accepted)) {
		if n := clustersim.MaxInWindow(accepted[k], windowMs); n > sum.MaxInWindow {
			sum.MaxInWindow, sum.MaxKey = n, k
		}
	}
	return sum, nil
}

// WriteSummary writes the summary: one "# NAME VALUE" line each, in a
// fixed order, so that `grep -v '^#'` keeps only the decision lines. The
// names and their order are part of limitsim replay's interface (see
// doc.go).
func WriteSummary(w io.Writer, cfg Config, s Summary) error {
	bw := bufio.NewWriter(w)
	key := s.MaxKey
	if key == "" {
		key = "-"
	}
	fmt.Fprintf(bw, "# requests %d\n", s.Requests)
	fmt.Fprintf(bw, "# accepted %d\n", s.Accepted)
	fmt.Fprintf(bw, "# rejected %d\n", s.Rejected)
	fmt.Fprintf(bw, "# untracked %d\n", s.Untracked)
	fmt.Fprintf(bw, "# keys %d\n", s.Keys)
	fmt.Fprintf(bw, "# limit %d\n", cfg.Limit)
	fmt.Fprintf(bw, "# window_ms %d\n", cfg.Window.Milliseconds())
	fmt.Fprintf(bw, "# slices %d\n", cfg.Slices)
	fmt.Fprintf(bw, "# max_in_window %d\n", s.MaxInWindow)
	fmt.Fprintf(bw, "# max_in_window_key %s\n", key)
	fmt.Fprintf(bw, "# max_in_window_ratio %.3f\n", float64(s.MaxInWindow)/float64(cfg.Limit))
	return bw.Flush()
}
