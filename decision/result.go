package decision

import "github.com/limiterd/limiterd/limiter"

// Result is what Decide found out about one request: everything a frontend
// needs to write its answer. The zero value is ready to be Decide's
// destination, and Decide overwrites every field whatever happens, so one
// Result can be reused for request after request; that is what keeps the
// decision of a tracked key allocation-free (a limiter.Decision is about
// 700 bytes).
type Result struct {
	// Decision is the Checker's decision. After an internal error it allows
	// the request under no rule: Allowed and WouldAllow, Rule "", no
	// limits.
	Decision limiter.Decision
	// Outcome classifies Decision, as limiterd_decisions_total counted it.
	Outcome Outcome
	// Internal reports that the Checker failed or panicked and the request
	// is allowed anyway (NFR3); Outcome is then OutcomeError. A frontend may
	// flag it (httpapi sets X-RateLimit-Error: internal) but answers it as
	// allowed, never as a server error.
	Internal bool
}

// Limits returns the set entries of Decision.Limits, in rule order. It
// tolerates an out-of-range Decision.N from a faulty Checker, so that a
// frontend can range over and index what it returns without crashing.
func (r *Result) Limits() []limiter.LimitResult {
	d := &r.Decision
	return d.Limits[:min(max(d.N, 0), len(d.Limits))]
}

// RuleDenied reports whether the deciding rule had no room, shadow mode
// aside: for a shadow rule it is what enforcement would have decided. A
// frontend reports a wait (Decision.RetryAfter) only when it is true, so
// that a dry run still shows clients what the rule would have told them.
func (r *Result) RuleDenied() bool {
	if r.Decision.Shadow {
		return !r.Decision.WouldAllow
	}
	return !r.Decision.Allowed
}

// Primary returns the index in Limits of the most constrained limit, the one
// a frontend reports when its answer has room for one limit only: when the
// rule denied, the denying limit with the longest wait (the one the client
// must wait out); otherwise the one with the least remaining; the first in
// rule order on ties. It is -1 when there are no limits (no rule governs the
// key, or the Checker failed).
func (r *Result) Primary() int {
	ls := r.Limits()
	best := -1
	if r.RuleDenied() {
		for i := range ls {
			if !ls[i].Allowed && (best < 0 || ls[i].RetryAfter > ls[best].RetryAfter) {
				best = i
			}
		}
		if best >= 0 {
			return best
		}
	}
	for i := range ls {
		if best < 0 || ls[i].Remaining < ls[best].Remaining {
			best = i
		}
	}
	return best
}
