// Package local is the in-process backend of package client/middleware,
// for a single-instance service that limits its clients without running
// limiterd: a Checker decides with a decision.Decider over a
// limiter.Limiter in the same process, and answers exactly as
// client.Client does from a limiterd node with the same rules: the same
// client.Decision, the same RateLimit-Policy and RateLimit values, the same
// errors (client.ErrBadRequest for bad input, client.ErrUnavailable with an
// allowed Decision when the limiter fails). A service can so start with an
// in-process limiter and move to a limiterd cluster by swapping the
// Checker, nothing else.
//
// It is built on decision.Decider rather than on the limiter directly so
// that key validation, failing open on an internal error or a panic, the
// decision metrics and the choice of the most constrained limit are the
// daemon's own code, not a copy. Its own package keeps the limiter, the
// counter and Prometheus out of services that only talk to a daemon.
//
// # Concurrency and zero value
//
// A *Checker is safe for concurrent use, as is the Decider it is given.
// The zero value of Checker is not usable; build one with New. Each Check
// takes its decision.Result from a pool, so a check of a key the counter
// already tracks allocates only its Decision.Headers.
package local
