package limiter

import (
	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/counter"
)

// Limiter decides requests by the rules of a RuleSet, counting them in a
// counter.Counter. Create one with New; the zero value is not usable. It is
// safe for concurrent use: Check runs against an immutable compiled form of
// the rules that SetRules replaces atomically.
type Limiter struct {
	c     *counter.Counter
	rules atomic.Pointer[compiled]
}

// compiled is a RuleSet prepared for Check: patterns compiled, limits
// registered with the counter, names indexed. Never modified once published.
type compiled struct {
	rs       *RuleSet
	byName   map[string]*compiledRule
	matchers []*compiledRule // rules with a pattern, in file order
	def      *compiledRule   // the rule without a pattern, or nil
}

type compiledRule struct {
	name   string
	shadow bool
	pat    pattern
	// limits and specs are parallel: specs[i] is what limits[i] enforces. The
	// slice is handed to the counter as is, so a check builds nothing.
	limits []counter.Limit
	specs  []LimitSpec
	// minLimit is the smallest limit of the rule, the most hits one check
	// may ask for; minPolicy names it for the error message.
	minLimit  int64
	minPolicy string
}

// New returns a Limiter that enforces rs, counting in c.
func New(c *counter.Counter, rs *RuleSet) (*Limiter, error) {
	if c == nil {
		return nil, errors.New("limiter: nil counter")
	}
	l := &Limiter{c: c}
	if err := l.SetRules(rs); err != nil {
		return nil, err
	}
	return l, nil
}

// SetRules validates rs, registers its limits with the counter and makes it
// the rule set every later Check uses. Counts are kept per (rule name,
// window, slices): a limit whose three are unchanged keeps its clients'
// windows, even when its limit changed. On error the current rules stay in
// force. rs must not be modified afterwards.
func (l *Limiter) SetRules(rs *RuleSet) error {
	if err := rs.Validate(); err != nil {
		return err
	}
	cp := &compiled{rs: rs, byName: make(map[string]*compiledRule, len(rs.Rules))}
	for i := range rs.Rules {
		r := &rs.Rules[i]
		cr := &compiledRule{
			name:   r.Name,
			shadow: r.Shadow,
			limits: make([]counter.Limit, len(r.Limits)),
			specs:  r.Limits,
		}
		for j, s := range r.Limits {
			lim, err := l.c.Limit(r.Name, s.Limit, s.Window, s.Slices)
			if err != nil {
				return fmt.Errorf("limiter: rule %q: %w", r.Name, err)
			}
			cr.limits[j] = lim
			if j == 0 || s.Limit < cr.minLimit {
				cr.minLimit, cr.minPolicy = s.Limit, s.Policy
			}
		}
		cp.byName[r.Name] = cr
		if r.Match == "" {
			cp.def = cr
		} else {
			cr.pat = compilePattern(r.Match)
			cp.matchers = append(cp.matchers, cr)
		}
	}
	l.rules.Store(cp)
	return nil
}

// Rules returns the rule set in force. It must not be modified.
func (l *Limiter) Rules() *RuleSet {
	return l.rules.Load().rs
}

// CheckNow is Check at time.Now().
func (l *Limiter) CheckNow(req Request, d *Decision) error {
	return l.Check(time.Now(), req, d)
}

// Check decides req arriving at t and writes the outcome to d, counting the
// request against every limit of the deciding rule only if all of them have
// room. The deciding rule is the one req.Rule names, else the first rule
// whose pattern matches req.Key, else the default rule; with none, the
// request is allowed uncounted (d.Rule == "").
//
// It returns ErrInvalidKey, ErrInvalidHits or ErrUnknownRule (wrapped) for a
// request that cannot be decided; d is then zeroed and nothing is counted.
// Check of a key already tracked does not allocate.
func (l *Limiter) Check(t time.Time, req Request, d *Decision) error {
	*d = Decision{}
	switch {
	case req.Key == "":
		return fmt.Errorf("%w: key is empty", ErrInvalidKey)
	case len(req.Key) > MaxKeyBytes:
		return fmt.Errorf("%w: key is %d bytes, more than the %d allowed", ErrInvalidKey, len(req.Key), MaxKeyBytes)
	case !utf8.ValidString(req.Key):
		return fmt.Errorf("%w: key is not valid UTF-8", ErrInvalidKey)
	case req.Hits < 1:
		return &hitsError{fmt.Sprintf("hits must be at least 1, got %d", req.Hits)}
	}
	cp := l.rules.Load()
	r, err := cp.resolve(req)
	if err != nil {
		return err
	}
	if r == nil {
		d.Allowed, d.WouldAllow = true, true
		return nil
	}
	if req.Hits > r.minLimit {
		return &hitsError{fmt.Sprintf("hits %d exceed the limit %d of %q", req.Hits, r.minLimit, r.minPolicy)}
	}
	var res [counter.MaxLimitsPerCall]counter.Result
	cd, err := l.c.Allow(t, req.Key, req.Hits, r.limits, res[:])
	if err != nil {
		// Unreachable with a validated rule set and the checks above; kept
		// so a counter that grows new failure modes does not decide silently.
		return fmt.Errorf("limiter: rule %q: %w", r.name, err)
	}
	if cd.Coordinate {
		d.Coordinate = true
		d.Rule, d.Shadow, d.N = r.name, r.shadow, len(r.limits)
		return nil
	}
	r.fill(d, cd, res[:len(r.limits)])
	return nil
}

