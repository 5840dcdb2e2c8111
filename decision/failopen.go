package decision

import (
	"fmt"
	"runtime/debug"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// check calls the Checker, turning a panic into an error: whatever goes
// wrong inside the limiter, the request is answered (and allowed).
func (d *Decider) check(t time.Time, req limiter.Request, dst *limiter.Decision) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicErr(v)
		}
	}()
	return d.checker.Check(t, req, dst)
}

// panicErr wraps a recovered panic value with the stack that raised it.
func panicErr(v any) error { return &panicError{value: v, stack: debug.Stack()} }

// panicError is a panic inside the Checker. It deliberately wraps nothing,
// not even an error value it panicked with: a panic is always internal,
// never the client's fault.
type panicError struct {
	value any
	stack []byte
}

func (e *panicError) Error() string { return fmt.Sprint("decision: panic in Check: ", e.value) }

// failOpen turns a Checker failure into an allowed request (NFR3): counted,
// logged, and out overwritten whatever the Checker had written before it
// failed.
func (d *Decider) failOpen(err error, req limiter.Request, out *Result) {
	d.m.errors.Inc()
	d.m.decision("", OutcomeError)
	d.logInternal(err, req)
	*out = Result{
		Decision: limiter.Decision{Allowed: true, WouldAllow: true},
		Outcome:  OutcomeError,
		Internal: true,
	}
}

// logInternal logs an internal error, at most one line a second of the
// Decider's clock, with how many were not logged since the previous line.
// The key is not logged: it may be an API key or an address.
func (d *Decider) logInternal(err error, req limiter.Request) {
	now := d.now()
	d.errMu.Lock()
	if d.errLogged && now.Sub(d.lastErrLog) < time.Second {
		d.suppressed++
		d.errMu.Unlock()
		return
	}
	d.errLogged, d.lastErrLog = true, now
	suppressed := d.suppressed
	d.suppressed = 0
	d.errMu.Unlock()

	args := []any{"err", err, "rule", req.Rule, "hits", req.Hits, "suppressed", suppressed}
	if pe, ok := err.(*panicError); ok {
		args = append(args, "stack", string(pe.stack))
	}
	d.log.Error("check failed; request allowed", args...)
}
