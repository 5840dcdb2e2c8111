// Package httpapi is limiterd's HTTP front end: it turns /check requests into
// decisions of a decision.Decider and answers them the way HTTP clients and
// proxies expect. It speaks HTTP only: validating keys, mapping the
// limiter's errors, failing open, choosing the limit to report and counting
// decisions are the Decider's, shared with every other frontend; httpapi
// parses, calls Decide and writes the answer.
//
// # Endpoints
//
//	GET  /check?key=K[&rule=R][&hits=N]
//	GET  /check?key=K&limit=L&window=W[&hits=N]
//	POST /check   {"key":"K","rule":"R","hits":N}
//	POST /check   {"key":"K","limit":L,"window":"W","hits":N}
//	GET  /metrics   Prometheus exposition of the injected registry
//	GET  /healthz   always 200 {"status":"ok"}
//	GET  /readyz    200 when Config.Ready returns nil, else 503 with its error
//	GET  /cluster   the cluster status from Config.Cluster as JSON; 404 when alone
//
// /check answers 200 when the request is allowed and 429 Too Many Requests
// (RFC 6585) when it is denied, with a JSON body
//
//	{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":55000,"rule":"default"}
//
// and the fields of draft-ietf-httpapi-ratelimit-headers in structured-field
// form, one list member per limit of the deciding rule, in rule order:
//
//	RateLimit-Policy: "default";q=600;w=60
//	RateLimit: "default";r=599;t=55
//
// A 429 also carries Retry-After in whole seconds, rounded up, at least 1
// (RFC 9110). limit and remaining in the body are those of the most
// constrained limit (decision.Result.Primary): the one with the least
// remaining, or on a deny the denying limit with the longest wait.
//
// When key is absent the key comes from the header named by
// Config.KeyHeader (the first address of X-Forwarded-For by default), so
// /check works as a Traefik ForwardAuth target: Traefik sends a GET with
// X-Forwarded-For and treats any 2xx as "allow", anything else is returned
// to the client, 429 and its headers included. An explicitly empty key
// (key= or "key":"") is an error rather than a fall back to the header, so
// a proxy template that renders an empty key is noticed instead of quietly
// limiting the proxy's own address. hits defaults to 1.
//
// A POST with a non-empty body takes its parameters from the JSON body only
// (query parameters alongside a body are rejected as ambiguous). A POST with
// an empty body behaves exactly like a GET, which is what nginx's
// auth_request sends when the original request was a POST and its body is
// dropped. A non-empty body must be application/json (or a +json type); a
// missing Content-Type is accepted, any other is rejected with 415.
//
// # Limits stated by the caller
//
// A request with limit and window states its own limit, as gubernator's
// callers and Envoy's per-descriptor overrides do: at most limit requests
// per window (a duration such as "60s" or "500ms"; in JSON limit is a
// number and window a string). It is decided against that limit alone
// (limiter.Request.Limit), and rule must be absent. The limiter validates
// it as it validates Envoy's overrides (limit 1..2147483647, window in
// whole milliseconds up to 720h); the decision's rule and policy name are
// "override". Counts live per (key, window): stated limits with the same
// window count a key together whatever their limits, apart from every
// rule's counts. In a cluster such a check is decided at the margin by
// the key's coordinator, like a rule's, so both bounds hold for it too.
//
// # Decisions that are not a plain allow or deny
//
//   - No rule governs the key: 200 {"allowed":true,"rule":""}, no RateLimit
//     headers.
//   - Shadow (dry-run) rule: always 200 and "allowed":true, plus
//     "shadow":true and "would_allow" with what the rule decided;
//     retry_after_ms is what the rule would have answered. A would-be deny
//     adds X-RateLimit-Shadow: deny. The RateLimit headers are left out for
//     shadow rules, because a dry run must not change how well-behaved
//     clients pace themselves.
//   - Key not tracked (the counter is at its key cap): allowed, with
//     "untracked":true in the body.
//   - Internal error (NFR3): when the Decider fails open (an error from its
//     Checker that is not an input error, or a panic inside it;
//     decision.Result.Internal), the request is allowed: 200
//     {"allowed":true,"rule":""} with X-RateLimit-Error: internal. The
//     Decider logs it (at most once a second, with a count of the ones
//     suppressed) and counts it in limiterd_check_errors_total. /check
//     never answers 5xx.
//
// # Bad input
//
// Bad input counts nothing and is answered with {"error":"..."} saying what
// is wrong: 400 for a missing, empty, over-long (more than
// limiter.MaxKeyBytes) or non-UTF-8 key, for hits that is not an integer, is
// below 1 or exceeds a limit of the rule, for an unknown rule, for a stated
// limit that is not whole (limit without window, or the reverse, or beside
// a rule), not an integer, not a duration or out of range, for a bad or
// unknown query parameter or one given twice, and for malformed JSON or JSON
// with unknown fields, a field given twice or in another case ("Key"), or a
// lone UTF-16 surrogate escape in a string (encoding/json would keep the
// last of two fields, match names in any case and turn a lone surrogate
// into U+FFFD: a POST must mean exactly what a GET could say); 413 for a body over Config.MaxBodyBytes; 415 for a
// body with a non-JSON Content-Type; 405 with Allow: GET, POST for other
// methods; 404 for unknown paths. Every /check response carries
// Cache-Control: no-store. The verdicts on the key's content, on hits over a
// limit and on unknown rules are the Decider's, with its messages, except
// that a key taken from the key header is named as such ("key from the
// X-Forwarded-For header is not valid UTF-8").
//
// # Metrics
//
// New registers limiterd_bad_requests_total{reason} on the injected
// registry, every reason at 0 from the start, and serves the whole registry
// on /metrics. The decision metrics (limiterd_decisions_total{rule,outcome},
// limiterd_check_duration_seconds, limiterd_check_errors_total) are
// registered by decision.New; limiterd gives both the same registry.
//
// # Concurrency and zero value
//
// An *API is safe for concurrent use, as is the Decider it is given. The
// zero value of API is not usable: build one with New. The zero value of
// Config means "all defaults" (see DefaultConfig). Each /check takes its
// scratch space, decision.Result and response buffers, from a pool rather
// than allocating it.
package httpapi
