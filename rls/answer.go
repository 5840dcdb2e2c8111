package rls

import (
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/ratelimitheader"
)

// answer builds the response from the plan and the decisions.
func (c *call) answer(cfg Config) *rlsv3.RateLimitResponse {
	resp := &rlsv3.RateLimitResponse{
		OverallCode: rlsv3.RateLimitResponse_OK,
		Statuses:    make([]*rlsv3.RateLimitResponse_DescriptorStatus, len(c.descs)),
	}
	var (
		fields []limiter.LimitResult // the RateLimit fields' members, in descriptor order
		wait   time.Duration         // Retry-After of an over-limit call: the longest wait
		most   = -1                  // the most constrained status, for the draft-03 fields
	)
	for i := range c.descs {
		p := &c.descs[i]
		st := &rlsv3.RateLimitResponse_DescriptorStatus{Code: rlsv3.RateLimitResponse_OK}
		resp.Statuses[i] = st
		switch p.kind {
		case kindNone:
			continue
		case kindUnlimited:
			st.LimitRemaining = math.MaxUint32
			continue
		case kindDenyAll:
			st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: p.name, RequestsPerUnit: 0, Unit: p.unit}
			st.DurationUntilReset = durationpb.New(p.window)
			if !p.shadow {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				fields = append(fields, limiter.LimitResult{Policy: p.policy, Window: p.window, Reset: p.window})
				wait = max(wait, p.window)
			}
		case kindCounted:
			r := &c.res[p.req]
			ls := r.Limits()
			if r.Internal || len(ls) == 0 {
				continue // failed open (NFR3): allowed, no limit to report
			}
			l := ls[r.Primary()]
			st.CurrentLimit = &rlsv3.RateLimitResponse_RateLimit{Name: p.name, RequestsPerUnit: p.limit, Unit: p.unit}
			st.LimitRemaining = uint32(min(max(l.Remaining, 0), math.MaxUint32))
			st.DurationUntilReset = durationpb.New(l.Reset)
			if p.shadow {
				break // counted and reported, never over the limit; no fields, as /check
			}
			fields = append(fields, l)
			if p.tooMany || !r.Decision.Allowed {
				st.Code = rlsv3.RateLimitResponse_OVER_LIMIT
				st.LimitRemaining = 0
				if p.tooMany {
					wait = max(wait, p.window)
				} else {
					wait = max(wait, r.Decision.RetryAfter)
				}
			}
		}
		if st.Code == rlsv3.RateLimitResponse_OVER_LIMIT {
			resp.OverallCode = rlsv3.RateLimitResponse_OVER_LIMIT
		}
		// envoyproxy/ratelimit's minimum descriptor: the last one over the
		// limit, else the one with the least remaining.
		if m := most; m < 0 || st.Code == rlsv3.RateLimitResponse_OVER_LIMIT ||
			resp.Statuses[m].Code != rlsv3.RateLimitResponse_OVER_LIMIT && st.LimitRemaining < resp.Statuses[m].LimitRemaining {
			most = i
		}
	}
	if len(fields) > 0 {
		b := ratelimitheader.AppendPolicy(make([]byte, 0, 128), fields)
		n := len(b)
		b = ratelimitheader.AppendRateLimit(b, fields)
		s := string(b)
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
			&corev3.HeaderValue{Key: "RateLimit-Policy", Value: s[:n]},
			&corev3.HeaderValue{Key: "RateLimit", Value: s[n:]})
	}
	if resp.OverallCode == rlsv3.RateLimitResponse_OVER_LIMIT {
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
			&corev3.HeaderValue{Key: "Retry-After", Value: string(ratelimitheader.AppendRetryAfter(nil, wait))})
	}
	if cfg.Draft03Headers && most >= 0 {
		st := resp.Statuses[most]
		resp.ResponseHeadersToAdd = append(resp.ResponseHeadersToAdd,
			&corev3.HeaderValue{Key: "X-RateLimit-Limit", Value: strconv.FormatUint(uint64(st.CurrentLimit.GetRequestsPerUnit()), 10)},
			&corev3.HeaderValue{Key: "X-RateLimit-Remaining", Value: strconv.FormatUint(uint64(st.LimitRemaining), 10)},
			&corev3.HeaderValue{Key: "X-RateLimit-Reset", Value: strconv.FormatInt(ratelimitheader.CeilSeconds(st.DurationUntilReset.AsDuration()), 10)})
	}
	return resp
}
