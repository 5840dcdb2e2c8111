package limiter

import (
	"strconv"

	"github.com/limiterd/limiterd/internal/yamlnode"

	"errors"
	"fmt"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// Limiter decides requests by the rules of a RuleSet, counting them in a
// counter.Counter. Create one with New; the zero value is not usable. It is
// safe for concurrent use: Check runs against an immutable compiled form of
// the rules that SetRules replaces atomically.
type Limiter struct {
	c     *counter.Counter
	rules atomic.Pointer[compiled]
	ov    overrides // counter registrations of limit overrides (override.go)
}

// compiled is a RuleSet prepared for Check: patterns compiled, limits
// registered with the counter, names indexed. Never modified once published.
type compiled struct {
	rs       *RuleSet
	byName   map[string]*compiledRule // every rule, ByName ones included
	matchers []*compiledRule          // rules with a pattern, in file order
	def      *compiledRule            // the rule without a pattern (and not ByName), or nil
	envoy    map[string]*envoyrules.Config
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
	// Every node declares the overrides' family, so that it keeps its
	// peers' counts of any override pair and can coordinate one (override.go).
	if err := c.Family(OverrideRule, MaxOverrideWindows); err != nil {
		return nil, fmt.Errorf("limiter: %w", err)
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
		switch {
		case r.ByName:
			// Decided only when named.
		case r.Match == "":
			cp.def = cr
		default:
			cr.pat = compilePattern(r.Match)
			cp.matchers = append(cp.matchers, cr)
		}
	}
	if len(rs.Envoy) > 0 {
		cp.envoy = make(map[string]*envoyrules.Config, len(rs.Envoy))
		for _, c := range rs.Envoy {
			cp.envoy[c.Domain] = c
		}
	}
	l.rules.Store(cp)
	return nil
}

// Rules returns the rule set in force. It must not be modified.
func (l *Limiter) Rules() *RuleSet {
	return l.rules.Load().rs
}

// Envoy returns the envoyproxy/ratelimit config in force for domain, nil if
// none. It is read from the compiled state that holds the rules and that
// SetRules swaps atomically, so a config and the ByName rules made from it
// come and go together. A frontend that matches descriptors with the config
// and then names their rules in Checks may still meet ErrUnknownRule when a
// reload dropped a node in between. It must not be modified.
func (l *Limiter) Envoy(domain string) *envoyrules.Config {
	return l.rules.Load().envoy[domain]
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
// With req.Peek it counts nothing and records nothing (counter.Peek): d
// says whether the hits would fit now, and d.Coordinate is never set. With
// req.Limit the key is decided against that one limit (OverrideRule), and
// left to the key's coordinator where a rule's check would be.
//
// It returns ErrInvalidKey, ErrInvalidHits, ErrInvalidLimit or
// ErrUnknownRule (wrapped) for a request that cannot be decided; d is then
// zeroed and nothing is counted. Check of a key already tracked, by a rule,
// does not allocate.
func (l *Limiter) Check(t time.Time, req Request, d *Decision) error {
	*d = Decision{}
	if err := checkRequest(req); err != nil {
		return err
	}
	if req.Limit != nil {
		var ov overrideScratch
		if err := l.overrideRule(req, &ov); err != nil {
			return err
		}
		return l.decide(t, req, &ov.rule, d)
	}
	r, err := l.rules.Load().resolve(req)
	if err != nil {
		return err
	}
	if r == nil {
		d.Allowed, d.WouldAllow = true, true
		return nil
	}
	return l.decide(t, req, r, d)
}

// overrideRule builds in ov the rule of req's limit override.
func (l *Limiter) overrideRule(req Request, ov *overrideScratch) error {
	if req.Rule != "" {
		return fmt.Errorf("%w: a request with a limit override must not name a rule, got %q", ErrInvalidLimit, yamlnode.Truncate(req.Rule))
	}
	return l.override(*req.Limit, req.Hits, ov)
}

// decide is Check of a valid request by rule r.
func (l *Limiter) decide(t time.Time, req Request, r *compiledRule, d *Decision) error {
	if req.Hits > r.minLimit {
		return &hitsError{fmt.Sprintf("hits %d exceed the limit %d of %q", req.Hits, r.minLimit, r.minPolicy)}
	}
	var res [counter.MaxLimitsPerCall]counter.Result
	var cd counter.Decision
	var err error
	if req.Peek {
		cd, err = l.c.Peek(t, req.Key, req.Hits, r.limits, res[:])
	} else {
		cd, err = l.c.Allow(t, req.Key, req.Hits, r.limits, res[:])
	}
	if err != nil {
		// Unreachable with a validated rule set and the checks above; kept
		// so a counter that grows new failure modes does not decide silently.
		*d = Decision{}
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

// KeyProblem returns what makes key one that Check refuses, "" when
// nothing does: "is empty", "is longer than 1024 bytes" (MaxKeyBytes) or
// "is not valid UTF-8", tested in that order. It does not allocate for a
// valid key, so a frontend may run it on every request, to refuse a bad
// key before the limiter sees it.
func KeyProblem(key string) string {
	switch {
	case key == "":
		return "is empty"
	case len(key) > MaxKeyBytes:
		return "is longer than " + strconv.Itoa(MaxKeyBytes) + " bytes"
	case !utf8.ValidString(key):
		return "is not valid UTF-8"
	}
	return ""
}

// checkRequest checks what Check can tell about req before finding its rule.
func checkRequest(req Request) error {
	if p := KeyProblem(req.Key); p != "" {
		return fmt.Errorf("%w: key %s", ErrInvalidKey, p)
	}
	switch {
	case req.Peek && req.Hits < 0:
		return &hitsError{fmt.Sprintf("hits of a peek must be at least 0, got %d", req.Hits)}
	case !req.Peek && req.Hits < 1:
		return &hitsError{fmt.Sprintf("hits must be at least 1, got %d", req.Hits)}
	}
	return nil
}

// fill writes the counter's decision for rule r into d; d.Decided, set by
// the caller, becomes DecidedOnLease when a lease decided.
func (r *compiledRule) fill(d *Decision, cd counter.Decision, res []counter.Result) {
	if cd.Leased {
		d.Decided = DecidedOnLease
	}
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
// count the hits if they are granted, and its own recent slices of the key;
// for a limit override (Request.Limit), the limit too (counter.Ask.Max),
// which the coordinator decides with. It counts nothing. A peek is never
// left to the coordinator, and PrepareAsk refuses one.
func (l *Limiter) PrepareAsk(t time.Time, req Request, ask *counter.Ask) error {
	var ov overrideScratch
	r, err := l.coordinatedRule(req, &ov)
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
// Check returns for a request that cannot be decided, and refuses a peek,
// which Check never leaves to the coordinator.
func (l *Limiter) Complete(t time.Time, req Request, a Answer, d *Decision) error {
	*d = Decision{}
	var ov overrideScratch
	r, err := l.coordinatedRule(req, &ov)
	if err != nil {
		return err
	}
	if r == nil {
		d.Allowed, d.WouldAllow = true, true
		return nil
	}
	return l.complete(t, req, r, a, d)
}

// complete is Complete of a valid request by rule r.
func (l *Limiter) complete(t time.Time, req Request, r *compiledRule, a Answer, d *Decision) error {
	var err error
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
			// Grant reads the lease the answer lent (Result.Lease) and
			// leaves this node's view in res.
			copy(res[:], a.Results)
			if _, err = l.c.Grant(t, req.Key, req.Hits, r.limits, res[:len(r.limits)]); err != nil {
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
	r.fill(d, cd, res[:len(r.limits)])
	return nil
}

// coordinatedRule returns, for PrepareAsk and Complete, the rule of a
// check that Check left to the coordinator (nil when none governs the
// key; a limit override's own rule, built in ov), and refuses a peek,
// which Check decides without it.
func (l *Limiter) coordinatedRule(req Request, ov *overrideScratch) (*compiledRule, error) {
	switch {
	case req.Peek:
		return nil, errors.New("limiter: a peek is never left to the coordinator (Check decides it)")
	case req.Limit != nil:
		if err := l.overrideRule(req, ov); err != nil {
			return nil, err
		}
		return &ov.rule, nil
	}
	return l.rules.Load().resolve(req)
}

// resolve returns the rule that decides req, or nil when none does.
func (cp *compiled) resolve(req Request) (*compiledRule, error) {
	if req.Rule != "" {
		if r := cp.byName[req.Rule]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("%w: %q", ErrUnknownRule, yamlnode.Truncate(req.Rule))
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
