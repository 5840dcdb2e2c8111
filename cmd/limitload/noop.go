package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// serveNoop is "limitload serve-noop": HTTP servers that answer every
// /check with 200 and the headers limiterd sends, without deciding
// anything. A limitload run against them on the same machine is the
// ceiling a limiterd run is measured against (BENCHMARKS.md, HS2): the
// same load generator, connections, parsing and kernel, with the limiter
// taken out. It serves until ctx ends and returns the exit code.
func serveNoop(ctx context.Context, args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("limitload serve-noop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:0", "`HOST:PORT[,HOST:PORT...]` to serve on, one server each (port 0: any; the addresses are printed)")
	limit := fs.Int("limit", 600, "the q= of the RateLimit-Policy answered, so that limitload's preflight passes with the same --limit")
	window := fs.Duration("window", time.Minute, "the w= of the RateLimit-Policy answered (whole seconds)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: limitload serve-noop [flags]\n\nServes /check with 200 and limiterd's headers, deciding nothing: the ceiling of a run on this machine.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	policy := `"default";q=` + strconv.Itoa(*limit) + ";w=" + strconv.Itoa(int(window.Seconds()))
	body := []byte(`{"allowed":true,"limit":` + strconv.Itoa(*limit) + `,"remaining":0,"retry_after_ms":0,"reset_ms":0,"rule":"default"}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["Content-Type"] = []string{"application/json"}
		hd["Ratelimit-Policy"] = []string{policy}
		_, _ = w.Write(body)
	})
	var srvs []*http.Server
	errc := make(chan error, 8)
	for _, a := range strings.Split(*listen, ",") {
		ln, err := net.Listen("tcp", strings.TrimSpace(a))
		if err != nil {
			fmt.Fprintf(stderr, "limitload serve-noop: %v\n", err)
			return exitRuntime
		}
		fmt.Fprintln(stderr, "serving no-op /check on", ln.Addr())
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(stderr, "limitload serve-noop: %v\n", err)
	}
	for _, s := range srvs {
		_ = s.Close()
	}
	return exitOK
}
