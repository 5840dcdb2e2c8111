package local

import (
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/ratelimitheader"
)

// fields returns the RateLimit-Policy and RateLimit values of the limits
// ls, formatted by the code limiterd's own /check uses, so that the two
// backends can never disagree; one allocation for both.
func fields(ls []limiter.LimitResult) (policy, rateLimit string) {
	var buf [256]byte
	b := ratelimitheader.AppendPolicy(buf[:0], ls)
	n := len(b)
	s := string(ratelimitheader.AppendRateLimit(b, ls))
	return s[:n], s[n:]
}
