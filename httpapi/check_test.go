package httpapi

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// limiterLike answers like the real limiter for the inputs the tests use:
// rules "default" (600 per minute) and "api"; anything else is unknown.
func limiterLike(req limiter.Request, d *limiter.Decision) error {
	switch {
	case req.Rule != "" && req.Rule != "default" && req.Rule != "api":
		return fmt.Errorf("%w: %q", limiter.ErrUnknownRule, req.Rule)
	case req.Hits > 600:
		return fmt.Errorf("%w: hits %d exceed the limit 600 of \"default\"", limiter.ErrInvalidHits, req.Hits)
	case req.Limit != nil && req.Limit.Limit < 1:
		return fmt.Errorf("%w: field \"limit\": must be an integer between 1 and 2147483647, got %d", limiter.ErrInvalidLimit, req.Limit.Limit)
	}
	*d = allowed()
	return nil
}

func TestBadRequests(t *testing.T) {
	long := strings.Repeat("k", limiter.MaxKeyBytes+1)
	tests := []struct {
		name       string
		cfg        func(*Config)
		req        *http.Request
		wantStatus int
		wantReason string
		wantErr    string // a substring of the error text
		reachesLim bool   // the error comes from the Checker
	}{
		{name: "no key, no header", req: get("/check"),
			wantStatus: 400, wantReason: "missing_key", wantErr: "missing key: no key parameter and no address in the X-Forwarded-For header"},
		{name: "no key, only rule and hits", req: get("/check?rule=api&hits=2"),
			wantStatus: 400, wantReason: "missing_key", wantErr: "missing key"},
		{name: "empty first X-Forwarded-For address", req: get("/check", "X-Forwarded-For", " , 203.0.113.7"),
			wantStatus: 400, wantReason: "missing_key", wantErr: "no address in the X-Forwarded-For header"},
		{name: "custom header absent though X-Forwarded-For is set", cfg: func(c *Config) { c.KeyHeader = "X-Api-Key" },
			req:        get("/check", "X-Forwarded-For", "203.0.113.7"),
			wantStatus: 400, wantReason: "missing_key", wantErr: "no address in the X-Api-Key header"},
		{name: "empty key parameter", req: get("/check?key=", "X-Forwarded-For", "203.0.113.7"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is empty"},
		{name: "key parameter without =", req: get("/check?key"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is empty"},
		{name: "key over 1 KiB", req: get("/check?key=" + long),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is longer than 1024 bytes"},
		{name: "header key over 1 KiB", req: get("/check", "X-Forwarded-For", long+", 10.0.0.1"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key from the X-Forwarded-For header is longer than 1024 bytes"},
		{name: "non-UTF-8 key", req: get("/check?key=ab%FF"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is not valid UTF-8"},
		{name: "non-UTF-8 header key", req: get("/check", "X-Forwarded-For", "\xc3\x28"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key from the X-Forwarded-For header is not valid UTF-8"},
		{name: "hits not a number", req: get("/check?key=a&hits=abc"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "hits fractional", req: get("/check?key=a&hits=1.5"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "hits empty", req: get("/check?key=a&hits="),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "hits hex", req: get("/check?key=a&hits=0x10"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "hits zero", req: get("/check?key=a&hits=0"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits must be at least 1"},
		{name: "hits negative", req: get("/check?key=a&hits=-3"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits must be at least 1"},
		{name: "hits beyond int64", req: get("/check?key=a&hits=99999999999999999999"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is out of range"},
		{name: "hits over the limit", req: get("/check?key=a&hits=601"), reachesLim: true,
			wantStatus: 400, wantReason: "invalid_hits", wantErr: `limiter: invalid hits: hits 601 exceed the limit 600 of "default"`},
		{name: "unknown rule", req: get("/check?key=a&rule=nope"), reachesLim: true,
			wantStatus: 400, wantReason: "unknown_rule", wantErr: `unknown rule "nope"`},
		{name: "limit without window", req: get("/check?key=a&limit=10"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "limit needs window"},
		{name: "window without limit", req: get("/check?key=a&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "window needs limit"},
		{name: "limit and window with a rule", req: get("/check?key=a&rule=api&limit=10&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "rule must be absent with limit and window"},
		{name: "limit and window with an empty rule", req: get("/check?key=a&rule=&limit=10&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "rule must be absent"},
		{name: "limit not a number", req: get("/check?key=a&limit=ten&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "limit is not an integer"},
		{name: "limit fractional", req: get("/check?key=a&limit=1.5&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "limit is not an integer"},
		{name: "limit beyond int64", req: get("/check?key=a&limit=99999999999999999999&window=1s"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "limit is out of range"},
		{name: "window not a duration", req: get("/check?key=a&limit=10&window=60"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: `window must be a duration such as "60s" or "500ms", got "60"`},
		{name: "limit given twice", req: get("/check?key=a&limit=10&limit=20&window=1s"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: "query parameter limit is given more than once"},
		{name: "limit zero", req: get("/check?key=a&limit=0&window=1s"), reachesLim: true,
			wantStatus: 400, wantReason: "invalid_limit", wantErr: `field "limit": must be an integer between 1 and 2147483647, got 0`},
		{name: "JSON limit as a string", req: post(`{"key":"a","limit":"10","window":"1s"}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "limit is not an integer"},
		{name: "JSON window as a number", req: post(`{"key":"a","limit":10,"window":1}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `field "window" must be a string`},
		{name: "JSON limit with a rule", req: post(`{"key":"a","rule":"api","limit":10,"window":"1s"}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "rule must be absent"},
		{name: "JSON window without limit", req: post(`{"key":"a","window":"1s"}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_limit", wantErr: "window needs limit"},
		{name: "JSON Limit in another case", req: post(`{"key":"a","Limit":10,"window":"1s"}`, "application/json"),
			wantStatus: 400, wantReason: "unknown_field", wantErr: `unknown field "Limit"; the fields are key, rule, hits, limit and window, in lower case`},
		{name: "unknown rule, long name is cut", req: get("/check?key=a&rule=" + strings.Repeat("r", 500)), reachesLim: true,
			wantStatus: 400, wantReason: "unknown_rule", wantErr: `unknown rule "` + strings.Repeat("r", 64) + `"...`},
		{name: "unknown parameter", req: get("/check?key=a&hit=5"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: `unknown query parameter "hit"; the parameters are key, rule, hits, limit and window`},
		{name: "repeated key", req: get("/check?key=a&key=b"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: "query parameter key is given more than once"},
		{name: "repeated hits", req: get("/check?key=a&hits=1&hits=2"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: "query parameter hits is given more than once"},
		{name: "semicolon separator", req: get("/check?key=a;hits=2"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: "';' is not a parameter separator"},
		{name: "bad percent-encoding", req: get("/check?key=%zz"),
			wantStatus: 400, wantReason: "invalid_query", wantErr: `bad percent-encoding in "key=%zz"`},
		{name: "JSON truncated", req: post(`{"key":"a"`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: "malformed JSON: unexpected end of the body"},
		{name: "JSON syntax error", req: post(`{"key":"a",}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: "malformed JSON: invalid character '}'"},
		{name: "JSON unknown field", req: post(`{"key":"a","hitz":2}`, "application/json"),
			wantStatus: 400, wantReason: "unknown_field", wantErr: `unknown field "hitz"; the fields are key, rule, hits, limit and window`},
		{name: "JSON duplicate field", req: post(`{"key":"k","hits":1,"hits":600}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: field "hits" is given more than once`},
		{name: "JSON duplicate key", req: post(`{"key":"a","key":"b"}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: field "key" is given more than once`},
		{name: "JSON field in another case", req: post(`{"Key":"a","HITS":5}`, "application/json"),
			wantStatus: 400, wantReason: "unknown_field", wantErr: `unknown field "Key"; the fields are key, rule, hits, limit and window, in lower case`},
		{name: "JSON lone high surrogate", req: post(`{"key":"a\ud800"}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: \ud800 is a lone surrogate, not a character`},
		{name: "JSON lone low surrogate", req: post(`{"key":"a\udc00b"}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: \udc00 is a lone surrogate, not a character`},
		{name: "JSON high surrogate then not a low one", req: post(`{"key":"\ud83d\u0041"}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: \ud83d is a lone surrogate, not a character`},
		{name: "JSON key not a string", req: post(`{"key":5}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: `malformed JSON: field "key" must be a string`},
		{name: "JSON not an object", req: post(`["a"]`, ""),
			wantStatus: 400, wantReason: "malformed_json", wantErr: "malformed JSON: the body must be an object"},
		{name: "JSON trailing data", req: post(`{"key":"a"} {"key":"b"}`, "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: "malformed JSON: data after the object"},
		{name: "JSON not UTF-8", req: post("{\"key\":\"a\xff\"}", "application/json"),
			wantStatus: 400, wantReason: "malformed_json", wantErr: "malformed JSON: body is not valid UTF-8"},
		{name: "JSON hits as string", req: post(`{"key":"a","hits":"5"}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "JSON hits exponent", req: post(`{"key":"a","hits":1e3}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "JSON hits fractional", req: post(`{"key":"a","hits":2.0}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits is not an integer"},
		{name: "JSON hits zero", req: post(`{"key":"a","hits":0}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "hits must be at least 1"},
		{name: "JSON hits over the limit", req: post(`{"key":"a","hits":601}`, "application/json"), reachesLim: true,
			wantStatus: 400, wantReason: "invalid_hits", wantErr: "exceed the limit 600"},
		{name: "JSON empty key", req: post(`{"key":""}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is empty"},
		{name: "JSON key over 1 KiB", req: post(`{"key":"`+long+`"}`, "application/json"),
			wantStatus: 400, wantReason: "invalid_key", wantErr: "key is longer than 1024 bytes"},
		{name: "JSON unknown rule", req: post(`{"key":"a","rule":"nope"}`, "application/json"), reachesLim: true,
			wantStatus: 400, wantReason: "unknown_rule", wantErr: `unknown rule "nope"`},
		{name: "JSON without key or header", req: post(`{"rule":"api"}`, "application/json"),
			wantStatus: 400, wantReason: "missing_key", wantErr: "missing key"},
		{name: "query alongside a JSON body", req: func() *http.Request {
			r := post(`{"key":"a"}`, "application/json")
			r.URL.RawQuery = "hits=2"
			return r
		}(), wantStatus: 400, wantReason: "invalid_query", wantErr: "query parameters are not accepted with a JSON body"},
		{name: "body too large", req: post(`{"key":"`+strings.Repeat("a", 5000)+`"}`, "application/json"),
			wantStatus: 413, wantReason: "body_too_large", wantErr: "request body is larger than 4096 bytes"},
		{name: "body too large, length unknown", req: func() *http.Request {
			r := post(`{"key":"`+strings.Repeat("a", 5000)+`"}`, "application/json")
			r.ContentLength = -1 // chunked
			r.Body = io.NopCloser(r.Body)
			return r
		}(), wantStatus: 413, wantReason: "body_too_large", wantErr: "request body is larger than 4096 bytes"},
		{name: "body over a smaller configured cap", cfg: func(c *Config) { c.MaxBodyBytes = 16 },
			req:        post(`{"key":"abcdefghijklmnop"}`, "application/json"),
			wantStatus: 413, wantReason: "body_too_large", wantErr: "request body is larger than 16 bytes"},
		{name: "form body", req: post(`key=a`, "application/x-www-form-urlencoded"),
			wantStatus: 415, wantReason: "unsupported_media_type", wantErr: `Content-Type must be application/json, got "application/x-www-form-urlencoded"`},
		{name: "text body", req: post(`{"key":"a"}`, "text/plain"),
			wantStatus: 415, wantReason: "unsupported_media_type", wantErr: "Content-Type must be application/json"},
		{name: "unparsable Content-Type", req: post(`{"key":"a"}`, "application/json; charset"),
			wantStatus: 415, wantReason: "unsupported_media_type", wantErr: "Content-Type must be application/json"},
		{name: "PUT", req: httptest.NewRequest(http.MethodPut, "/check?key=a", nil),
			wantStatus: 405, wantReason: "method_not_allowed", wantErr: "method PUT not allowed; use GET or POST"},
		{name: "HEAD", req: httptest.NewRequest(http.MethodHead, "/check?key=a", nil),
			wantStatus: 405, wantReason: "method_not_allowed", wantErr: "method HEAD not allowed"},
		{name: "absurd method is cut in the message", req: httptest.NewRequest(strings.Repeat("M", 5000), "/check?key=a", nil),
			wantStatus: 405, wantReason: "method_not_allowed", wantErr: "method " + strings.Repeat("M", 32) + "... not allowed"},
		{name: "DELETE", req: httptest.NewRequest(http.MethodDelete, "/check?key=a", nil),
			wantStatus: 405, wantReason: "method_not_allowed", wantErr: "method DELETE not allowed"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			rc := &recorder{decide: limiterLike}
			a, reg := newAPI(t, cfg, rc, nil)
			rec := serve(a, tc.req)
			if rec.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d; body %s", rec.Code, tc.wantStatus, rec.Body)
			}
			body := jsonBody(t, rec)
			msg, _ := body["error"].(string)
			if !strings.Contains(msg, tc.wantErr) {
				t.Errorf("error %q does not contain %q", msg, tc.wantErr)
			}
			if len(body) != 1 {
				t.Errorf("body %s has fields besides error", rec.Body)
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type %q", got)
			}
			if got := rec.Header().Get("Cache-Control"); got != "no-store" {
				t.Errorf("Cache-Control %q", got)
			}
			if tc.wantStatus == 405 {
				if got := rec.Header().Get("Allow"); got != "GET, POST" {
					t.Errorf("Allow %q, want %q", got, "GET, POST")
				}
			}
			for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
				if v := rec.Header().Get(h); v != "" {
					t.Errorf("bad request carries %s: %q", h, v)
				}
			}
			if n := len(rc.calls()); tc.reachesLim != (n > 0) {
				t.Errorf("Checker called %d times; want called: %v", n, tc.reachesLim)
			}
			if got := counterValue(t, reg, "limiterd_bad_requests_total", map[string]string{"reason": tc.wantReason}); got != 1 {
				t.Errorf("limiterd_bad_requests_total{reason=%q} = %v, want 1", tc.wantReason, got)
			}
			if got := counterValue(t, reg, "limiterd_decisions_total", map[string]string{"rule": "default", "outcome": "allowed"}); got != 0 {
				t.Errorf("a bad request was counted as a decision")
			}
		})
	}
}

// TestRequestParsing checks what reaches the Checker for good requests.
func TestRequestParsing(t *testing.T) {
	key1024 := strings.Repeat("k", limiter.MaxKeyBytes)
	withQuery := func(r *http.Request, q string) *http.Request { r.URL.RawQuery = q; return r }
	tests := []struct {
		name string
		cfg  func(*Config)
		req  *http.Request
		want limiter.Request
	}{
		{"key only", nil, get("/check?key=203.0.113.7"), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"all parameters", nil, get("/check?key=api:acme&rule=api&hits=5"), limiter.Request{Key: "api:acme", Rule: "api", Hits: 5}},
		{"order does not matter", nil, get("/check?hits=5&rule=api&key=a"), limiter.Request{Key: "a", Rule: "api", Hits: 5}},
		{"percent and plus decoding", nil, get("/check?key=a%20b+c%2Bd%C3%A9"), limiter.Request{Key: "a b c+dé", Hits: 1}},
		{"escaped parameter name", nil, get("/check?%6Bey=a"), limiter.Request{Key: "a", Hits: 1}},
		{"empty rule selects by key", nil, get("/check?key=a&rule="), limiter.Request{Key: "a", Hits: 1}},
		{"stray ampersands", nil, get("/check?&&key=a&"), limiter.Request{Key: "a", Hits: 1}},
		{"key of exactly 1 KiB", nil, get("/check?key=" + key1024), limiter.Request{Key: key1024, Hits: 1}},
		{"leading zeros and sign in hits", nil, get("/check?key=a&hits=%2B007"), limiter.Request{Key: "a", Hits: 7}},
		{"XFF single address", nil, get("/check", "X-Forwarded-For", "203.0.113.7"), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"XFF first of several", nil, get("/check", "X-Forwarded-For", "203.0.113.7, 10.0.0.1, 10.0.0.2"), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"XFF spaces and tabs trimmed", nil, get("/check", "X-Forwarded-For", " \t203.0.113.7 \t,10.0.0.1"), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"XFF IPv6", nil, get("/check", "X-Forwarded-For", "2001:db8::1"), limiter.Request{Key: "2001:db8::1", Hits: 1}},
		{"XFF first header line wins", nil, get("/check", "X-Forwarded-For", "203.0.113.7, 10.0.0.1", "X-Forwarded-For", "192.0.2.1"), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"XFF with rule from the query", nil, get("/check?rule=api&hits=2", "X-Forwarded-For", "203.0.113.7"), limiter.Request{Key: "203.0.113.7", Rule: "api", Hits: 2}},
		{"query key wins over header", nil, get("/check?key=q", "X-Forwarded-For", "203.0.113.7"), limiter.Request{Key: "q", Hits: 1}},
		{"custom header, whole value", func(c *Config) { c.KeyHeader = "X-Api-Key" },
			get("/check", "X-Api-Key", "  key-42, with comma ", "X-Forwarded-For", "203.0.113.7"), limiter.Request{Key: "key-42, with comma", Hits: 1}},
		{"custom header named in lower case", func(c *Config) { c.KeyHeader = "x-api-key" },
			get("/check", "X-API-KEY", "key-42"), limiter.Request{Key: "key-42", Hits: 1}},
		{"POST JSON", nil, post(`{"key":"api:acme","rule":"api","hits":3}`, "application/json"), limiter.Request{Key: "api:acme", Rule: "api", Hits: 3}},
		{"stated limit", nil, get("/check?key=a&limit=10&window=1s"), limiter.Request{Key: "a", Hits: 1, Limit: &limiter.LimitSpec{Limit: 10, Window: time.Second}}},
		{"stated limit, window in minutes, hits", nil, get("/check?window=1m&hits=2&limit=600&key=a"), limiter.Request{Key: "a", Hits: 2, Limit: &limiter.LimitSpec{Limit: 600, Window: time.Minute}}},
		{"stated limit, key from header", nil, get("/check?limit=5&window=500ms", "X-Forwarded-For", "203.0.113.7"), limiter.Request{Key: "203.0.113.7", Hits: 1, Limit: &limiter.LimitSpec{Limit: 5, Window: 500 * time.Millisecond}}},
		{"POST JSON stated limit", nil, post(`{"key":"a","limit":10,"window":"500ms","hits":2}`, "application/json"), limiter.Request{Key: "a", Hits: 2, Limit: &limiter.LimitSpec{Limit: 10, Window: 500 * time.Millisecond}}},
		{"POST JSON stated limit, rule null", nil, post(`{"key":"a","rule":null,"limit":10,"window":"1s"}`, "application/json"), limiter.Request{Key: "a", Hits: 1, Limit: &limiter.LimitSpec{Limit: 10, Window: time.Second}}},
		{"POST JSON without Content-Type", nil, post(`{"key":"a"}`, ""), limiter.Request{Key: "a", Hits: 1}},
		{"POST JSON with charset", nil, post(`{"key":"a"}`, "application/json; charset=utf-8"), limiter.Request{Key: "a", Hits: 1}},
		{"POST +json media type", nil, post(`{"key":"a"}`, "application/vnd.limiterd+json"), limiter.Request{Key: "a", Hits: 1}},
		{"POST JSON nulls are absent", nil, post(`{"key":"a","rule":null,"hits":null}`, "application/json"), limiter.Request{Key: "a", Hits: 1}},
		{"POST JSON spaces around hits", nil, post("{ \"hits\" :\n 7 , \"key\":\"a\" }", "application/json"), limiter.Request{Key: "a", Hits: 7}},
		{"POST JSON escapes", nil, post(`{"key":"a\"b\\c\u00e9\ud83d\ude00"}`, "application/json"), limiter.Request{Key: "a\"b\\cé😀", Hits: 1}},
		{"POST JSON key from header", nil, func() *http.Request {
			r := post(`{"hits":2}`, "application/json")
			r.Header.Set("X-Forwarded-For", "203.0.113.7")
			return r
		}(), limiter.Request{Key: "203.0.113.7", Hits: 2}},
		{"POST JSON null body, key from header", nil, func() *http.Request {
			r := post(`null`, "application/json")
			r.Header.Set("X-Forwarded-For", "203.0.113.7")
			return r
		}(), limiter.Request{Key: "203.0.113.7", Hits: 1}},
		{"POST empty body uses the query", nil, withQuery(post("", "multipart/form-data"), "key=a&hits=2"), limiter.Request{Key: "a", Hits: 2}},
		{"POST blank body uses the query", nil, withQuery(post(" \r\n", ""), "key=a"), limiter.Request{Key: "a", Hits: 1}},
		{"POST empty body, key from header", nil, func() *http.Request {
			r := post("", "")
			r.Header.Set("X-Forwarded-For", "203.0.113.7")
			return r
		}(), limiter.Request{Key: "203.0.113.7", Hits: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testConfig()
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			rc := &recorder{}
			a, _ := newAPI(t, cfg, rc, nil)
			rec := serve(a, tc.req)
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, body %s", rec.Code, rec.Body)
			}
			calls := rc.calls()
			if len(calls) != 1 {
				t.Fatalf("Checker called %d times, want 1", len(calls))
			}
			if !reflect.DeepEqual(calls[0], tc.want) {
				t.Errorf("Checker got %+v, want %+v", calls[0], tc.want)
			}
			if !rc.times[0].Equal(t0()) {
				t.Errorf("Checker got time %v, want Config.Now() %v", rc.times[0], t0())
			}
		})
	}
}

func TestInternalErrorsAllow(t *testing.T) {
	tests := []struct {
		name    string
		check   checkFunc
		wantLog string
	}{
		{"plain error", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			return errors.New("counter exploded")
		}, "counter exploded"},
		{"invalid rules are not the client's fault", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			return fmt.Errorf("%w: oops", limiter.ErrInvalidRules)
		}, "oops"},
		{"panic", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			panic("boom")
		}, "panic in Check: boom"},
		{"panic with an error value after a partial write", func(_ time.Time, _ limiter.Request, d *limiter.Decision) error {
			*d = denied()
			var m map[string]int
			m["x"]++ // assignment to entry in nil map
			return nil
		}, "nil map"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logBuf strings.Builder
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			a, reg := newAPI(t, testConfig(), tc.check, log)
			rec := serve(a, get("/check?key=a&rule=api"))
			if rec.Code != http.StatusOK {
				t.Fatalf("status %d, want 200 (NFR3)", rec.Code)
			}
			if got := rec.Header().Get("X-RateLimit-Error"); got != "internal" {
				t.Errorf("X-RateLimit-Error %q, want internal", got)
			}
			if got := rec.Body.String(); got != "{\"allowed\":true,\"rule\":\"\"}\n" {
				t.Errorf("body %q", got)
			}
			for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
				if v := rec.Header().Get(h); v != "" {
					t.Errorf("internal error carries %s: %q", h, v)
				}
			}
			if !strings.Contains(logBuf.String(), tc.wantLog) || !strings.Contains(logBuf.String(), "level=ERROR") {
				t.Errorf("log %q does not report %q at ERROR", logBuf.String(), tc.wantLog)
			}
			if strings.Contains(logBuf.String(), "key=") {
				t.Errorf("log %q contains the client key", logBuf.String())
			}
			if got := counterValue(t, reg, "limiterd_check_errors_total", nil); got != 1 {
				t.Errorf("limiterd_check_errors_total = %v, want 1", got)
			}
			if got := counterValue(t, reg, "limiterd_decisions_total", map[string]string{"rule": "", "outcome": "error"}); got != 1 {
				t.Errorf(`limiterd_decisions_total{rule="",outcome="error"} = %v, want 1`, got)
			}
			// The node keeps working after the failure.
			rec = serve(a, get("/check?key=a"))
			if rec.Code != http.StatusOK {
				t.Errorf("second request: status %d", rec.Code)
			}
		})
	}
}

func TestWrappedSentinelsAreBadRequests(t *testing.T) {
	// errors.Is, not ==: a limiter that wraps its sentinels deeper still maps to 400.
	for _, sentinel := range []error{limiter.ErrInvalidKey, limiter.ErrInvalidHits, limiter.ErrUnknownRule} {
		t.Run(sentinel.Error(), func(t *testing.T) {
			a, _ := newAPI(t, testConfig(), checkFunc(func(time.Time, limiter.Request, *limiter.Decision) error {
				return fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", sentinel))
			}), nil)
			if rec := serve(a, get("/check?key=a")); rec.Code != http.StatusBadRequest {
				t.Errorf("status %d, want 400", rec.Code)
			}
		})
	}
}
