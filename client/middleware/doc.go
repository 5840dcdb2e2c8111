// Package middleware rate-limits a net/http handler with limiterd's
// decisions, from either of two backends behind one interface, Checker:
//
//   - *client.Client asks a limiterd daemon (one node or a cluster) over
//     HTTP: the limit holds across all instances of a service;
//   - *local.Checker (package client/local) decides in this process, with
//     the same limiter and decision code as the daemon: for a
//     single-instance service with no daemon to run.
//
// Both give the same decisions and the same response fields, so a service
// can move from one to the other by swapping the Checker.
//
//	limit := middleware.New(checker, middleware.Options{
//		KeyFunc: middleware.ClientIP(netip.MustParsePrefix("10.0.0.0/8")), // behind a proxy in 10/8
//		OnError: func(r *http.Request, err error) { log.Print(err) },
//	})
//	mux.Handle("GET /items/{id}", limit(items))
//
// # Responses
//
// Every decided request, allowed or denied, gets the RateLimit-Policy and
// RateLimit fields of draft-ietf-httpapi-ratelimit-headers as the limiter
// wrote them (none for a shadow rule or a key no rule governs), so that
// well-behaved clients can pace themselves. A denied request is answered by
// Options.OnDenied, by default 429 Too Many Requests with Retry-After in
// whole seconds (rounded up, at least 1), Content-Type: application/json
// and {"error":"too many requests","retry_after_ms":N}.
//
// A request with no key (KeyFunc error) or one the limiter refuses as bad
// input (client.ErrBadRequest: a key over 1024 bytes, an unknown
// Options.Rule) is answered 400 and not passed on: failing open on it would
// let a client escape its limit by sending garbage. A check that no limiter
// decided (client.ErrUnavailable: the daemon is down or slow) is failed
// open by default: the request is passed on without RateLimit fields and
// Options.OnError is told why. With client.Config.FailClosed it is answered
// 503 with Retry-After: 1 instead.
//
// # Keys
//
// ClientIP keys by the client's address, trusting X-Forwarded-For only as
// far as configured trusted proxies wrote it (read its documentation before
// putting the service behind a proxy); Header keys by a header, for
// authenticated identities such as API keys; Route keys by method and
// ServeMux pattern, for a limit a route's clients share. Any
// func(*http.Request) (string, error) will do.
//
// # Concurrency
//
// The middleware and the handlers it returns are safe for concurrent use,
// provided the Checker, KeyFunc, OnDenied and OnError are; all of this
// package's are. Options has no state: its zero value is valid.
package middleware
