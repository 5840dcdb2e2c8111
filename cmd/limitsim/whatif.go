package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// What-if replay (limitsim replay --rules FILE): an access log runs through
// limiterd's real limiter with a rule set — its matching, its several limits
// per rule and its shadow mode — on one node or on the simulated cluster,
// and the report says, per rule, what would have been rejected and whom it
// would have hit. A user replays yesterday's traffic against the rules in
// force and against a change, and compares.

// whatifConfig is what the replay command's flags set for a what-if run.
type whatifConfig struct {
	rules     *limiter.RuleSet
	top       int  // keys listed per rule, by rejections
	decisions bool // print one line per request before the report
	// sim.nodes > 0 runs on that many simulated nodes; the limit fields of
	// sim are ignored (the rules set the limits).
	sim  simConfig
	seed uint32 // seeds the LCG that picks a node for lines without one
}

// decider decides one request of key at true time at (ms) on node.
type decider interface {
	check(at int64, key string, node int, d *limiter.Decision) error
}

// oneNode is a single limiterd: one counter, one limiter.
type oneNode struct{ lim *limiter.Limiter }

func (o oneNode) check(at int64, key string, _ int, d *limiter.Decision) error {
	return o.lim.Check(time.UnixMilli(at), limiter.Request{Key: key, Hits: 1}, d)
}

// newDecider builds a fresh limiter for the rules: one node, or the
// simulated cluster with the rules installed on every node.
func newDecider(cfg whatifConfig) (decider, error) {
	if cfg.sim.nodes == 0 {
		c, err := counter.New(counter.DefaultConfig())
		if err != nil {
			return nil, err
		}
		lim, err := limiter.New(c, cfg.rules)
		if err != nil {
			return nil, err
		}
		return oneNode{lim}, nil
	}
	sim, err := newSimCluster(cfg.sim)
	if err != nil {
		return nil, err
	}
	// The simulator builds each node with one rule of its own; what-if
	// replaces it with the rule set through the reload path limiterd uses.
	for i, n := range sim.nodes {
		if err := n.lim.SetRules(cfg.rules); err != nil {
			return nil, fmt.Errorf("node-%d: %w", i, err)
		}
	}
	return sim, nil
}

// whatifKey is one key's requests under its rule.
type whatifKey struct {
	requests int
	rejected int    // rejections, or would-be rejections under a shadow rule
	first    string // TIME of its first (would-be) rejection, as written
}

// ruleTally is what one rule decided. For a shadow rule every request is
// allowed and rejected stays 0: what it would have rejected is wouldReject.
type ruleTally struct {
	rule        *limiter.Rule // nil: requests no rule governs
	requests    int
	allowed     int
	rejected    int
	wouldReject int
	untracked   int   // allowed uncounted: the counter was at MaxKeys
	byLimit     []int // per limit of the rule: (would-be) rejections where it had no room
	keys        map[string]*whatifKey
}

// rejections is what the rule rejected or, in shadow mode, would have.
func (rt *ruleTally) rejections() int { return rt.rejected + rt.wouldReject }

// keysRejected is how many keys had at least one (would-be) rejection.
func (rt *ruleTally) keysRejected() int {
	n := 0
	for _, k := range rt.keys {
		if k.rejected > 0 {
			n++
		}
	}
	return n
}

// whatifReport is a what-if run's result.
type whatifReport struct {
	cfg        whatifConfig
	rules      []*ruleTally // in file order, then the unlimited row
	requests   int
	firstTime  string // TIME of the first and last request, as written
	lastTime   string
	durationMs int64 // from the first request to the last, on the simulated clock
}

