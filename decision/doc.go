// Package decision is the one layer every limiterd frontend calls to decide
// a request: package httpapi (/check) and package rls (Envoy's gRPC rate
// limit protocol). A
// frontend parses its protocol into a limiter.Request, calls
// (*Decider).Decide and writes the Result in its own terms. Everything that
// must not differ between frontends lives here, so that a client gets the
// same decision, the same verdict on bad input and the same metrics however
// it asks:
//
//   - key validation: an empty key, one longer than limiter.MaxKeyBytes or
//     one that is not valid UTF-8 is bad input (a *KeyError) and never
//     reaches the limiter;
//   - the mapping of the limiter's input errors (unknown rule, invalid
//     hits) to errors the frontend answers as bad input;
//   - failing open (NFR3, below), panics included;
//   - the classification of a decision (Outcome) and the metrics of every
//     decision;
//   - the choice of the limit a frontend reports when it reports one
//     ((*Result).Primary).
//
// # Fail open (NFR3)
//
// limiterd must never become the cause of an outage. An error from the
// Checker that is not an input error, or a panic inside it, allows the
// request: Decide returns nil and a Result with Internal set and a Decision
// that allows the request under no rule. The failure is counted in
// limiterd_check_errors_total and in limiterd_decisions_total{rule="",
// outcome="error"}, and logged at ERROR at most once a second (of
// Config.Now), with the number of failures suppressed since the previous
// line and, for a panic, its stack. The key is never logged: it may be an
// API key or an address. A frontend answers such a request as allowed and
// may flag it (httpapi sets X-RateLimit-Error: internal); it never answers
// it as a server error (no 5xx).
//
// # Bad input
//
// Decide returns an error only for a request the frontend must reject as
// bad input: the error matches (errors.Is) exactly one of
// limiter.ErrInvalidKey, limiter.ErrInvalidHits (also for a Checker that
// returns counter.ErrInvalidHits), limiter.ErrUnknownRule or
// limiter.ErrInvalidLimit (a request's own limit, Request.Limit), and its text
// says what is wrong in words fit for the client. Bad input counts nothing,
// neither in the limiter nor in limiterd_decisions_total; a frontend counts
// its rejections itself (httpapi: limiterd_bad_requests_total).
//
// # Metrics
//
// New registers on the injected Registerer:
//
//	limiterd_decisions_total{rule,outcome}  decisions, by deciding rule ("" when none) and Outcome
//	limiterd_check_duration_seconds         time spent in Checker.Check, input errors and panics included
//	limiterd_check_errors_total             internal errors answered as allowed (NFR3)
//	limiterd_coordinated_checks_total{result}  checks at the margin put to the key's coordinator:
//	                                        granted, denied, fallback_timeout, fallback_unavailable
//	limiterd_coordinator_wait_seconds       time such a check waited for the coordinator (round trip or deadline)
//
// Names and help are those httpapi exported before this package existed, so
// dashboards and alerts keep working. The series of rule "" exist at 0 from
// the start, so that rate() works before the first failure; those of a rule
// appear at its first decision. The rule label is a name the Checker
// reported for a decision, never anything a client sent: a request naming an
// unknown rule is bad input and not a decision.
//
// # Concurrency, zero values, allocation
//
// A *Decider is safe for concurrent use by any number of goroutines; the
// Checker it is given must be too. The zero value of Decider is not usable:
// build one with New. The zero value of Config means all defaults. The zero
// Result is ready to be Decide's destination; Decide overwrites every field,
// so a frontend keeps one in its pooled per-request state, and Decide of a
// key the counter already tracks then allocates nothing (provided the
// Checker does not; *limiter.Limiter does not).
package decision
