// Package rls is limiterd's Envoy frontend: the global rate limit service
// of Envoy (envoy.service.ratelimit.v3.RateLimitService, ShouldRateLimit)
// over gRPC, answering as envoyproxy/ratelimit answers the same call, with
// limiterd's sliding windows and cluster instead of Redis. Like package
// httpapi it speaks its protocol only: every descriptor is decided by the
// one decision layer (decision.Decider), so fail-open, the metrics of
// every decision and the key's coordinator are the same however a check
// came. Rules come from envoyproxy/ratelimit configuration files (package
// limiter/envoyrules), loaded beside limiterd's own (limiter.Parse).
//
// # A call
//
// A RateLimitRequest names a domain and descriptors, each a list of
// (key, value) entries. For each descriptor, in order:
//
//   - the domain has no configuration here: OK, no current_limit, nothing
//     counted (an unknown domain is not an error, as upstream);
//   - the descriptor carries a limit override (Envoy's
//     RateLimitDescriptor.limit): it is decided against that limit alone
//     (limiter.Request.Limit), counted under the descriptor's key
//     (envoyrules.CountKey), and in a cluster put to the key's
//     coordinator at the margin like a limit of the file, the ask stating
//     the override's limit (limiter, "Limit overrides");
//   - otherwise the configuration's node that governs it (envoyrules
//     Config.Match): none, or a node without rate_limit, is OK with no
//     current_limit; an unlimited one is OK with limit_remaining
//     4294967295; requests_per_unit 0 is OVER_LIMIT, nothing counted; a
//     counted limit is decided under the node's rule
//     (limiter.EnvoyRuleName) and counting key;
//   - a matched limit whose name another matched node replaces (replaces)
//     is dropped for this call: OK, no current_limit.
//
// hits_addend: a descriptor's own (0 checks without counting) or else the
// request's (0 means unset, that is 1). A descriptor whose hits exceed its
// limit can never fit: it is OVER_LIMIT and nothing of the call is counted.
//
// All descriptors of a call are decided together, as /check decides the
// limits of a rule: counted against every one only if every one has room
// (decision.DecideAll). envoyproxy/ratelimit counts each descriptor
// whatever the others decide; limiterd does not charge a denied call.
//
// # The answer
//
// overall_code is OVER_LIMIT when any descriptor is (a shadow_mode
// descriptor never is). Each status has current_limit (requests_per_unit,
// unit, name), limit_remaining and duration_until_reset: the time until
// the whole limit is available again in the sliding window, where
// upstream answers the end of its fixed window. response_headers_to_add
// carries RateLimit-Policy and RateLimit (draft-ietf-httpapi-ratelimit-
// headers, one member per limited descriptor, formatted by package
// ratelimitheader as /check formats them) and, when the call is over the
// limit, Retry-After; with Config.Draft03Headers also X-RateLimit-Limit,
// X-RateLimit-Remaining and X-RateLimit-Reset of the most constrained
// descriptor, as envoyproxy/ratelimit sends them with
// LIMIT_RESPONSE_HEADERS_ENABLED.
//
// # Errors
//
// A call is refused with codes.InvalidArgument and a message saying what
// is wrong, counting nothing, for an empty domain, no descriptors, a
// descriptor without entries or with an entry without key, more than 64
// descriptors or entries, a key over limiter.MaxKeyBytes once encoded,
// negative hits (is_negative_hits), and a limit override with an unknown
// unit, zero or too many requests, or a window over 720h. An internal error
// answers OK (NFR3): the decision layer fails open and counts it
// (limiterd_check_errors_total), and a panic in this package is recovered,
// answered OK and counted in limiterd_grpc_requests_total{result="error"}.
//
// # Concurrency and zero value
//
// A *Service is safe for concurrent use; build it with New. The zero
// Config is the default.
package rls
