package ratelimitheader

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

func TestFields(t *testing.T) {
	t.Run("ceilSeconds", func(t *testing.T) {
		for _, tc := range []struct {
			in   time.Duration
			want int64
		}{
			{-time.Second, 0}, {0, 0}, {1, 1}, {time.Millisecond, 1}, {999 * time.Millisecond, 1},
			{time.Second, 1}, {time.Second + 1, 2}, {60 * time.Second, 60}, {60*time.Second + time.Millisecond, 61},
			{time.Duration(1<<63 - 1), 9223372037},
		} {
			if got := CeilSeconds(tc.in); got != tc.want {
				t.Errorf("CeilSeconds(%v) = %d, want %d", tc.in, got, tc.want)
			}
		}
	})
	t.Run("ceilMillis", func(t *testing.T) {
		for _, tc := range []struct {
			in   time.Duration
			want int64
		}{
			{-1, 0}, {0, 0}, {1, 1}, {time.Millisecond, 1}, {time.Millisecond + 1, 2}, {4200 * time.Millisecond, 4200},
		} {
			if got := CeilMillis(tc.in); got != tc.want {
				t.Errorf("CeilMillis(%v) = %d, want %d", tc.in, got, tc.want)
			}
		}
	})
	t.Run("Retry-After", func(t *testing.T) {
		for _, tc := range []struct {
			in   time.Duration
			want string
		}{
			{0, "1"}, {-time.Second, "1"}, {time.Millisecond, "1"}, {time.Second, "1"}, {1001 * time.Millisecond, "2"},
			{59*time.Second + 1, "60"},
		} {
			if got := string(AppendRetryAfter(nil, tc.in)); got != tc.want {
				t.Errorf("Retry-After for %v = %q, want %q", tc.in, got, tc.want)
			}
		}
	})
	t.Run("sf-string", func(t *testing.T) {
		for _, tc := range []struct{ in, want string }{
			{"default", `"default"`},
			{"", `""`},
			{`a"b`, `"a\"b"`},
			{`a\b`, `"a\\b"`},
			{"a\r\nb", `"a??b"`},
			{"é", `"??"`},
			{"\x7f~ ", `"?~ "`},
		} {
			if got := string(AppendSFString(nil, tc.in)); got != tc.want {
				t.Errorf("sf-string of %q = %s, want %s", tc.in, got, tc.want)
			}
		}
	})
	t.Run("policy and remaining", func(t *testing.T) {
		ls := []limiter.LimitResult{
			{Policy: "api/1s", Limit: 10, Window: time.Second, Remaining: 9, Reset: 400 * time.Millisecond},
			{Policy: "api/60s", Limit: 600, Window: time.Minute, Remaining: -3, Reset: 54001 * time.Millisecond},
		}
		if got, want := string(AppendPolicy(nil, ls)), `"api/1s";q=10;w=1, "api/60s";q=600;w=60`; got != want {
			t.Errorf("RateLimit-Policy %s, want %s", got, want)
		}
		if got, want := string(AppendRateLimit(nil, ls)), `"api/1s";r=9;t=1, "api/60s";r=0;t=55`; got != want {
			t.Errorf("RateLimit %s, want %s", got, want)
		}
	})
}
