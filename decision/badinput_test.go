package decision

import (
	"context"
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// TestBadInputIsDecides: CheckKey and BadInput give a frontend that does
// not decide the errors Decide gives, sentinel and text.
func TestBadInputIsDecides(t *testing.T) {
	c, err := counter.New(counter.DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	rs, err := limiter.Parse("t.yaml", []byte("rules:\n  - {name: default, limit: 10, window: 1s}\n"))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := limiter.New(c, rs)
	if err != nil {
		t.Fatal(err)
	}
	dec, err := New(Config{}, lim, prometheus.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, req := range []limiter.Request{
		{Key: "", Hits: 1},
		{Key: "\xff", Hits: 1},
		{Key: "k", Rule: "nope", Hits: 1},
		{Key: "k", Rule: "a rule name far longer than sixty-four bytes, which the message cuts short", Hits: 1},
	} {
		var res Result
		want := dec.Decide(context.Background(), req, &res)
		if want == nil {
			t.Fatalf("Decide(%+v) accepted", req)
		}
		got := CheckKey(req.Key)
		if got == nil {
			_, kerr := lim.KeyLimits(req.Key, req.Rule)
			got = BadInput(kerr, req)
		}
		if got == nil || got.Error() != want.Error() || errors.Is(got, limiter.ErrUnknownRule) != errors.Is(want, limiter.ErrUnknownRule) || errors.Is(got, limiter.ErrInvalidKey) != errors.Is(want, limiter.ErrInvalidKey) {
			t.Errorf("request %+v: %v, Decide's %v", req, got, want)
		}
	}
	if CheckKey("k") != nil || BadInput(errors.New("disk on fire"), limiter.Request{Key: "k"}) != nil {
		t.Error("a good key, or an internal error, taken for bad input")
	}
}
