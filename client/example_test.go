package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/limiterd/limiterd/client"
	"github.com/limiterd/limiterd/client/internal/limiterdtest"
)

// Example asks a limiterd node (here a real one, in-process, allowing 2
// requests a minute) about one client three times, then about a bad key.
// The key is asked of the first node listed first, and that node is down:
// the first Check gets its answer from the second node, and the later ones
// skip the first while it backs off.
func Example() {
	srv, err := limiterdtest.Server(`
rules:
  - name: default
    limit: 2
    window: 60s
`, limiterdtest.FixedClock())
	if err != nil {
		panic(err)
	}
	defer srv.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	down := ln.Addr().String() // a node nothing listens on any more
	ln.Close()

	c, err := client.New(client.Config{
		Addrs: []string{down, srv.URL},
		// Generous, so that the example cannot fail open on a busy test
		// machine; the defaults (50ms, 20ms) suit a service.
		Timeout: time.Second, AttemptTimeout: time.Second,
	})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 3 {
		d, err := c.Check(ctx, client.Request{Key: "203.0.113.7"})
		if err != nil {
			panic(err)
		}
		fmt.Printf("allowed=%v remaining=%d/%d retry after %v; RateLimit: %s\n",
			d.Allowed, d.Remaining, d.Limit, d.RetryAfter, d.Headers.Get("RateLimit"))
	}
	_, err = c.Check(ctx, client.Request{Key: ""})
	fmt.Println(errors.Is(err, client.ErrBadRequest), err)
	// Output:
	// allowed=true remaining=1/2 retry after 0s; RateLimit: "default";r=1;t=60
	// allowed=true remaining=0/2 retry after 0s; RateLimit: "default";r=0;t=60
	// allowed=false remaining=0/2 retry after 1m0s; RateLimit: "default";r=0;t=60
	// true client: bad request: key is empty
}

// Example_failOpen shows the answer when no node answers: the request is
// allowed, FailedOpen says so, and the error, to be logged, says why.
func Example_failOpen() {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	down := ln.Addr().String()
	ln.Close()

	c, err := client.New(client.Config{Addrs: []string{down}})
	if err != nil {
		panic(err)
	}
	d, err := c.Check(context.Background(), client.Request{Key: "203.0.113.7"})
	fmt.Println(d.Allowed, d.FailedOpen, errors.Is(err, client.ErrUnavailable))
	// Output:
	// true true true
}
