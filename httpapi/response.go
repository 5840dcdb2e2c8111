package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// Header slots of one /check response. The values share one []string
// allocation, each header getting a one-element, full-capacity slice of it
// (so an Add by a wrapping handler copies rather than overwrites a
// neighbour), and the dynamic values share one string.
const (
	slotContentType = iota
	slotCacheControl
	slotPolicy
	slotRateLimit
	slotRetryAfter
	slotShadow
	numSlots
)

// writeDecision answers a check that the Checker decided.
func (a *API) writeDecision(w http.ResponseWriter, st *checkState) {
	d := &st.d
	a.m.decision(d.Rule, outcomeOf(d))

	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
	}
	// Shadow rules get no RateLimit fields: a dry run must not change how
	// clients pace themselves. No rule means no policy to describe.
	rateFields := d.Rule != "" && !d.Shadow && len(limits(d)) > 0

	hb := st.hdr[:0]
	var policyEnd, rateEnd int
	if rateFields {
		hb = appendPolicyField(hb, d)
		policyEnd = len(hb)
		hb = appendRateLimitField(hb, d)
		rateEnd = len(hb)
	}
	if status == http.StatusTooManyRequests {
		hb = appendRetryAfter(hb, d.RetryAfter)
	}
	st.hdr = hb
	s := string(hb)

	vals := make([]string, numSlots)
	h := w.Header()
	vals[slotContentType] = "application/json"
	h["Content-Type"] = vals[slotContentType : slotContentType+1 : slotContentType+1]
	vals[slotCacheControl] = "no-store"
	h["Cache-Control"] = vals[slotCacheControl : slotCacheControl+1 : slotCacheControl+1]
	if rateFields {
		vals[slotPolicy] = s[:policyEnd]
		h["Ratelimit-Policy"] = vals[slotPolicy : slotPolicy+1 : slotPolicy+1]
		vals[slotRateLimit] = s[policyEnd:rateEnd]
		h["Ratelimit"] = vals[slotRateLimit : slotRateLimit+1 : slotRateLimit+1]
	}
	if status == http.StatusTooManyRequests {
		vals[slotRetryAfter] = s[rateEnd:]
		h["Retry-After"] = vals[slotRetryAfter : slotRetryAfter+1 : slotRetryAfter+1]
	}
	if d.Shadow && !d.WouldAllow {
		vals[slotShadow] = "deny"
		h["X-Ratelimit-Shadow"] = vals[slotShadow : slotShadow+1 : slotShadow+1]
	}

	st.body = appendDecisionJSON(st.body[:0], d)
	w.WriteHeader(status)
	_, _ = w.Write(st.body) // a failed write means the client left
}

// appendDecisionJSON appends the /check response body, e.g.
//
//	{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":55000,"rule":"default"}
func appendDecisionJSON(b []byte, d *limiter.Decision) []byte {
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	if i := mostConstrained(d); i >= 0 {
		l := &d.Limits[i]
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, l.Limit, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, max(l.Remaining, 0), 10)
		b = append(b, `,"retry_after_ms":`...)
		var wait time.Duration
		if ruleDenied(d) {
			wait = d.RetryAfter
		}
		b = strconv.AppendInt(b, ceilMillis(wait), 10)
		b = append(b, `,"reset_ms":`...)
		b = strconv.AppendInt(b, ceilMillis(l.Reset), 10)
	}
	b = append(b, `,"rule":`...)
	b = appendJSONString(b, d.Rule)
	if d.Shadow {
		b = append(b, `,"shadow":true,"would_allow":`...)
		b = strconv.AppendBool(b, d.WouldAllow)
	}
	if d.Untracked {
		b = append(b, `,"untracked":true`...)
	}
	return append(b, '}', '\n')
}

// ruleDenied reports whether the rule itself said no, shadow mode aside.
func ruleDenied(d *limiter.Decision) bool {
	if d.Shadow {
		return !d.WouldAllow
	}
	return !d.Allowed
}

// mostConstrained picks the limit the body reports: on a deny the denying
// limit with the longest wait (the one the client must wait out), otherwise
// the one with the least remaining; the first in rule order on ties. It is
// -1 when the decision has no limits.
func mostConstrained(d *limiter.Decision) int {
	ls := limits(d)
	best := -1
	if ruleDenied(d) {
		for i := range ls {
			if !ls[i].Allowed && (best < 0 || ls[i].RetryAfter > ls[best].RetryAfter) {
				best = i
			}
		}
		if best >= 0 {
			return best
		}
	}
	for i := range ls {
		if best < 0 || ls[i].Remaining < ls[best].Remaining {
			best = i
		}
	}
	return best
}

// outcomeOf classifies a decision for limiterd_decisions_total.
func outcomeOf(d *limiter.Decision) outcome {
	switch {
	case d.Rule == "":
		return outcomeUnlimited
	case d.Untracked:
		return outcomeUntracked
	case d.Shadow && !d.WouldAllow:
		return outcomeShadowDenied
	case d.Allowed:
		return outcomeAllowed
	default:
		return outcomeDenied
	}
}

// internalError answers a check the limiter failed on: allowed (NFR3),
// flagged with X-RateLimit-Error, logged and counted.
func (a *API) internalError(w http.ResponseWriter, err error, req limiter.Request) {
	a.m.errors.Inc()
	a.m.decision("", outcomeError)
	a.logInternal(err, req)
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	h["X-Ratelimit-Error"] = []string{"internal"}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("{\"allowed\":true,\"rule\":\"\"}\n"))
}

// logInternal logs an internal error, at most one line a second. The key is
// not logged: it may be an API key or an address.
func (a *API) logInternal(err error, req limiter.Request) {
	now := time.Now().UnixMilli()
	last := a.lastErrLog.Load()
	if now-last < 1000 || !a.lastErrLog.CompareAndSwap(last, now) {
		a.suppressed.Add(1)
		return
	}
	args := []any{"err", err, "rule", req.Rule, "hits", req.Hits, "suppressed", a.suppressed.Swap(0)}
	if pe, ok := err.(*panicError); ok {
		args = append(args, "stack", string(pe.stack))
	}
	a.log.Error("check failed; request allowed", args...)
}
