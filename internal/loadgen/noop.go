package loadgen

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ServeNoop serves limitload serve-noop: HTTP servers on the addresses
// listen (HOST:PORT, port 0 for any) that answer every /check with 200 and
// the headers limiterd sends, without deciding anything, and a policy of
// limit per window so that Preflight passes. A run against them on the
// same machine is the ceiling a limiterd run is measured against
// (BENCHMARKS.md, HS2): the same load generator, connections, parsing and
// kernel, with the limiter taken out. It writes "serving no-op /check on
// ADDR" to log for each server, and serves until ctx ends (or one server
// fails, which it writes to log too). It returns an error only when it
// cannot listen, before serving anything.
func ServeNoop(ctx context.Context, listen []string, limit int, window time.Duration, log io.Writer) error {
	policy := `"default";q=` + strconv.Itoa(limit) + ";w=" + strconv.Itoa(int(window.Seconds()))
	body := []byte(`{"allowed":true,"limit":` + strconv.Itoa(limit) + `,"remaining":0,"retry_after_ms":0,"reset_ms":0,"rule":"default"}` + "\n")
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd["Content-Type"] = []string{"application/json"}
		hd["Ratelimit-Policy"] = []string{policy}
		_, _ = w.Write(body)
	})
	var srvs []*http.Server
	defer func() {
		for _, s := range srvs {
			_ = s.Close()
		}
	}()
	errc := make(chan error, len(listen))
	for _, a := range listen {
		ln, err := net.Listen("tcp", strings.TrimSpace(a))
		if err != nil {
			return fmt.Errorf("loadgen: %w", err)
		}
		fmt.Fprintln(log, "serving no-op /check on", ln.Addr())
		srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
		srvs = append(srvs, srv)
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case <-ctx.Done():
	case err := <-errc:
		fmt.Fprintf(log, "limitload serve-noop: %v\n", err)
	}
	return nil
}
