// Package ratelimitheader formats what limiterd tells a client about its
// limits in HTTP fields: RateLimit-Policy and RateLimit of
// draft-ietf-httpapi-ratelimit-headers (structured fields, RFC 9651), and
// Retry-After (RFC 9110). Every frontend that writes them (httpapi's
// /check, the Envoy rate limit service's response_headers_to_add, the
// in-process middleware backend) calls this package, so that however a
// client asks, the fields read the same.
//
// The functions append to a caller's buffer and allocate nothing else.
// They are pure and safe for concurrent use; the package has no state.
package ratelimitheader
