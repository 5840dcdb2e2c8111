// Command limiterd is the limiterd daemon: it loads a rule file, counts
// requests per key in sliding windows, and answers GET/POST /check over HTTP
// with 200 (allowed) or 429 (denied). Alone by default; with -bind-addr or
// -join it is a node of a memberlist cluster that shares its counts with
// its peers (package cluster). Run limiterd -h for its flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Getenv, os.Stderr, nil))
}

// run is main without the process: it returns the exit code. started, when
// not nil, is called with the HTTP address once the server listens.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer, started func(addr string)) int {
	cfg, err := parseConfig(args, getenv, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "limiterd: %v\n", err)
		return 2
	}
	log := cfg.logger(stderr)
	if err := serve(ctx, cfg, log, started); err != nil {
		log.Error("limiterd stopped", "err", err)
		return 1
	}
	return 0
}

// serve builds the daemon, runs it until ctx ends, and shuts down
// gracefully.
func serve(ctx context.Context, cfg config, log *slog.Logger, started func(addr string)) error {
	d, err := build(cfg, log)
	if err != nil {
		return err
	}
	defer d.cleanup.unwind()
	if started != nil {
		started(d.ln.Addr().String())
	}
	return d.run(ctx)
}

// stopGRPC lets the calls in flight finish, and cuts them off when ctx
// ends first.
func stopGRPC(ctx context.Context, g *grpc.Server) {
	done := make(chan struct{})
	go func() {
		g.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		g.Stop()
		<-done
	}
}

// publishedHTTPAddr is the HTTP address shown to the peers: the listener's,
// with an unspecified host (0.0.0.0, ::) replaced by -advertise-addr's.
func publishedHTTPAddr(ln net.Addr, advertise string) string {
	a, ok := ln.(*net.TCPAddr)
	if !ok || !a.IP.IsUnspecified() {
		return ln.String()
	}
	if host, _, err := net.SplitHostPort(advertise); err == nil && host != "" {
		return net.JoinHostPort(host, strconv.Itoa(a.Port))
	}
	return ln.String()
}

// pprofMux serves Go's profiles under /debug/pprof/ on a mux of its own,
// never on the API's.
func pprofMux() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("/debug/pprof/", pprof.Index)
	m.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	m.HandleFunc("/debug/pprof/profile", pprof.Profile)
	m.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	m.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return m
}

// sweep drops empty windows every interval until ctx ends, at the
// instants of now (the decisions' clock).
func sweep(ctx context.Context, ctr *counter.Counter, every time.Duration, now func() time.Time, log *slog.Logger) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if n := ctr.Sweep(now()); n > 0 {
				log.Debug("swept empty windows", "keys", n)
			}
		}
	}
}

// watchGossipKeys re-reads -gossip-key-file on every SIGHUP until ctx ends
// and installs its keys; an unreadable or invalid file keeps the keys in
// force.
func watchGossipKeys(ctx context.Context, path string, node *cluster.Node, hup <-chan os.Signal, log *slog.Logger) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
		}
		keys, err := loadGossipKeys(path)
		if err == nil {
			err = node.SetGossipKeys(keys)
		}
		if err != nil {
			log.Error("gossip keys not changed", "file", path, "err", err)
			continue
		}
		log.Info("gossip keys reloaded", "file", path, "keys", len(keys))
	}
}
