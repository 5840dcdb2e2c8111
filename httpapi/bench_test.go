package httpapi

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
)

// benchRules never deny "big" keys, so the benchmark measures the common
// allowed path, and deny "small" keys after the first request.
const benchRules = `
rules:
  - name: small
    match: "small:*"
    limit: 1
    window: 60s
  - name: default
    limit: 2147483647
    window: 60s
`

// discardWriter is a ResponseWriter that keeps only the status, so that the
// benchmark counts the handler's allocations and not a recorder's.
type discardWriter struct {
	h    http.Header
	code int
}

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(code int)        { w.code = code }
func (w *discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// BenchmarkServeCheck measures /check over the real limiter for a key that
// is already tracked. The recorder variant is what a test sees; the
// discard variants show the handler's own cost.
func BenchmarkServeCheck(b *testing.B) {
	now := t0()
	a := realAPI(b, benchRules, &now)

	run := func(b *testing.B, r *http.Request, reset func(), wantCode int) {
		w := &discardWriter{h: http.Header{}}
		a.ServeHTTP(w, r) // track the key
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			reset()
			a.ServeHTTP(w, r)
		}
		if w.code != wantCode {
			b.Fatalf("status %d, want %d", w.code, wantCode)
		}
	}
	noReset := func() {}

	b.Run("GET/recorder", func(b *testing.B) {
		r := get("/check?key=203.0.113.7")
		serve(a, r)
		b.ReportAllocs()
		var rec *httptest.ResponseRecorder
		for b.Loop() {
			rec = httptest.NewRecorder()
			a.ServeHTTP(rec, r)
		}
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d", rec.Code)
		}
	})
	b.Run("GET/query", func(b *testing.B) {
		run(b, get("/check?key=203.0.113.7&rule=default"), noReset, http.StatusOK)
	})
	b.Run("GET/X-Forwarded-For", func(b *testing.B) {
		run(b, get("/check", "X-Forwarded-For", "203.0.113.7, 10.0.0.1"), noReset, http.StatusOK)
	})
	b.Run("GET/denied", func(b *testing.B) {
		run(b, get("/check?key=small:x"), noReset, http.StatusTooManyRequests)
	})
	b.Run("POST/JSON", func(b *testing.B) {
		body := []byte(`{"key":"203.0.113.7","hits":1}`)
		br := bytes.NewReader(body)
		r := httptest.NewRequest(http.MethodPost, "/check", io.NopCloser(br))
		r.ContentLength = int64(len(body))
		r.Header.Set("Content-Type", "application/json")
		run(b, r, func() { br.Reset(body) }, http.StatusOK)
	})
	b.Run("GET/parallel", func(b *testing.B) {
		var next atomic.Int64
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			r := get("/check?key=client-" + strconv.FormatInt(next.Add(1), 10))
			w := &discardWriter{h: http.Header{}}
			for pb.Next() {
				clear(w.h)
				a.ServeHTTP(w, r)
			}
			if w.code != 0 && w.code != http.StatusOK { // 0: this goroutine ran no iteration
				b.Errorf("status %d", w.code)
			}
		})
	})
}
