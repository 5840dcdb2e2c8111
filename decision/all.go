package decision

import (
	"context"
	"fmt"

	"github.com/limiterd/limiterd/limiter"
)

// DecideAll decides several requests together, as one check of several
// keys: they are counted only if every one of them is allowed, as one
// rule's limits are (Envoy sends every descriptor of a call in one
// request; envoyproxy/ratelimit counts each one whatever the others
// decide, so a call denied by one descriptor still uses up the others).
//
// It checks every request first without counting (limiter.Request.Peek).
// If each would be allowed (a shadow rule always is), it decides each in
// order as Decide does, counting it; a request with Peek set stays a
// check. If any would be denied, nothing is counted and out holds the
// checks. out[i] is the Result of reqs[i] either way; out must be at least
// as long as reqs.
//
// The check and the counting are not one atomic step: another call for
// the same keys can fill one of them in between, and then that request is
// denied while the ones before it are counted. That is the rare case of
// two calls racing for the last room of a key; the bound on what is
// admitted holds regardless, since every count is decided against its
// limits.
//
// Bad input in any request is returned as Decide returns it, with the
// index of that request, and nothing is counted; otherwise the index is -1.
// A request whose check fails inside the Checker is allowed (NFR3), counted
// as an internal error once, and not counted against its limits.
func (d *Decider) DecideAll(ctx context.Context, reqs []limiter.Request, out []Result) (int, error) {
	if len(out) < len(reqs) {
		return -1, fmt.Errorf("%w: %d results for %d requests", ErrInvalidConfig, len(out), len(reqs))
	}
	out = out[:len(reqs)]
	t := d.now()
	fits := true
	for i := range reqs {
		if p := limiter.KeyProblem(reqs[i].Key); p != "" {
			clear(out)
			return i, &KeyError{Problem: p}
		}
		peek := reqs[i]
		peek.Peek = true
		if err := d.check(t, peek, &out[i].Decision); err != nil {
			if bad := badInput(err, peek); bad != nil {
				clear(out)
				return i, bad
			}
			d.failOpen(err, peek, &out[i])
			continue
		}
		out[i].Internal = false
		fits = fits && out[i].Decision.Allowed
	}
	if !fits {
		// The checks are the answer: each is a decision, as the frontend
		// reports it.
		for i := range out {
			if !out[i].Internal {
				out[i].Outcome = outcomeOf(&out[i].Decision)
				d.m.decision(out[i].Decision.Rule, out[i].Outcome)
			}
		}
		return -1, nil
	}
	for i := range reqs {
		if out[i].Internal {
			continue // allowed, and counted as an error already
		}
		if err := d.Decide(ctx, reqs[i], &out[i]); err != nil {
			return i, err // a reload between the check and now removed its rule
		}
	}
	return -1, nil
}
