package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"

	"github.com/limiterd/limiterd/adminapi"
	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
	"github.com/limiterd/limiterd/limiter"
	"github.com/limiterd/limiterd/rls"
)

// daemon is limiterd built: its parts, made in dependency order by build
// and run by run.
type daemon struct {
	cfg config
	log *slog.Logger
	// clock is the one clock for everything that reads instants:
	// decisions, the cluster's messages and ticks, the sweep.
	clock func() time.Time
	reg   *prometheus.Registry

	ctr    *counter.Counter
	lim    *limiter.Limiter
	rules  *limiter.RuleSet // as loaded at start
	bounds *boundsWatch
	rel    *reloader
	hup    chan os.Signal // SIGHUP, for the rules (and the gossip keys: keysHup)

	ln, gln, dln, aln net.Listener // HTTP API, gRPC, pprof, admin API (each but the first nil when off)
	keysHup           chan os.Signal
	node              *cluster.Node // nil on a single node
	srv               *http.Server
	grpcSrv           *grpc.Server // nil without -grpc-addr
	debug             *http.Server // nil without -pprof-addr
	admin             *http.Server // nil without -admin-addr

	// cleanup releases what build acquired, last first: build unwinds it
	// when a step fails, serve when the daemon has stopped.
	cleanup cleanupStack
}

// cleanupStack holds the closers of the resources acquired so far.
type cleanupStack []func()

// push adds the closer of a resource just acquired.
func (s *cleanupStack) push(closer func()) { *s = append(*s, closer) }

// unwind runs the closers, the last pushed first, and empties the stack.
func (s *cleanupStack) unwind() {
	for i := len(*s) - 1; i >= 0; i-- {
		(*s)[i]()
	}
	*s = nil
}

// build makes every part of the daemon, or releases what it made and
// returns the first error.
func build(cfg config, log *slog.Logger) (_ *daemon, err error) {
	d := &daemon{cfg: cfg, log: log, clock: cfg.clock(), reg: prometheus.NewRegistry()}
	defer func() {
		if err != nil {
			d.cleanup.unwind()
		}
	}()
	if cfg.testClockOffset != 0 {
		log.Warn("the clock is shifted by -test-clock-offset: for fault tests only", "offset", cfg.testClockOffset)
	}
	d.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	for _, step := range []func() error{d.buildCounter, d.buildLimiter, d.listen, d.buildNode, d.buildFrontends} {
		if err := step(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// buildCounter makes the counter, in cluster mode on a cluster node, and
// exports its key counts.
func (d *daemon) buildCounter() error {
	ctr, err := counter.New(d.cfg.counterConfig())
	if err != nil {
		return err
	}
	if d.cfg.clustered() {
		// Before any limit is registered or counted: a cluster node tracks
		// its changes for the peers from the first request on.
		if err := ctr.SetCluster(d.cfg.counterCluster()); err != nil {
			return err
		}
	}
	d.ctr = ctr
	d.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "limiterd_tracked_keys",
			Help: "(rule limit, key) pairs whose window holds requests.",
		}, func() float64 { return float64(ctr.Stats().Keys) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "limiterd_untracked_checks_total",
			Help: "Checks allowed without counting because -max-keys was reached (raise it if this grows).",
		}, func() float64 { return float64(ctr.Stats().Untracked) }),
	)
	return nil
}

// buildLimiter loads the rules, makes the limiter, the watch of its
// bounds and the reloader, and takes SIGHUP.
func (d *daemon) buildLimiter() error {
	files, err := limiter.ReadFiles(d.cfg.rulesPaths...)
	if err != nil {
		return err
	}
	if d.rules, err = files.Parse(); err != nil {
		return err
	}
	if d.lim, err = limiter.New(d.ctr, d.rules); err != nil {
		return err
	}
	var cc *counter.ClusterConfig
	if c, ok := d.ctr.Cluster(); ok {
		cc = &c
	}
	if d.bounds, err = newBoundsWatch(d.lim, d.cfg.counterConfig(), cc, d.reg, d.log); err != nil {
		return err
	}
	d.bounds.check("rules loaded")
	d.rel = newReloader(d.cfg.rulesPaths, d.lim, files.Sum, d.reg, d.log, func() { d.bounds.check("rules reloaded") })
	// Take SIGHUP before anyone can learn our address and send it: its
	// default action would end the process.
	d.hup = notify(&d.cleanup, syscall.SIGHUP)
	return nil
}

