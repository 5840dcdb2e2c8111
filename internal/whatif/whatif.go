package whatif

import (
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/replay"
	"github.com/limiterd/limiterd/internal/seed"
	"github.com/limiterd/limiterd/limiter"
)

// Config is a what-if run.
type Config struct {
	Rules     *limiter.RuleSet
	Top       int  // keys listed per rule, by rejections
	Decisions bool // print one line per request before the report
	// Sim.Nodes > 0 runs on that many simulated nodes; the limit fields
	// of Sim are ignored (the rules set the limits).
	Sim  clustersim.Config
	Seed uint32 // seeds the LCG that picks a node for lines without one
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

// simulated is the simulated cluster.
type simulated struct{ *clustersim.Cluster }

func (s simulated) check(at int64, key string, node int, d *limiter.Decision) error {
	return s.Check(at, key, node, 1, d)
}

// newDecider builds a fresh limiter for the rules: one node, or the
// simulated cluster with the rules installed on every node.
func newDecider(cfg Config) (decider, error) {
	if cfg.Sim.Nodes == 0 {
		c, err := counter.New(counter.DefaultConfig())
		if err != nil {
			return nil, err
		}
		lim, err := limiter.New(c, cfg.Rules)
		if err != nil {
			return nil, err
		}
		return oneNode{lim}, nil
	}
	sim, err := clustersim.New(cfg.Sim)
	if err != nil {
		return nil, err
	}
	// The simulator builds each node with one rule of its own; what-if
	// replaces it with the rule set through the reload path limiterd uses.
	for i := range sim.Len() {
		if err := sim.Node(i).Limiter().SetRules(cfg.Rules); err != nil {
			return nil, fmt.Errorf("node-%d: %w", i, err)
		}
	}
	return simulated{sim}, nil
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

// Report is a what-if run's result.
type Report struct {
	cfg        Config
	rules      []*ruleTally // in file order, then the unlimited row
	requests   int
	firstTime  string // TIME of the first and last request, as written
	lastTime   string
	durationMs int64 // from the first request to the last, on the simulated clock
}

// Run replays the access log from r against cfg.Rules. With
// cfg.Decisions it writes "TIME KEY [NODE] RULE VERDICT" per request to w,
// VERDICT one of allow, deny, shadow-deny (a shadow rule would have denied
// it) and unlimited (no rule governs the key).
func Run(cfg Config, r io.Reader, w io.Writer) (Report, error) {
	rep := Report{cfg: cfg}
	dec, err := newDecider(cfg)
	if err != nil {
		return rep, err
	}
	byName := make(map[string]*ruleTally, len(cfg.Rules.Rules))
	for i := range cfg.Rules.Rules {
		rule := &cfg.Rules.Rules[i]
		rt := &ruleTally{rule: rule, byLimit: make([]int, len(rule.Limits)), keys: make(map[string]*whatifKey)}
		rep.rules = append(rep.rules, rt)
		byName[rule.Name] = rt
	}
	none := &ruleTally{keys: make(map[string]*whatifKey)}
	rep.rules = append(rep.rules, none)

	pick := seed.NewLCG(cfg.Seed)
	lr := replay.NewAccessLogReader(r, cfg.Sim.Nodes)
	var (
		d       limiter.Decision
		line    []byte
		last    []byte
		firstAt int64
	)
	for {
		l, err := lr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return rep, err
		}
		node := l.Node
		if cfg.Sim.Nodes > 0 && node < 0 {
			node = pick.Node(cfg.Sim.Nodes)
		}
		if err := dec.check(l.At, l.Key, node, &d); err != nil {
			return rep, fmt.Errorf("trace line %d: %w", lr.Line(), err)
		}
		if rep.requests == 0 {
			rep.firstTime, firstAt = string(l.Time), l.At
		}
		rep.requests++
		last = append(last[:0], l.Time...) // no allocation per line
		rep.durationMs = l.At - firstAt

		rt := none
		if d.Rule != "" {
			rt = byName[d.Rule]
		}
		rt.requests++
		k := rt.keys[l.Key]
		if k == nil {
			k = &whatifKey{}
			rt.keys[l.Key] = k
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
				k.first = string(l.Time)
			}
			k.rejected++
			for i := range d.N {
				if !d.Limits[i].Allowed {
					rt.byLimit[i]++
				}
			}
		}
		if cfg.Decisions {
			line = append(line[:0], l.Time...)
			line = append(line, ' ')
			line = append(line, l.Key...)
			if cfg.Sim.Nodes > 0 {
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
