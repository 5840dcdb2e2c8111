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
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/rls"
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

// serve builds the parts in dependency order, runs them until ctx ends, and
// shuts down gracefully.
func serve(ctx context.Context, cfg config, log *slog.Logger, started func(addr string)) error {
	// One clock for everything that reads instants: decisions, the
	// cluster's messages and ticks, the sweep.
	clock := cfg.clock()
	if cfg.testClockOffset != 0 {
		log.Warn("the clock is shifted by -test-clock-offset: for fault tests only", "offset", cfg.testClockOffset)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)

	ctr, err := counter.New(cfg.counterConfig())
	if err != nil {
		return err
	}
	if cfg.clustered() {
		// Before any limit is registered or counted: a cluster node tracks
		// its changes for the peers from the first request on.
		if err := ctr.SetCluster(cfg.counterCluster()); err != nil {
			return err
		}
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "limiterd_tracked_keys",
			Help: "(rule limit, key) pairs whose window holds requests.",
		}, func() float64 { return float64(ctr.Stats().Keys) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "limiterd_untracked_checks_total",
			Help: "Checks allowed without counting because -max-keys was reached (raise it if this grows).",
		}, func() float64 { return float64(ctr.Stats().Untracked) }),
	)

	rules, sum, err := loadRules(cfg.rulesPaths)
	if err != nil {
		return err
	}
	lim, err := limiter.New(ctr, rules)
	if err != nil {
		return err
	}
	var ctrCluster *counter.ClusterConfig
	if cfg.clustered() {
		cc := cfg.counterCluster()
		ctrCluster = &cc
	}
	bounds, err := newBoundsWatch(lim, cfg.counterConfig(), ctrCluster, reg, log)
	if err != nil {
		return err
	}
	bounds.check("rules loaded")
	rel := newReloader(cfg.rulesPaths, lim, sum, reg, log, func() { bounds.check("rules reloaded") })

	// Take SIGHUP before anyone can learn our address and send it: its
	// default action would end the process.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)

	ln, err := net.Listen("tcp", cfg.httpAddr)
	if err != nil {
		return fmt.Errorf("listen on -http-addr: %w", err)
	}
	defer ln.Close() // in case of an early return; Serve closes it otherwise
	var gln net.Listener
	if cfg.grpcAddr != "" {
		if gln, err = net.Listen("tcp", cfg.grpcAddr); err != nil {
			return fmt.Errorf("listen on -grpc-addr: %w", err)
		}
		defer gln.Close()
	}
	var dln net.Listener
	if cfg.pprofAddr != "" {
		if dln, err = net.Listen("tcp", cfg.pprofAddr); err != nil {
			return fmt.Errorf("listen on -pprof-addr: %w", err)
		}
		defer dln.Close()
	}

	hcfg := httpapi.DefaultConfig()
	hcfg.KeyHeader = cfg.keyHeader
	var node *cluster.Node
	if cfg.clustered() {
		ncfg := cfg.clusterConfig(publishedHTTPAddr(ln.Addr(), cfg.advertiseAddr))
		ncfg.Now = clock
		// The worst case of every limit changes with the node count.
		ncfg.OnNodesChanged = bounds.setNodes
		node, err = cluster.New(ncfg, ctr, reg, log)
		if err != nil {
			return err
		}
		hcfg.Ready = node.Ready
		hcfg.Cluster = func() any { return node.Status() }
	}
	// Every frontend decides through dec: one fail-open path, one set of
	// decision metrics, and in a cluster the one way to the key's
	// coordinator.
	dcfg := cfg.decisionConfig()
	dcfg.Now = clock
	if node != nil {
		dcfg.Coordinator = node
	}
	dec, err := decision.New(dcfg, lim, reg, log)
	if err != nil {
		if node != nil {
			_ = node.Close()
		}
		return err
	}
	api, err := httpapi.New(hcfg, dec, reg, log)
	if err != nil {
		if node != nil {
			_ = node.Close()
		}
		return err
	}
	var grpcSrv *grpc.Server
	if gln != nil {
		svc, err := rls.New(rls.Config{Draft03Headers: cfg.draft03Headers}, dec, lim, reg, log)
		if err != nil {
			if node != nil {
				_ = node.Close()
			}
			return err
		}
		grpcSrv = rls.NewServer(svc)
		log.Info("Envoy rate limit service listening", "grpc", gln.Addr().String())
	}
	srv := &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if node != nil && cfg.unauthenticated() {
		log.Warn("cluster traffic is neither encrypted nor authenticated (-insecure-cluster): anyone who reaches the cluster port can join and inject counts", "bind", cfg.bindAddr)
	}
	if node != nil {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "limiterd_cluster_insecure",
			Help: "1 when cluster traffic is neither encrypted nor authenticated on an address beyond this host (-insecure-cluster), else 0.",
		}, func() float64 {
			if cfg.unauthenticated() {
				return 1
			}
			return 0
		}))
		log.Info("limiterd listening", "http", ln.Addr().String(), "rules", cfg.rulesPaths, "rule_count", len(rules.Rules),
			"node", node.Name(), "cluster", node.Addr(), "join", cfg.join, "sync_transport", cfg.syncTransport)
	} else {
		log.Info("limiterd listening", "http", ln.Addr().String(), "rules", cfg.rulesPaths, "rule_count", len(rules.Rules))
	}
	if started != nil {
		started(ln.Addr().String())
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// The node stops after the HTTP server, so that the changes counted by
	// the last requests still reach the peers before it leaves.
	nodeCtx, nodeCancel := context.WithCancel(context.Background())
	defer nodeCancel()

	var wg sync.WaitGroup
	errc := make(chan error, 8)
	wg.Go(func() {
		if err := rel.watch(ctx, hup); err != nil {
			// Without a watcher SIGHUP still cannot reach us; treat it as fatal
			// so a misconfiguration is seen at start, not at the first edit.
			errc <- err
		}
	})
	wg.Go(func() { sweep(ctx, ctr, cfg.sweepInterval, clock, log) })
	wg.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			errc <- fmt.Errorf("http server: %w", err)
		}
	})
	if grpcSrv != nil {
		wg.Go(func() {
			if err := grpcSrv.Serve(gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("grpc server: %w", err)
			}
		})
	}
	var debug *http.Server
	if dln != nil {
		debug = &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 5 * time.Second}
		log.Info("pprof listening", "addr", dln.Addr().String())
		wg.Go(func() {
			if err := debug.Serve(dln); !errors.Is(err, http.ErrServerClosed) {
				errc <- fmt.Errorf("pprof server: %w", err)
			}
		})
	}
	if node != nil {
		wg.Go(func() {
			if err := node.Run(nodeCtx); err != nil {
				errc <- err
			}
		})
		if cfg.gossipKeyFile != "" {
			keysHup := make(chan os.Signal, 1)
			signal.Notify(keysHup, syscall.SIGHUP)
			defer signal.Stop(keysHup)
			wg.Go(func() { watchGossipKeys(ctx, cfg.gossipKeyFile, node, keysHup, log) })
		}
	}

	var runErr error
	select {
	case <-ctx.Done():
		log.Info("shutting down", "timeout", cfg.shutdownTimeout)
	case runErr = <-errc:
	}
	cancel()
	sctx, scancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer scancel()
	if grpcSrv != nil {
		stopGRPC(sctx, grpcSrv)
	}
	if err := srv.Shutdown(sctx); err != nil {
		runErr = errors.Join(runErr, fmt.Errorf("shutdown: %w", err))
	}
	if debug != nil {
		debug.Close()
	}
	nodeCancel() // sends the last changes, leaves the cluster
	wg.Wait()
	return runErr
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
