package decision

import "github.com/limiterd/limiterd/limiter"

// Outcome classifies a decision: it is the outcome label of
// limiterd_decisions_total, and tells a frontend which kind of answer to
// write. It is a fixed set, so nothing a client sends can grow the label
// space.
type Outcome uint8

// The outcomes, in the order Decide tests for them: a decision that is
// several things at once (an untracked key of a shadow rule) gets the first.
const (
	// OutcomeAllowed: an enforcing rule had room on every limit.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: an enforcing rule had no room; the request is denied.
	OutcomeDenied
	// OutcomeShadowDenied: a shadow rule had no room; the request is allowed
	// and the rule reports what enforcement would have done.
	OutcomeShadowDenied
	// OutcomeUntracked: the counter was at its key cap, so the key was
	// allowed without being counted.
	OutcomeUntracked
	// OutcomeUnlimited: no rule governs the key; allowed, not counted.
	OutcomeUnlimited
	// OutcomeError: the Checker failed or panicked; allowed (NFR3).
	OutcomeError
	numOutcomes
)

// String returns the label value: allowed, denied, shadow_denied, untracked,
// unlimited or error ("unknown" for a value outside the set).
func (o Outcome) String() string {
	switch o {
	case OutcomeAllowed:
		return "allowed"
	case OutcomeDenied:
		return "denied"
	case OutcomeShadowDenied:
		return "shadow_denied"
	case OutcomeUntracked:
		return "untracked"
	case OutcomeUnlimited:
		return "unlimited"
	case OutcomeError:
		return "error"
	}
	return "unknown"
}

// outcomeOf classifies a decision the Checker made.
func outcomeOf(d *limiter.Decision) Outcome {
	switch {
	case d.Rule == "":
		return OutcomeUnlimited
	case d.Untracked:
		return OutcomeUntracked
	case d.Shadow && !d.WouldAllow:
		return OutcomeShadowDenied
	case d.Allowed:
		return OutcomeAllowed
	default:
		return OutcomeDenied
	}
}
