package limiter

import (
	"fmt"

	"github.com/limiterd/limiterd/counter"
)

// KeyLimits is the rule that governs a key and its limits in the counter,
// for a frontend that reads or resets a key's counts instead of checking
// it (limiterd's admin listener).
type KeyLimits struct {
	// Rule is the governing rule's name; "" when no rule governs the key,
	// which is then never counted (Specs and Limits are empty).
	Rule   string
	Shadow bool
	// Specs are the rule's limits in rule order, and Limits the counter's
	// limits they are counted under, parallel to Specs. Both are the
	// limiter's own: they must not be modified.
	Specs  []LimitSpec
	Limits []counter.Limit
}

// KeyLimits returns the rule that Check would decide key by, rule naming
// it when not empty, and its limits, without deciding or counting
// anything. It returns ErrInvalidKey for a key Check refuses and
// ErrUnknownRule (wrapped) for a rule that does not exist, as Check does.
// A reload that drops or changes the rule afterwards makes the limits
// those of the rules before it: counts live under a limit's (rule name,
// window, slices), so a limit a reload kept still names the same counts.
func (l *Limiter) KeyLimits(key, rule string) (KeyLimits, error) {
	if p := KeyProblem(key); p != "" {
		return KeyLimits{}, fmt.Errorf("%w: key %s", ErrInvalidKey, p)
	}
	r, err := l.rules.Load().resolve(Request{Key: key, Rule: rule})
	if err != nil || r == nil {
		return KeyLimits{}, err
	}
	return KeyLimits{Rule: r.name, Shadow: r.shadow, Specs: r.specs, Limits: r.limits}, nil
}
