// Package client asks limiterd whether a request may proceed, over the
// HTTP /check endpoint of one or more nodes (see package httpapi for the
// protocol): GET /check?key=K[&rule=R][&hits=N], answered 200 (allowed)
// or 429 (denied) with a JSON body and the RateLimit fields of
// draft-ietf-httpapi-ratelimit-headers.
//
//	c, err := client.New(client.Config{Addrs: []string{"10.0.0.1:8080", "10.0.0.2:8080"}})
//	...
//	d, err := c.Check(ctx, client.Request{Key: clientIP})
//	if err != nil {
//		log.Print(err) // d is still the answer to act on; see Check
//	}
//	if !d.Allowed { ... 429, Retry-After d.RetryAfter ... }
//
// Package client/middleware puts a Client (or an in-process limiter, see
// package client/local) in front of a net/http handler.
//
// # Failures
//
// A rate limiter must not become the cause of an outage, so Check bounds
// its wait (Config.Timeout, 50ms by default, failovers included) and, when
// no node decides in that time, fails open by default: it returns an
// allowed Decision with FailedOpen set together with an error wrapping
// ErrUnavailable, which says what went wrong and is meant to be logged.
// Returning both, rather than a Decision or an error, keeps the caller from
// having to re-implement the fallback, and keeps the fallback in one place
// (Config.FailClosed turns it into a deny). Bad input is different: a node's
// 400 is returned as an error wrapping ErrBadRequest with the zero
// Decision, which denies, because every node would refuse it and allowing it
// would let a client escape its limit by sending garbage.
//
// A node that fails (connection error, timeout, 5xx, an answer that is not
// limiterd's) is skipped for Config.Backoff and the call goes on to the next
// node within the same deadline. Once the back-off is over one Check tries
// the node again while the others keep skipping it. There are no background
// health checks and no goroutines: the Checks themselves find out.
//
// Errors never contain the key (net/http puts the request URL, key and all,
// in its errors; Check removes it): keys may be API keys or addresses, which
// do not belong in logs.
//
// # Concurrency and zero value
//
// A *Client is safe for concurrent use by any number of goroutines, and is
// meant to be shared: it holds the keep-alive connections to the nodes.
// The zero value of Client is not usable; build one with New. The zero
// value of Config has no Addrs and so is not valid; every other zero field
// takes its default (DefaultConfig).
package client
