package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/ratelimitheader"
)

// ErrInvalidConfig is returned by New for a missing Decider.
var ErrInvalidConfig = errors.New("local: invalid config")

// Checker decides checks in this process, with a decision.Decider, and
// answers them as a limiterd node would. Build it with New.
type Checker struct {
	dec     *decision.Decider
	results sync.Pool // of *decision.Result: 700 bytes a check otherwise
}

// New returns a Checker that has dec decide. dec's Config.Now is the clock
// checks are decided at, and dec owns the metrics and the log of internal
// errors, as it does in limiterd.
func New(dec *decision.Decider) (*Checker, error) {
	if dec == nil {
		return nil, fmt.Errorf("%w: nil Decider", ErrInvalidConfig)
	}
	c := &Checker{dec: dec}
	c.results.New = func() any { return new(decision.Result) }
	return c, nil
}

// Check decides req and returns what client.Client.Check would return for
// it from a limiterd node with the same rules, in the same state:
//
//   - nil error: the decision, with the same fields and the same
//     RateLimit-Policy and RateLimit values (Decision.Headers) as the
//     daemon's answer;
//   - an error wrapping client.ErrBadRequest (and the limiter's sentinel,
//     limiter.ErrInvalidKey, ErrInvalidHits or ErrUnknownRule) for bad
//     input, with the zero Decision, which denies;
//   - an error wrapping client.ErrUnavailable with an allowed Decision that
//     has FailedOpen set when the limiter failed (the Decider has logged
//     and counted it). The Decider always fails open, so there is no
//     fail-closed mode here.
//
// ctx bounds only the wait for a key's coordinator, which a single
// instance never has.
func (c *Checker) Check(ctx context.Context, req client.Request) (client.Decision, error) {
	hits := int64(req.Hits)
	if hits == 0 {
		hits = 1 // as the daemon defaults it
	}
	res := c.results.Get().(*decision.Result)
	defer c.results.Put(res)
	if err := c.dec.Decide(ctx, limiter.Request{Key: req.Key, Rule: req.Rule, Hits: hits}, res); err != nil {
		return client.Decision{}, fmt.Errorf("%w: %w", client.ErrBadRequest, err)
	}
	if res.Internal {
		return client.Decision{Allowed: true, WouldAllow: true, FailedOpen: true},
			fmt.Errorf("%w: the in-process limiter failed; the request is allowed", client.ErrUnavailable)
	}
	d := &res.Decision
	out := client.Decision{
		Allowed:    d.Allowed,
		Rule:       d.Rule,
		Shadow:     d.Shadow,
		WouldAllow: d.Allowed,
		Untracked:  d.Untracked,
	}
	if d.Shadow {
		out.WouldAllow = d.WouldAllow
	}
	// The body fields of the daemon's answer (httpapi/response.go): the
	// most constrained limit, the wait only when the rule said no, whole
	// milliseconds rounded up.
	ls := res.Limits()
	if i := res.Primary(); i >= 0 {
		l := &ls[i]
		out.Limit = l.Limit
		out.Remaining = max(l.Remaining, 0)
		out.Reset = ceilMillis(l.Reset)
		if res.RuleDenied() {
			out.RetryAfter = ceilMillis(d.RetryAfter)
		}
	}
	// The daemon sends no RateLimit fields for a shadow rule (a dry run must
	// not change how clients pace themselves) nor without a rule.
	if d.Rule != "" && !d.Shadow && len(ls) > 0 {
		policy, rate := fields(ls)
		vals := []string{policy, rate}
		out.Headers = http.Header{
			"Ratelimit-Policy": vals[0:1:1],
			"Ratelimit":        vals[1:2:2],
		}
	}
	return out, nil
}

// ceilMillis rounds d up to whole milliseconds, as the daemon's JSON
// carries it, so that a Decision does not depend on the backend.
func ceilMillis(d time.Duration) time.Duration {
	return time.Duration(ratelimitheader.CeilMillis(d)) * time.Millisecond
}