// fill writes the counter's decision for rule r into d.
func (r *compiledRule) fill(d *Decision, cd counter.Decision, res []counter.Result) {
	d.WouldAllow = cd.Allowed
	d.Allowed = cd.Allowed || r.shadow
	d.Rule = r.name
	d.Shadow = r.shadow
	d.Untracked = cd.Untracked
	d.RetryAfter = cd.RetryAfter
	d.N = len(r.limits)
	for i := range r.limits {
		s, x := &r.specs[i], &res[i]
		d.Limits[i] = LimitResult{
			Policy:     s.Policy,
			Limit:      s.Limit,
			Window:     s.Window,
			Allowed:    x.Allowed,
			Remaining:  x.Remaining,
			RetryAfter: x.RetryAfter,
			Reset:      x.Reset,
		}
	}
}

// PrepareAsk fills ask, for the key's coordinator, with a check that Check
// left to it (Decision.Coordinate): the rule's limits, where this node will
// count the hits if they are granted, and its own recent slices of the key.
// It counts nothing.
func (l *Limiter) PrepareAsk(t time.Time, req Request, ask *counter.Ask) error {
	r, err := l.rules.Load().resolve(req)
	if err != nil {
		return err
	}
	if r == nil {
		return fmt.Errorf("%w: no rule governs the key", ErrUnknownRule)
	}
	l.c.PrepareAsk(t, req.Key, req.Hits, r.limits, ask)
	return nil
}

// Complete decides a check that Check left to the key's coordinator, with
// its answer, and writes the outcome to d: a grant is counted here (unless
// the coordinator was this node and counted it), a denial is remembered
// until its wait is over (counter.RememberDenial), and without an answer
// this node decides alone with the per-node budget. The limits in d are the
// coordinator's view when it answered, this node's otherwise: what remains
// for this request, never more than a denial leaves. It returns the errors
// Check returns for a request that cannot be decided.
func (l *Limiter) Complete(t time.Time, req Request, a Answer, d *Decision) error {
	*d = Decision{}
	r, err := l.rules.Load().resolve(req)
	if err != nil {
		return err
	}
	if r == nil {
		d.Allowed, d.WouldAllow = true, true
		return nil
	}
	var res [counter.MaxLimitsPerCall]counter.Result
	var cd counter.Decision
	switch {
	case !a.Answered:
		d.Decided = DecidedInFallback
		cd, err = l.c.AllowFallback(t, req.Key, req.Hits, r.limits, res[:])
	case len(a.Results) != len(r.limits):
		// The rules changed between the ask and the answer: the answer is
		// about other limits. Decide alone rather than count on it.
		d.Decided = DecidedInFallback
		cd, err = l.c.AllowFallback(t, req.Key, req.Hits, r.limits, res[:])
	case a.Allowed:
		d.Decided = DecidedByCoordinator
		cd = counter.Decision{Allowed: true}
		if !a.Counted {
			if _, err = l.c.Grant(t, req.Key, req.Hits, r.limits, res[:]); err != nil {
				break
			}
		}
		copy(res[:], a.Results)
	default:
		d.Decided = DecidedByCoordinator
		copy(res[:], a.Results)
		for i := range r.limits {
			cd.RetryAfter = max(cd.RetryAfter, res[i].RetryAfter)
		}
		if !a.Counted {
			l.c.RememberDenial(t, req.Key, req.Hits, r.limits, res[:len(r.limits)])
		}
	}
	if err != nil {
		return fmt.Errorf("limiter: rule %q: %w", r.name, err)
	}
	decided := d.Decided
	r.fill(d, cd, res[:len(r.limits)])
	d.Decided = decided
	return nil
}

// resolve returns the rule that decides req, or nil when none does.
func (cp *compiled) resolve(req Request) (*compiledRule, error) {
	if req.Rule != "" {
		if r := cp.byName[req.Rule]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownRule, truncate(req.Rule))
	}
	for _, r := range cp.matchers {
		if r.pat.match(req.Key) {
			return r, nil
		}
	}
	return cp.def, nil
}

// hitsError is an invalid-hits error. It matches both ErrInvalidHits and
// counter.ErrInvalidHits, as api.go promises, without repeating both
// prefixes in its text.
type hitsError struct{ msg string }

func (e *hitsError) Error() string   { return ErrInvalidHits.Error() + ": " + e.msg }
func (e *hitsError) Unwrap() []error { return []error{ErrInvalidHits, counter.ErrInvalidHits} }
