package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/limiter"
)

// errPrecondition marks a request that reached the Checker although the
// parser should have rejected it; it surfaces as X-RateLimit-Error.
var errPrecondition = errors.New("test: invalid request reached the Checker")

// FuzzParseCheckRequest feeds arbitrary methods, queries, bodies,
// Content-Types and key headers to /check over the real limiter. Whatever is
// sent, the handler must not panic, must answer with a status from the
// documented set (never 5xx) and a JSON object, and must pass the limiter
// only requests that satisfy its preconditions.
func FuzzParseCheckRequest(f *testing.F) {
	seeds := []struct {
		method      byte
		query       string
		body        string
		contentType string
		xff         string
	}{
		{0, "key=a", "", "", ""},
		{0, "key=api:x&rule=api&hits=3", "", "", ""},
		{0, "", "", "", "203.0.113.7, 10.0.0.1"},
		{0, "key=%FF&hits=-1", "", "", ""},
		{0, "key=a;b&&hits=1e3&x=%zz", "", "", ""},
		{1, "", `{"key":"a","rule":"api","hits":2}`, "application/json", ""},
		{1, "", `{"key":"a","hits":1.5,"x":1}`, "", ""},
		{1, "key=a", "", "text/plain", ""},
		{1, "", `{"key":"a"} trailing`, "application/json; charset=utf-8", ""},
		{1, "", "[\"\xff\"]", "application/json", ""},
		{1, "", `{"rule":null}`, "", " \t, "},
		{2, "key=a", "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.query, []byte(s.body), s.contentType, s.xff)
	}
	rs, err := limiter.Parse("fuzz.yaml", []byte(integrationRules))
	if err != nil {
		f.Fatal(err)
	}
	lim := newRealLimiter(f, rs)
	guard := checkFunc(func(t time.Time, req limiter.Request, d *limiter.Decision) error {
		if req.Key == "" || len(req.Key) > limiter.MaxKeyBytes || !utf8.ValidString(req.Key) || req.Hits < 1 {
			return errPrecondition
		}
		return lim.Check(t, req, d)
	})
	a, _ := newAPI(f, testConfig(), guard, nil)
	methods := []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodHead}

	f.Fuzz(func(t *testing.T, method byte, query string, body []byte, contentType, xff string) {
		r := httptest.NewRequest(methods[int(method)%len(methods)], "/check", bytes.NewReader(body))
		r.URL.RawQuery = query
		if contentType != "" {
			r.Header["Content-Type"] = []string{contentType}
		}
		if xff != "" {
			r.Header["X-Forwarded-For"] = []string{xff}
		}
		rec := serve(a, r)
		switch rec.Code {
		case 200, 400, 405, 413, 415, 429:
		default:
			t.Fatalf("status %d for %q %q %q", rec.Code, query, body, contentType)
		}
		if e := rec.Header().Get("X-RateLimit-Error"); e != "" {
			t.Fatalf("the Checker got a request the parser should have rejected: %q %q", query, body)
		}
		if rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("Content-Type %q", rec.Header().Get("Content-Type"))
		}
		m := jsonBody(t, rec)
		if _, isErr := m["error"]; isErr != (rec.Code != 200 && rec.Code != 429) {
			t.Fatalf("status %d with body %s", rec.Code, rec.Body)
		}
	})
}