// runWhatif replays the access log from r against cfg.rules. With
// cfg.decisions it writes "TIME KEY [NODE] RULE VERDICT" per request to w,
// VERDICT one of allow, deny, shadow-deny (a shadow rule would have denied
// it) and unlimited (no rule governs the key).
func runWhatif(cfg whatifConfig, r io.Reader, w io.Writer) (whatifReport, error) {
	rep := whatifReport{cfg: cfg}
	dec, err := newDecider(cfg)
	if err != nil {
		return rep, err
	}
	byName := make(map[string]*ruleTally, len(cfg.rules.Rules))
	for i := range cfg.rules.Rules {
		rule := &cfg.rules.Rules[i]
		rt := &ruleTally{rule: rule, byLimit: make([]int, len(rule.Limits)), keys: make(map[string]*whatifKey)}
		rep.rules = append(rep.rules, rt)
		byName[rule.Name] = rt
	}
	none := &ruleTally{keys: make(map[string]*whatifKey)}
	rep.rules = append(rep.rules, none)

	pick := newLCG(cfg.seed)
	lr := newAccessLogReader(r, cfg.sim.nodes)
	var (
		d       limiter.Decision
		line    []byte
		last    []byte
		firstAt int64
	)
	for {
		l, err := lr.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, err
		}
		node := l.node
		if cfg.sim.nodes > 0 && node < 0 {
			node = pick.Node(cfg.sim.nodes)
		}
		if err := dec.check(l.at, l.key, node, &d); err != nil {
			return rep, fmt.Errorf("trace line %d: %w", lr.line, err)
		}
		if rep.requests == 0 {
			rep.firstTime, firstAt = string(l.time), l.at
		}
		rep.requests++
		last = append(last[:0], l.time...) // no allocation per line
		rep.durationMs = l.at - firstAt

		rt := none
		if d.Rule != "" {
			rt = byName[d.Rule]
		}
		rt.requests++
		k := rt.keys[l.key]
		if k == nil {
			k = &whatifKey{}
			rt.keys[l.key] = k
		}
		k.requests++
		if d.Allowed {
			rt.allowed++
		}
		if d.Untracked {
			rt.untracked++
		}
		verdict := "allow"
		switch {
		case rt == none:
			verdict = "unlimited"
		case !d.WouldAllow && d.Shadow:
			verdict = "shadow-deny"
			rt.wouldReject++
		case !d.WouldAllow:
			verdict = "deny"
			rt.rejected++
		}
		if rt != none && !d.WouldAllow {
			if k.rejected == 0 {
				k.first = string(l.time)
			}
			k.rejected++
			for i := range d.N {
				if !d.Limits[i].Allowed {
					rt.byLimit[i]++
				}
			}
		}
		if cfg.decisions {
			line = append(line[:0], l.time...)
			line = append(line, ' ')
			line = append(line, l.key...)
			if cfg.sim.nodes > 0 {
				line = append(line, ' ')
				line = strconv.AppendInt(line, int64(node), 10)
			}
			line = append(line, ' ')
			if d.Rule == "" {
				line = append(line, '-')
			} else {
				line = append(line, d.Rule...)
			}
			line = append(line, ' ')
			line = append(line, verdict...)
			line = append(line, '\n')
			if _, err := w.Write(line); err != nil {
				return rep, err
			}
		}
	}
	rep.lastTime = string(last)
	return rep, nil
}

// checkWhatifFlags rejects flags that contradict --rules, or need it. ok
// reports whether the command should go on; otherwise code is its exit code.
func checkWhatifFlags(fs *flag.FlagSet, rules string, top int, stderr io.Writer) (code int, ok bool) {
	bad := ""
	fs.Visit(func(f *flag.Flag) {
		switch {
		case rules != "" && (f.Name == "limit" || f.Name == "window" || f.Name == "slices"):
			bad = fmt.Sprintf("--%s does not go with --rules: the rule file sets the limits", f.Name)
		case rules == "" && f.Name == "top":
			bad = "--top needs --rules"
		}
	})
	switch {
	case bad != "":
		return usageError(fs, stderr, "%s", bad), false
	case top < 0:
		return usageError(fs, stderr, "--top must not be negative, got %d", top), false
	}
	return 0, true
}

// whatifReplay loads the rule file and returns the replay that runs the
// log against it and writes the report.
func whatifReplay(rc replayConfig, rulesPath string, top int) (func(io.Reader, io.Writer) error, error) {
	rs, err := limiter.Load(rulesPath)
	if err != nil {
		return nil, err
	}
	cfg := whatifConfig{rules: rs, top: top, decisions: rc.decisions, sim: rc.sim, seed: rc.seed}
	return func(r io.Reader, w io.Writer) error {
		rep, err := runWhatif(cfg, r, w)
		if err != nil {
			return err
		}
		return writeWhatif(w, rep)
	}, nil
}
