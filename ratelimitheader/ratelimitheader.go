package ratelimitheader

import (
	"strconv"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// The RateLimit-Policy and RateLimit fields of draft-ietf-httpapi-ratelimit-headers
// (drafts 08-11) are structured-field lists (RFC 9651): one member per
// limit of the deciding rule, in rule order, each an sf-string naming the
// policy with integer parameters:
//
//	RateLimit-Policy: "api/1s";q=10;w=1, "api/60s";q=600;w=60
//	RateLimit: "api/1s";r=9;t=1, "api/60s";r=599;t=55
//
// q is the quota, w the window in seconds, r what remains and t the seconds
// until the quota is fully available again. Durations are rounded up so a
// client that waits what it was told never comes back too early.

// AppendPolicy appends the RateLimit-Policy value for the limits ls.
func AppendPolicy(b []byte, ls []limiter.LimitResult) []byte {
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',', ' ')
		}
		b = AppendSFString(b, l.Policy)
		b = append(b, ";q="...)
		b = strconv.AppendInt(b, l.Limit, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, CeilSeconds(l.Window), 10)
	}
	return b
}

// AppendRateLimit appends the RateLimit value for the limits ls.
func AppendRateLimit(b []byte, ls []limiter.LimitResult) []byte {
	for i, l := range ls {
		if i > 0 {
			b = append(b, ',', ' ')
		}
		b = AppendSFString(b, l.Policy)
		b = append(b, ";r="...)
		b = strconv.AppendInt(b, max(l.Remaining, 0), 10)
		b = append(b, ";t="...)
		b = strconv.AppendInt(b, CeilSeconds(l.Reset), 10)
	}
	return b
}

// AppendRetryAfter appends a Retry-After delay-seconds value (RFC 9110): the
// wait rounded up to whole seconds and at least 1, since "Retry-After: 0"
// would invite an immediate retry that is still denied.
func AppendRetryAfter(b []byte, wait time.Duration) []byte {
	return strconv.AppendInt(b, max(CeilSeconds(wait), 1), 10)
}

// AppendSFString appends s as an RFC 9651 sf-string. Only printable ASCII is
// allowed there; any other byte (rule names are expected to be ASCII, but a
// bad one must not produce an invalid or split header) becomes '?'.
func AppendSFString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\\':
			b = append(b, '\\', c)
		case c < 0x20 || c > 0x7e:
			b = append(b, '?')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// CeilSeconds rounds a non-negative duration up to whole seconds; negative
// durations count as 0.
func CeilSeconds(d time.Duration) int64 { return ceilUnits(d, time.Second) }

// CeilMillis rounds a non-negative duration up to whole milliseconds.
func CeilMillis(d time.Duration) int64 { return ceilUnits(d, time.Millisecond) }

// ceilUnits rounds d up to whole units; negative durations count as 0.
func ceilUnits(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	n := int64(d / unit)
	if d%unit != 0 {
		n++
	}
	return n
}
