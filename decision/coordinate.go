package decision

import (
	"context"
	"errors"
	"time"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// Coordinator puts a check at the margin to the key's coordinator node:
// *cluster.Node implements it. It must be safe for concurrent use.
type Coordinator interface {
	// Coordinate sends ask to the key's coordinator and waits for its
	// answer at most until ctx is done, writing the coordinator's view of
	// each limit to results (len(ask.Limits) of them). counted reports
	// that this node is the coordinator and counted the hits itself. An
	// error means no usable answer (ctx done first, the coordinator
	// unreachable, or unable to decide it); the implementation then tells
	// the coordinator to drop a grant it may have made, and the caller
	// decides alone.
	Coordinate(ctx context.Context, t time.Time, ask *counter.Ask, results []counter.Result) (allowed, counted bool, err error)
}

// Completer is what a Checker needs beyond Check for a coordinated
// cluster: *limiter.Limiter implements it.
type Completer interface {
	PrepareAsk(t time.Time, req limiter.Request, ask *counter.Ask) error
	Complete(t time.Time, req limiter.Request, a limiter.Answer, d *limiter.Decision) error
}

// ErrNoCoordinator is the error of a check that the limiter left to the
// key's coordinator when the Decider has none (Config.Coordinator nil):
// the check is decided alone, as after a timeout.
var ErrNoCoordinator = errors.New("decision: no coordinator")

// askState is the scratch space of one check at the margin, pooled.
type askState struct {
	ask counter.Ask
	res [counter.MaxLimitsPerCall]counter.Result
}

// coordinate completes a check that the Checker left to the key's
// coordinator: the question, bounded by the deadline, then the limiter's
// Complete with the answer, or without one. It fails open like Check.
func (d *Decider) coordinate(ctx context.Context, t time.Time, req limiter.Request, out *limiter.Decision) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicErr(v)
		}
	}()
	st := d.asks.Get().(*askState)
	defer d.asks.Put(st)
	if err := d.completer.PrepareAsk(t, req, &st.ask); err != nil {
		return err
	}
	res := st.res[:len(st.ask.Limits)]
	var allowed, counted bool
	cerr := ErrNoCoordinator
	if d.coord != nil {
		cctx, cancel := context.WithTimeout(ctx, d.deadline)
		start := time.Now()
		allowed, counted, cerr = d.coord.Coordinate(cctx, t, &st.ask, res)
		cancel()
		d.m.roundTrip.Observe(time.Since(start).Seconds())
	}
	a := limiter.Answer{Answered: cerr == nil, Allowed: allowed, Counted: counted, Results: res}
	// The answer is counted at the instant it came, not at the question's.
	if err := d.completer.Complete(d.now(), req, a, out); err != nil {
		return err
	}
	switch {
	case cerr == nil && allowed:
		d.m.coordinated[coordGranted].Inc()
	case cerr == nil:
		d.m.coordinated[coordDenied].Inc()
	case errors.Is(cerr, context.DeadlineExceeded):
		d.m.coordinated[coordTimeout].Inc()
	default:
		d.m.coordinated[coordUnavailable].Inc()
	}
	return nil
}

// Labels of limiterd_coordinated_checks_total.
const (
	coordGranted = iota
	coordDenied
	coordTimeout
	coordUnavailable
	numCoord
)

// coordResult names a label of limiterd_coordinated_checks_total.
func coordResult(i int) string {
	switch i {
	case coordGranted:
		return "granted"
	case coordDenied:
		return "denied"
	case coordTimeout:
		return "fallback_timeout"
	default:
		return "fallback_unavailable"
	}
}
