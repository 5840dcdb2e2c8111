package limiter

import (
	"strconv"
	"time"
)

// LimitBound is one limit of a rule in force together with the most
// requests of one key the counter may accept in any window-long interval
// for it, with the counter's current cluster settings.
type LimitBound struct {
	// Rule is the rule's name.
	Rule string
	// Policy is the limit's RateLimit-Policy name (LimitSpec.Policy).
	Policy string
	// Shadow reports that the rule is in shadow mode: it never rejects, so
	// the bound is about what it would enforce.
	Shadow bool
	// Limit, Window and Slices are the declared limit.
	Limit  int64
	Window time.Duration
	Slices int
	// WorstCase is counter.(*Counter).WorstCase(Limit, Window): the
	// counter's derived bound, which depends on the number of nodes and the
	// sync interval in a cluster.
	WorstCase int64
}

// Ratio is WorstCase / Limit, the figure that 1 + Tolerance promises.
func (b LimitBound) Ratio() float64 {
	return float64(b.WorstCase) / float64(b.Limit)
}

// LimitText writes the limit as "600/60s" (the window as in policy names:
// whole seconds or milliseconds), a short, stable label for logs and
// metrics.
func (b LimitBound) LimitText() string {
	return strconv.FormatInt(b.Limit, 10) + "/" + formatWindow(b.Window)
}

// Bounds lists every limit of every rule in force, in file order and rule
// order (default, shadow and ByName rules included; limit overrides are
// not rules and are not listed), with its worst case under the counter's
// current cluster settings. The worst case changes with the node count, so
// callers recompute it when membership changes as well as after SetRules.
func (l *Limiter) Bounds() []LimitBound {
	cp := l.rules.Load()
	var out []LimitBound
	for i := range cp.rs.Rules {
		r := cp.byName[cp.rs.Rules[i].Name]
		for j, s := range r.specs {
			lim := r.limits[j]
			out = append(out, LimitBound{
				Rule:      r.name,
				Policy:    s.Policy,
				Shadow:    r.shadow,
				Limit:     lim.Max(),
				Window:    lim.Window(),
				Slices:    lim.Slices(),
				WorstCase: l.c.WorstCase(lim.Max(), lim.Window()),
			})
		}
	}
	return out
}
