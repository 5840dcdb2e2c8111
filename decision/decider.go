package decision

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/limiter"
)

// Checker decides one request; *limiter.Limiter implements it. Check must be
// safe for concurrent use and must overwrite every field of d. It is an
// interface so that tests can make it fail, panic or answer anything.
type Checker interface {
	Check(t time.Time, req limiter.Request, d *limiter.Decision) error
}

// Decider decides requests for every frontend. Build it with New.
type Decider struct {
	now     func() time.Time
	checker Checker
	log     *slog.Logger
	m       *metrics

	// The coordinated cluster's slow path (coordinate.go).
	completer Completer // the Checker, when it implements Completer
	coord     Coordinator
	deadline  time.Duration
	asks      sync.Pool // of *askState

	// The internal-error log is throttled to one line a second so that a
	// failing limiter at 5,000 checks/s cannot flood the log. A mutex is
	// enough: it is taken only on a failure.
	errMu      sync.Mutex
	errLogged  bool      // a line was logged at lastErrLog
	lastErrLog time.Time // of the last line logged
	suppressed int64     // failures not logged since then
}

// New builds a Decider that asks c, registers its metrics on reg and logs
// internal errors to log. log may be nil: nothing is logged. A failed New
// leaves reg as it found it.
func New(cfg Config, c Checker, reg prometheus.Registerer, log *slog.Logger) (*Decider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: nil Checker", ErrInvalidConfig)
	}
	if reg == nil {
		return nil, fmt.Errorf("%w: nil Registerer", ErrInvalidConfig)
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	d := &Decider{now: cfg.Now, checker: c, log: log, m: m, coord: cfg.Coordinator, deadline: cfg.Deadline}
	d.completer, _ = c.(Completer)
	if d.coord != nil && d.completer == nil {
		m.unregister(reg)
		return nil, fmt.Errorf("%w: a Coordinator needs a Checker that implements Completer", ErrInvalidConfig)
	}
	d.asks.New = func() any { return new(askState) }
	return d, nil
}

// Decide decides req at Config.Now and writes everything a frontend needs
// for its answer to out, which must not be nil.
//
// It returns an error only for bad input, which counts nothing: a *KeyError
// for a key it refuses itself, or, when the Checker refused the request, an
// error matching one of limiter.ErrInvalidKey, limiter.ErrInvalidHits and
// limiter.ErrUnknownRule as well as the Checker's own error. Its text is
// the message for the client. out is then the zero Result. Whatever else goes wrong in the Checker, error or panic,
// Decide fails open: it returns nil and out allows the request with
// out.Internal set (see the package documentation).
//
// A check at the margin of a coordinated cluster (limiter.Decision.Coordinate)
// is put to Config.Coordinator, waiting at most Config.Deadline and no longer
// than ctx allows; without an answer by then it is decided alone, with the
// per-node budget.
func (d *Decider) Decide(ctx context.Context, req limiter.Request, out *Result) error {
	if p := limiter.KeyProblem(req.Key); p != "" {
		*out = Result{}
		return &KeyError{Problem: p}
	}
	t := d.now()
	start := time.Now()
	err := d.check(t, req, &out.Decision)
	// Every Checker call is timed, failures and bad input included: a
	// slow failure is worth seeing.
	d.m.duration.Observe(time.Since(start).Seconds())
	if err != nil {
		if bad := badInput(err, req); bad != nil {
			*out = Result{}
			return bad
		}
		d.failOpen(err, req, out)
		return nil
	}

	if out.Decision.Coordinate {
		// At the margin: the key's coordinator decides, within the
		// deadline, or this node alone after it (coordinate.go).
		if d.completer == nil {
			d.failOpen(fmt.Errorf("decision: the Checker left a check to the coordinator but does not implement Completer"), req, out)
			return nil
		}
		if err := d.coordinate(ctx, t, req, &out.Decision); err != nil {
			if bad := badInput(err, req); bad != nil {
				*out = Result{}
				return bad
			}
			d.failOpen(err, req, out)
			return nil
		}
	}
	out.Outcome = outcomeOf(&out.Decision)
	out.Internal = false
	d.m.decision(out.Decision.Rule, out.Outcome)
	return nil
}
