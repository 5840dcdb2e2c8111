package middleware

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/client"
)

// ErrNoKey is wrapped by the error of a KeyFunc that finds no key in a
// request (a missing header, a RemoteAddr that is no address).
var ErrNoKey = errors.New("middleware: no rate-limit key")

// Checker decides one check. Both backends implement it: *client.Client
// (a limiterd daemon over HTTP) and *local.Checker (an in-process limiter,
// package client/local). Check must be safe for concurrent use and follow
// client.Client.Check's contract: a nil error with a decision; an error
// wrapping client.ErrBadRequest with a Decision that denies; any other
// error with the fallback Decision to act on (allowed with FailedOpen when
// failing open).
type Checker interface {
	Check(ctx context.Context, req client.Request) (client.Decision, error)
}

// KeyFunc returns the rate-limit key of a request: who is being limited.
// An error means the request cannot be told apart from others; it should
// wrap ErrNoKey.
type KeyFunc func(r *http.Request) (string, error)

// Options configures the middleware. The zero value is valid: every
// request is limited by its peer address, against the rule its key
// matches, and denied requests get the default 429.
type Options struct {
	// KeyFunc returns each request's key. Default ClientIP() with no
	// trusted proxy: the address of the peer, X-Forwarded-For ignored.
	KeyFunc KeyFunc
	// Rule names the rule every request is checked against; "" lets each
	// key select the rule its pattern matches. A rule the limiter does not
	// know makes every request bad input (400 and an OnError call).
	Rule string
	// OnDenied answers a request the limiter denied. When it is called the
	// response header already holds Retry-After (whole seconds, rounded up,
	// at least 1) and the RateLimit fields, and DecisionFrom of the
	// request's context returns the decision. Default: 429 Too Many
	// Requests with a small JSON body, {"error":"too many
	// requests","retry_after_ms":N}.
	OnDenied http.Handler
	// OnError is told of every request that was not decided normally,
	// typically to log it: a KeyFunc error (wrapping ErrNoKey), bad input
	// (client.ErrBadRequest), a check no limiter decided
	// (client.ErrUnavailable: the request was failed open, or with
	// client.Config.FailClosed refused with 503). Clients can cause the
	// first two at will, so log them with care. nil: nobody is told.
	OnError func(r *http.Request, err error)
}

// New returns middleware that checks every request with c before handing
// it on: an allowed request goes to the wrapped handler with the RateLimit
// fields of the decision in its response header; a denied one goes to
// Options.OnDenied. A request whose key cannot be found, or that the
// limiter refuses as bad input, is answered 400 and never reaches the
// wrapped handler (failing open on it would let a client escape its limit
// by sending garbage). A check that no limiter decided is answered as the
// Checker's fallback decision says: passed on when failing open, else 503
// with Retry-After: 1.
//
// New panics if c is nil, as http.Handle does for a nil handler: it is a
// mistake in the program, found at start-up.
func New(c Checker, opts Options) func(http.Handler) http.Handler {
	if c == nil {
		panic("middleware: New with a nil Checker")
	}
	m := &mw{c: c, key: opts.KeyFunc, rule: opts.Rule, denied: opts.OnDenied, onError: opts.OnError}
	if m.key == nil {
		m.key = ClientIP()
	}
	if m.denied == nil {
		m.denied = http.HandlerFunc(tooManyRequests)
	}
	return func(next http.Handler) http.Handler {
		if next == nil {
			panic("middleware: wrapping a nil handler")
		}
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
	}
}

// mw is the middleware of one New.
type mw struct {
	c       Checker
	key     KeyFunc
	rule    string
	denied  http.Handler
	onError func(*http.Request, error)
}

func (m *mw) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	key, err := m.key(r)
	if err != nil {
		m.report(r, err)
		writeJSON(w, http.StatusBadRequest, `{"error":"the rate-limit key of this request is missing or invalid"}`)
		return
	}
	d, err := m.c.Check(r.Context(), client.Request{Key: key, Rule: m.rule})
	if err != nil {
		m.report(r, err)
	}
	h := w.Header()
	for k, v := range d.Headers {
		h[k] = v
	}
	switch {
	case d.Allowed:
		next.ServeHTTP(w, r)
	case err == nil:
		h["Retry-After"] = []string{retryAfter(d.RetryAfter)}
		m.denied.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), decisionKey{}, d)))
	case errors.Is(err, client.ErrBadRequest):
		writeJSON(w, http.StatusBadRequest, `{"error":"the rate-limit key of this request is missing or invalid"}`)
	default:
		// Failing closed: no decision, and the request is refused.
		h["Retry-After"] = []string{"1"}
		writeJSON(w, http.StatusServiceUnavailable, `{"error":"rate limiter unavailable"}`)
	}
}

func (m *mw) report(r *http.Request, err error) {
	if m.onError != nil {
		m.onError(r, err)
	}
}

// decisionKey is the context key of the decision handed to OnDenied.
type decisionKey struct{}

// DecisionFrom returns the decision that denied the request whose context
// is ctx; it is there for an Options.OnDenied handler to shape its answer.
// ok is false for any other context.
func DecisionFrom(ctx context.Context) (d client.Decision, ok bool) {
	d, ok = ctx.Value(decisionKey{}).(client.Decision)
	return d, ok
}

// tooManyRequests is the default OnDenied.
func tooManyRequests(w http.ResponseWriter, r *http.Request) {
	d, _ := DecisionFrom(r.Context())
	ms := int64((d.RetryAfter + time.Millisecond - 1) / time.Millisecond)
	writeJSON(w, http.StatusTooManyRequests,
		`{"error":"too many requests","retry_after_ms":`+strconv.FormatInt(max(ms, 0), 10)+"}")
}

// retryAfter is a Retry-After delay-seconds value (RFC 9110): the wait in
// whole seconds, rounded up so that a client that waits what it is told is
// not refused again, and at least 1, since "Retry-After: 0" invites an
// immediate retry that is still denied.
func retryAfter(wait time.Duration) string {
	s := int64(0)
	if wait > 0 {
		s = int64((wait + time.Second - 1) / time.Second)
	}
	return strconv.FormatInt(max(s, 1), 10)
}

// writeJSON writes a complete JSON answer that must not be cached.
func writeJSON(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body + "\n")) // a failed write means the client left
}
