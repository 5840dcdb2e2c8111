package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// result classifies one node attempt.
type result uint8

const (
	// decided: the node answered 200 or 429 with a decision.
	decided result = iota
	// refused: the node answered that the request is bad input.
	refused
	// undecided: the node answered, but could not decide (internal error).
	undecided
	// failed: no usable answer, the node's fault; it is backed off.
	failed
	// abandoned: the caller's context ended, or the call's deadline cut the
	// attempt short; nothing is known about the node.
	abandoned
)

// maxBody bounds what is read of an answer: a /check body is about 150
// bytes, and a node (or whatever answers in its place) must not make the
// client buffer much.
const maxBody = 64 << 10

// maxMillis keeps a duration in milliseconds from overflowing.
const maxMillis = int64(1<<63-1) / int64(time.Millisecond)

// checkBody is the JSON body of a /check answer.
type checkBody struct {
	Allowed      *bool  `json:"allowed"`
	Limit        int64  `json:"limit"`
	Remaining    int64  `json:"remaining"`
	RetryAfterMs int64  `json:"retry_after_ms"`
	ResetMs      int64  `json:"reset_ms"`
	Rule         string `json:"rule"`
	Shadow       bool   `json:"shadow"`
	WouldAllow   *bool  `json:"would_allow"`
	Untracked    bool   `json:"untracked"`
	Error        string `json:"error"`
}

// attempt asks one node, starting at now, waiting at most
// Config.AttemptTimeout and never past the call's deadline.
func (c *Client) attempt(ctx context.Context, nd *node, query string, now, callDeadline time.Time) (Decision, result, error) {
	dl := now.Add(c.cfg.AttemptTimeout)
	full := true // the attempt has its whole AttemptTimeout
	if callDeadline.Before(dl) {
		dl, full = callDeadline, false
	}
	actx, cancel := context.WithDeadline(ctx, dl)
	defer cancel()

	hreq, err := http.NewRequestWithContext(actx, http.MethodGet, nd.check+query, nil)
	if err != nil {
		// The base URL was validated and the query is escaped: a bug.
		return Decision{}, failed, nodeErr(nd, err)
	}
	resp, err := c.cfg.HTTPClient.Do(hreq)
	if err != nil {
		return Decision{}, classify(ctx, full, err), nodeErr(nd, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Decision{}, classify(ctx, full, err), nodeErr(nd, fmt.Errorf("reading the answer: %w", err))
	}
	if len(raw) > maxBody {
		return Decision{}, failed, nodeErr(nd, fmt.Errorf("answer %d %s is larger than %d bytes", resp.StatusCode, http.StatusText(resp.StatusCode), maxBody))
	}
	return decode(nd, resp, raw)
}

// classify tells a failure of the node from one of the caller: a timeout
// is the node's only when it had its whole AttemptTimeout.
func classify(ctx context.Context, full bool, err error) result {
	switch {
	case ctx.Err() != nil:
		return abandoned
	case !full && errors.Is(err, context.DeadlineExceeded):
		return abandoned
	}
	return failed
}

// nodeErr names the node in err. The request URL, which net/http puts in
// its errors, is left out: it holds the key, which may be an API key.
func nodeErr(nd *node, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return fmt.Errorf("node %s: %w", nd.base, err)
}

// decode reads a node's answer.
func decode(nd *node, resp *http.Response, raw []byte) (Decision, result, error) {
	var b checkBody
	jsonErr := json.Unmarshal(raw, &b)
	switch resp.StatusCode {
	case http.StatusOK, http.StatusTooManyRequests:
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge, http.StatusRequestURITooLong,
		http.StatusUnsupportedMediaType, http.StatusRequestHeaderFieldsTooLarge:
		msg := b.Error
		if jsonErr != nil || msg == "" {
			msg = resp.Status
		}
		return Decision{}, refused, fmt.Errorf("%w: %s", ErrBadRequest, msg)
	default:
		// 5xx, and 404 or 405 from something that is not limiterd's /check
		// (a wrong address or path prefix): the node cannot answer.
		return Decision{}, failed, nodeErr(nd, fmt.Errorf("unexpected status %s", resp.Status))
	}
	if jsonErr != nil {
		return Decision{}, failed, nodeErr(nd, fmt.Errorf("malformed %d answer: %w", resp.StatusCode, jsonErr))
	}
	if v := resp.Header.Get("X-Ratelimit-Error"); v != "" {
		// The node failed open itself: it allowed the request under no
		// rule, which is no decision.
		return Decision{}, undecided, nodeErr(nd, fmt.Errorf("the node could not decide (X-RateLimit-Error: %s)", v))
	}
	switch {
	case b.Allowed == nil:
		return Decision{}, failed, nodeErr(nd, fmt.Errorf("malformed %d answer: no \"allowed\"", resp.StatusCode))
	case *b.Allowed != (resp.StatusCode == http.StatusOK):
		return Decision{}, failed, nodeErr(nd, fmt.Errorf("malformed answer: status %d with \"allowed\":%v", resp.StatusCode, *b.Allowed))
	case b.Limit < 0 || b.Remaining < 0 || b.RetryAfterMs < 0 || b.ResetMs < 0 ||
		b.RetryAfterMs > maxMillis || b.ResetMs > maxMillis:
		return Decision{}, failed, nodeErr(nd, errors.New("malformed answer: a count or duration out of range"))
	}
	d := Decision{
		Allowed:    *b.Allowed,
		Limit:      b.Limit,
		Remaining:  b.Remaining,
		RetryAfter: time.Duration(b.RetryAfterMs) * time.Millisecond,
		Reset:      time.Duration(b.ResetMs) * time.Millisecond,
		Rule:       b.Rule,
		Shadow:     b.Shadow,
		WouldAllow: *b.Allowed,
		Untracked:  b.Untracked,
		Headers:    rateLimitFields(resp.Header),
	}
	if b.Shadow && b.WouldAllow != nil {
		d.WouldAllow = *b.WouldAllow
	}
	return d, decided, nil
}

// rateLimitFields picks the RateLimit fields out of an answer's header.
// The value slices are capped so that an Add by whoever receives them
// copies instead of writing into the response's shared backing array.
func rateLimitFields(h http.Header) http.Header {
	var out http.Header
	for _, k := range [...]string{"Ratelimit-Policy", "Ratelimit"} {
		if v := h[k]; len(v) > 0 {
			if out == nil {
				out = make(http.Header, 2)
			}
			out[k] = v[:len(v):len(v)]
		}
	}
	return out
}