// notify returns a channel that receives sig, and pushes its release.
func notify(cleanup *cleanupStack, sig os.Signal) chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, sig)
	cleanup.push(func() { signal.Stop(ch) })
	return ch
}

// listen opens the HTTP listener and, when asked for, the gRPC and pprof
// ones. The servers close them when they stop; the cleanup closes them
// when they never start.
func (d *daemon) listen() error {
	for _, l := range []struct {
		ln   *net.Listener
		addr string
		flag string
	}{{&d.ln, d.cfg.httpAddr, "-http-addr"}, {&d.gln, d.cfg.grpcAddr, "-grpc-addr"}, {&d.dln, d.cfg.pprofAddr, "-pprof-addr"}, {&d.aln, d.cfg.adminAddr, "-admin-addr"}} {
		if l.addr == "" {
			continue
		}
		ln, err := net.Listen("tcp", l.addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w", l.flag, err)
		}
		*l.ln = ln
		d.cleanup.push(func() { ln.Close() })
	}
	return nil
}

// buildNode makes the cluster node on a cluster node; a no-op alone.
func (d *daemon) buildNode() error {
	if !d.cfg.clustered() {
		return nil
	}
	ncfg := d.cfg.clusterConfig(publishedHTTPAddr(d.ln.Addr(), d.cfg.advertiseAddr))
	ncfg.Now = d.clock
	// The worst case of every limit changes with the node count.
	ncfg.OnNodesChanged = d.bounds.setNodes
	node, err := cluster.New(ncfg, d.ctr, d.reg, d.log)
	if err != nil {
		return err
	}
	d.node = node
	d.cleanup.push(func() { _ = node.Close() }) // a no-op once Run has started
	if d.cfg.gossipKeyFile != "" {
		d.keysHup = notify(&d.cleanup, syscall.SIGHUP)
	}
	d.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "limiterd_cluster_insecure",
		Help: "1 when cluster traffic is neither encrypted nor authenticated on an address beyond this host (-insecure-cluster), else 0.",
	}, func() float64 {
		if d.cfg.unauthenticated() {
			return 1
		}
		return 0
	}))
	return nil
}

// buildFrontends makes the decision layer and the servers that ask it.
// Every frontend decides through one Decider: one fail-open path, one set
// of decision metrics, and in a cluster the one way to the key's
// coordinator.
func (d *daemon) buildFrontends() error {
	dcfg := d.cfg.decisionConfig()
	dcfg.Now = d.clock
	hcfg := d.cfg.httpConfig()
	if d.node != nil {
		dcfg.Coordinator = d.node
		hcfg.Ready = d.node.Ready
		hcfg.Cluster = func() any { return d.node.Status() }
	}
	dec, err := decision.New(dcfg, d.lim, d.reg, d.log)
	if err != nil {
		return err
	}
	api, err := httpapi.New(hcfg, dec, d.reg, d.log)
	if err != nil {
		return err
	}
	if d.gln != nil {
		svc, err := rls.New(d.cfg.rlsConfig(), dec, d.lim, d.reg, d.log)
		if err != nil {
			return err
		}
		d.grpcSrv = rls.NewServer(svc)
	}
	d.srv = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	if d.dln != nil {
		d.debug = &http.Server{Handler: pprofMux(), ReadHeaderTimeout: 5 * time.Second}
	}
	return d.buildAdmin()
}

// buildAdmin makes the admin API's server, with -admin-addr: the key
// resets go through the cluster node, or to the counter alone.
func (d *daemon) buildAdmin() error {
	if d.aln == nil {
		return nil
	}
	acfg := adminapi.DefaultConfig()
	keys := adminapi.Alone(d.ctr, d.clock)
	if d.node != nil {
		acfg.Node, keys = d.node.Name(), d.node
	}
	api, err := adminapi.New(acfg, d.lim, keys, d.reg, d.log)
	if err != nil {
		return err
	}
	d.admin = &http.Server{
		Handler:           api,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      acfg.ResetTimeout + 10*time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
	}
	return nil
}

