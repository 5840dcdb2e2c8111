package limiter

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// overrides caches the counter registrations of limit overrides, one per
// (window, slices) pair, so that a check takes no registry lock: it
// derives its limit from the pair's registration (counter.Limit.WithMax).
// The registrations belong to the counter's family OverrideRule, declared
// in New with MaxOverrideWindows pairs: the counter holds the bound, and
// registers the pairs its peers use on first sight of them (counter.Family),
// so that every node keeps every node's counts of them and a key's
// coordinator can decide them. The map is copied on write and never
// modified once published, so lookups take no lock; mu orders the
// writers. It holds at most the family's pairs.
type overrides struct {
	mu   sync.Mutex
	regs atomic.Pointer[map[overrideKey]counter.Limit]
}

// overrideKey is an override registration's identity beside its name,
// OverrideRule.
type overrideKey struct {
	window time.Duration
	slices int
}

// overrideScratch is the rule of one override check, built on the caller's
// stack.
type overrideScratch struct {
	rule compiledRule
	lim  [1]counter.Limit
	spec [1]LimitSpec
}

// override checks spec, and hits against it, and builds its rule in ov.
// Nothing is registered for a request that cannot be decided.
func (l *Limiter) override(spec LimitSpec, hits int64, ov *overrideScratch) error {
	s, err := checkOverride(spec)
	if err != nil {
		return err
	}
	if hits > s.Limit {
		return &hitsError{fmt.Sprintf("hits %d exceed the limit %d of %q", hits, s.Limit, OverrideRule)}
	}
	lim, err := l.overrideLimit(overrideKey{s.Window, s.Slices}, s.Limit)
	if err != nil {
		return err
	}
	ov.lim[0], ov.spec[0] = lim, s
	ov.rule = compiledRule{
		name:      OverrideRule,
		limits:    ov.lim[:],
		specs:     ov.spec[:],
		minLimit:  s.Limit,
		minPolicy: OverrideRule,
	}
	return nil
}

// checkOverride validates an override as a rule file's limit is validated
// and returns it completed: the default slice count for Slices 0, and
// OverrideRule as its policy.
func checkOverride(s LimitSpec) (LimitSpec, error) {
	if msg := checkLimit(s.Limit); msg != "" {
		return s, fmt.Errorf("%w: field \"limit\": %s", ErrInvalidLimit, msg)
	}
	if msg := checkWindow(s.Window, ""); msg != "" {
		return s, fmt.Errorf("%w: field \"window\": %s", ErrInvalidLimit, msg)
	}
	switch {
	case s.Slices == 0:
		s.Slices = defaultSlices(s.Window)
	case s.Slices < 0:
		return s, fmt.Errorf("%w: field \"slices\": %s (or 0 for the default)", ErrInvalidLimit, intRange(1, counter.MaxSlices, fmt.Sprint(s.Slices)))
	default:
		if msg := checkSlices(int64(s.Slices), s.Window); msg != "" {
			return s, fmt.Errorf("%w: field \"slices\": %s", ErrInvalidLimit, msg)
		}
	}
	s.Policy = OverrideRule
	return s, nil
}

// overrideLimit returns the counter limit of the pair k with want as its
// limit, registering the pair first if it is new. The counter's family
// refuses a pair past MaxOverrideWindows (counter.ErrFamilyFull), whoever
// used the others: checks here, or peers whose counts arrived.
func (l *Limiter) overrideLimit(k overrideKey, want int64) (counter.Limit, error) {
	if m := l.ov.regs.Load(); m != nil {
		if lim, ok := (*m)[k]; ok {
			return lim.WithMax(want), nil
		}
	}
	l.ov.mu.Lock()
	defer l.ov.mu.Unlock()
	var old map[overrideKey]counter.Limit
	if m := l.ov.regs.Load(); m != nil {
		old = *m
	}
	if lim, ok := old[k]; ok {
		return lim.WithMax(want), nil // registered while this one waited
	}
	lim, err := l.c.Limit(OverrideRule, want, k.window, k.slices)
	switch {
	case errors.Is(err, counter.ErrFamilyFull):
		return counter.Limit{}, fmt.Errorf("%w: limit overrides already use %d distinct (window, slices) pairs, the most a limiter registers; window %s with %d slices would be one more",
			ErrInvalidLimit, MaxOverrideWindows, formatWindow(k.window), k.slices)
	case err != nil:
		return counter.Limit{}, fmt.Errorf("%w: %w", ErrInvalidLimit, err)
	}
	m := maps.Clone(old)
	if m == nil {
		m = make(map[overrideKey]counter.Limit, 1)
	}
	m[k] = lim
	l.ov.regs.Store(&m)
	return lim, nil
}
