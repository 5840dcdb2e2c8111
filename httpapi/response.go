package httpapi

import (
	"net/http"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/ratelimitheader"
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

// writeDecision answers a check that the Decider decided (and counted).
func (a *API) writeDecision(w http.ResponseWriter, st *checkState) {
	d := &st.res.Decision
	ls := st.res.Limits()

	status := http.StatusOK
	if !d.Allowed {
		status = http.StatusTooManyRequests
	}
	// Shadow rules get no RateLimit fields: a dry run must not change how
	// clients pace themselves. No rule means no policy to describe.
	rateFields := d.Rule != "" && !d.Shadow && len(ls) > 0

	hb := st.hdr[:0]
	var policyEnd, rateEnd int
	if rateFields {
		hb = ratelimitheader.AppendPolicy(hb, ls)
		policyEnd = len(hb)
		hb = ratelimitheader.AppendRateLimit(hb, ls)
		rateEnd = len(hb)
	}
	if status == http.StatusTooManyRequests {
		hb = ratelimitheader.AppendRetryAfter(hb, d.RetryAfter)
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

	st.body = appendDecisionJSON(st.body[:0], &st.res)
	w.WriteHeader(status)
	_, _ = w.Write(st.body) // a failed write means the client left
}

// appendDecisionJSON appends the /check response body, e.g.
//
//	{"allowed":true,"limit":600,"remaining":599,"retry_after_ms":0,"reset_ms":55000,"rule":"default"}
//
// limit, remaining and reset_ms are those of the most constrained limit
// (decision.Result.Primary); retry_after_ms is the wait only when the rule
// said no, shadow mode aside.
func appendDecisionJSON(b []byte, res *decision.Result) []byte {
	d := &res.Decision
	b = append(b, `{"allowed":`...)
	b = strconv.AppendBool(b, d.Allowed)
	if i := res.Primary(); i >= 0 {
		l := &res.Limits()[i]
		b = append(b, `,"limit":`...)
		b = strconv.AppendInt(b, l.Limit, 10)
		b = append(b, `,"remaining":`...)
		b = strconv.AppendInt(b, max(l.Remaining, 0), 10)
		b = append(b, `,"retry_after_ms":`...)
		var wait time.Duration
		if res.RuleDenied() {
			wait = d.RetryAfter
		}
		b = strconv.AppendInt(b, ratelimitheader.CeilMillis(wait), 10)
		b = append(b, `,"reset_ms":`...)
		b = strconv.AppendInt(b, ratelimitheader.CeilMillis(l.Reset), 10)
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

// writeInternalError answers a check the limiter failed on (NFR3): allowed,
// under no rule, flagged with X-RateLimit-Error. The Decider has counted and
// logged the failure.
func writeInternalError(w http.ResponseWriter) {
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Cache-Control"] = []string{"no-store"}
	h["X-Ratelimit-Error"] = []string{"internal"}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte("{\"allowed\":true,\"rule\":\"\"}\n"))
}