// run runs every part until ctx ends or one fails, then shuts down: the
// servers first, the node after them, so that the changes counted by the
// last requests still reach the peers before it leaves.
func (d *daemon) run(ctx context.Context) error {
	d.logStart()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	nodeCtx, nodeCancel := context.WithCancel(context.Background())
	defer nodeCancel()
	var wg sync.WaitGroup
	errc := make(chan error, 8)
	d.start(ctx, nodeCtx, &wg, errc)

	var runErr error
	select {
	case <-ctx.Done():
		d.log.Info("shutting down", "timeout", d.cfg.shutdownTimeout)
	case runErr = <-errc:
	}
	cancel()
	runErr = errors.Join(runErr, d.stopServers())
	nodeCancel() // sends the last changes, leaves the cluster
	wg.Wait()
	return runErr
}

// logStart says what listens where.
func (d *daemon) logStart() {
	if d.grpcSrv != nil {
		d.log.Info("Envoy rate limit service listening", "grpc", d.gln.Addr().String())
	}
	if d.debug != nil {
		d.log.Info("pprof listening", "addr", d.dln.Addr().String())
	}
	if d.admin != nil {
		d.log.Info("admin API listening", "admin", d.aln.Addr().String())
	}
	attrs := []any{"http", d.ln.Addr().String(), "rules", d.cfg.rulesPaths, "rule_count", len(d.rules.Rules)}
	if d.node != nil {
		if d.cfg.unauthenticated() {
			d.log.Warn("cluster traffic is neither encrypted nor authenticated (-insecure-cluster): anyone who reaches the cluster port can join and inject counts", "bind", d.cfg.bindAddr)
		}
		attrs = append(attrs, "node", d.node.Name(), "cluster", d.node.Addr(), "join", d.cfg.join, "sync_transport", d.cfg.syncTransport)
	}
	d.log.Info("limiterd listening", attrs...)
}

// start starts every part's goroutine; each sends its failure to errc.
// The node runs on nodeCtx, everything else on ctx.
func (d *daemon) start(ctx, nodeCtx context.Context, wg *sync.WaitGroup, errc chan<- error) {
	wg.Go(func() {
		if err := d.rel.watch(ctx, d.hup); err != nil {
			// Without a watcher SIGHUP still cannot reach us; treat it as fatal
			// so a misconfiguration is seen at start, not at the first edit.
			errc <- err
		}
	})
	wg.Go(func() { sweep(ctx, d.ctr, d.cfg.sweepInterval, d.clock, d.log) })
	wg.Go(func() { serveHTTP(d.srv, d.ln, "http server", errc) })
	if d.grpcSrv != nil {
		wg.Go(func() {
			if err := d.grpcSrv.Serve(d.gln); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				errc <- fmt.Errorf("grpc server: %w", err)
			}
		})
	}
	if d.debug != nil {
		wg.Go(func() { serveHTTP(d.debug, d.dln, "pprof server", errc) })
	}
	if d.admin != nil {
		wg.Go(func() { serveHTTP(d.admin, d.aln, "admin server", errc) })
	}
	if d.node != nil {
		wg.Go(func() {
			if err := d.node.Run(nodeCtx); err != nil {
				errc <- err
			}
		})
	}
	if d.keysHup != nil {
		wg.Go(func() { watchGossipKeys(ctx, d.cfg.gossipKeyFile, d.node, d.keysHup, d.log) })
	}
}

// serveHTTP serves srv on ln until it is shut down, and sends any other
// end to errc as what's.
func serveHTTP(srv *http.Server, ln net.Listener, what string, errc chan<- error) {
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		errc <- fmt.Errorf("%s: %w", what, err)
	}
}

// stopServers lets the requests in flight finish within -shutdown-timeout.
func (d *daemon) stopServers() error {
	sctx, scancel := context.WithTimeout(context.Background(), d.cfg.shutdownTimeout)
	defer scancel()
	if d.grpcSrv != nil {
		stopGRPC(sctx, d.grpcSrv)
	}
	var err error
	if serr := d.srv.Shutdown(sctx); serr != nil {
		err = fmt.Errorf("shutdown: %w", serr)
	}
	if d.admin != nil {
		if serr := d.admin.Shutdown(sctx); serr != nil {
			err = errors.Join(err, fmt.Errorf("admin shutdown: %w", serr))
		}
	}
	if d.debug != nil {
		d.debug.Close()
	}
	return err
}
