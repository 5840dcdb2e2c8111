package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/limiterd/limiterd/cluster"
	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/httpapi"
	"github.com/limiterd/limiterd/rls"
)

// envPrefix prefixes the environment variable that mirrors each flag:
// -http-addr is LIMITERD_HTTP_ADDR. A flag on the command line wins.
const envPrefix = "LIMITERD_"

// config is everything main needs, from flags and the environment.
type config struct {
	httpAddr        string
	rulesPaths      []string // -rules, in order
	grpcAddr        string
	draft03Headers  bool
	keyHeader       string
	maxKeys         int
	shards          int
	sweepInterval   time.Duration
	shutdownTimeout time.Duration
	pprofAddr       string
	logLevel        slog.Level
	logFormat       string
	// testClockOffset shifts every instant the node reads (fault tests).
	testClockOffset time.Duration

	// Cluster mode: on when bindAddr or join is set.
	nodeName            string
	bindAddr            string
	advertiseAddr       string
	join                []string
	syncInterval        time.Duration
	syncSpread          float64
	antiEntropyInterval time.Duration
	rejoinInterval      time.Duration
	clusterLabel        string
	gossipKey           []byte
	syncTransport       string
	budget              bool
	coordinate          bool
	coordinatorDeadline time.Duration
	insecureCluster     bool
	gossipKeyFile       string
	gossipKeys          [][]byte // from gossipKeyFile
	maxClockOffset      time.Duration
}

// fileList is a flag naming files, repeated or separated by commas; the
// first use replaces the default.
type fileList struct {
	paths []string
	set   bool
}

func (f *fileList) String() string {
	if f == nil {
		return ""
	}
	return strings.Join(f.paths, ",")
}

func (f *fileList) Set(v string) error {
	if !f.set {
		f.paths, f.set = nil, true
	}
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p == "" {
			return errors.New("an empty file name")
		}
		f.paths = append(f.paths, p)
	}
	return nil
}

// defaultBindAddr is where memberlist listens when only -join is given.
const defaultBindAddr = "0.0.0.0:7946"

// envName returns the environment variable that mirrors flag name.
func envName(name string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
}

// parseConfig reads flags from args and, for flags not given there, from
// the environment through getenv. It returns flag.ErrHelp for -h.
func parseConfig(args []string, getenv func(string) string, stderr io.Writer) (config, error) {
	cfg := config{}
	fs := flag.NewFlagSet("limiterd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cdef := counter.DefaultConfig()
	fs.StringVar(&cfg.httpAddr, "http-addr", "127.0.0.1:8080", "`HOST:PORT` the HTTP API (/check, /metrics, /healthz, /readyz) listens on")
	rules := &fileList{paths: []string{"testdata/rules.yaml"}}
	fs.Var(rules, "rules", "rule `FILE`: limiterd's YAML, or an envoyproxy/ratelimit configuration as it is (recognised by its top-level domain); repeat the flag (or separate with commas) for several, side by side; reloaded on SIGHUP and when a file changes")
	fs.StringVar(&cfg.grpcAddr, "grpc-addr", "", "`HOST:PORT` for Envoy's rate limit service (gRPC envoy.service.ratelimit.v3, with health and reflection); off when empty")
	fs.BoolVar(&cfg.draft03Headers, "envoy-draft03-headers", false, "also send X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset in Envoy's response_headers_to_add, as envoyproxy/ratelimit does, beside the RateLimit fields")
	fs.StringVar(&cfg.keyHeader, "key-header", httpapi.DefaultConfig().KeyHeader, "request `HEADER` the key is taken from when /check has no key parameter (X-Forwarded-For: its first address)")
	fs.IntVar(&cfg.maxKeys, "max-keys", cdef.MaxKeys, "most (rule limit, key) pairs tracked at once, which bounds memory; new keys past it are allowed uncounted (metric limiterd_untracked_checks_total)")
	fs.IntVar(&cfg.shards, "shards", cdef.Shards, "independently locked partitions of the key space (a power of two)")
	fs.DurationVar(&cfg.sweepInterval, "sweep-interval", 10*time.Second, "how often keys whose window is empty are dropped")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	fs.StringVar(&cfg.pprofAddr, "pprof-addr", "", "`HOST:PORT` for Go's /debug/pprof/ profiles on a listener of their own; off when empty (keep it on loopback)")
	level := fs.String("log-level", "info", "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log `FORMAT`: text or json")
	fs.DurationVar(&cfg.testClockOffset, "test-clock-offset", 0, "for fault tests only, never in production: shift every instant this node reads (its decisions, the send time of its cluster messages, its sync ticks, its stale-message checks, /cluster) by this `DURATION`, which may be negative, to play a node whose clock is off (a Go binary ignores libfaketime); 0: the real clock")

	cdefs := cluster.DefaultConfig()
	fs.StringVar(&cfg.nodeName, "node-name", "", "this node's `NAME` in the cluster, unique and stable across restarts (empty: host name and -bind-addr port, e.g. web-3-7946)")
	fs.StringVar(&cfg.bindAddr, "bind-addr", "", "`HOST:PORT` the cluster (memberlist, UDP and TCP) listens on; cluster mode is on when this or -join is set (with only -join: "+defaultBindAddr+"); neither: a single node")
	fs.StringVar(&cfg.advertiseAddr, "advertise-addr", "", "`IP:PORT` peers reach this node at, when not -bind-addr (NAT, containers)")
	join := fs.String("join", "", "`HOST:PORT[,HOST:PORT...]` seeds to join at start, and to join again while they are not members (so the halves of a healed partition merge); a HOST name joins every address it resolves to (a Kubernetes headless Service: every pod); /readyz answers 503 until one has answered")
	fs.DurationVar(&cfg.syncInterval, "sync-interval", counter.DefaultClusterConfig("-").SyncInterval, "how often each node sends its count changes to every peer (the counter's sync interval: the budget's blind interval too)")
	fs.DurationVar(&cfg.antiEntropyInterval, "anti-entropy-interval", cdefs.AntiEntropyInterval, "how often each node re-sends its counts of the keys over half their limit (or a heartbeat): a lost datagram is healed within it")
	fs.DurationVar(&cfg.rejoinInterval, "rejoin-interval", cdefs.RejoinInterval, "how often -join seeds that are not members are joined again")
	fs.StringVar(&cfg.clusterLabel, "cluster-label", "", "`LABEL` carried by all cluster traffic; nodes with another label are ignored (at most 255 bytes)")
	gossipKey := fs.String("gossip-key", "", "`BASE64` of a 16, 24 or 32-byte key that encrypts and authenticates cluster traffic (AES-GCM); nodes without it cannot join or inject counts. Prefer the environment variable: flags show in ps")
	fs.StringVar(&cfg.gossipKeyFile, "gossip-key-file", "", "`FILE` of gossip keys, base64, one a line (# comments): the first encrypts, all decrypt; re-read on SIGHUP, so a key rotates without a restart (SECURITY.md). Instead of -gossip-key")
	fs.BoolVar(&cfg.insecureCluster, "insecure-cluster", false, "run the cluster without -gossip-key on an address other hosts can reach: anyone who reaches the port can then join, read counts and inject them. Only on a network you trust; without it a node refuses to start so (a loopback -bind-addr needs no key)")
	fs.Float64Var(&cfg.syncSpread, "sync-spread", cdefs.SendSpread, "spread each tick's datagrams to a peer over this share of -sync-interval after the tick, so that the nodes' aligned ticks do not all send and merge at once (0: at once; at most 0.25)")
	fs.StringVar(&cfg.syncTransport, "sync-transport", cdefs.SyncTransport, "`udp` (datagrams of at most 1,400 bytes) or tcp (a stream per message) for count changes; catch-up state always goes over TCP")
	fs.BoolVar(&cfg.coordinate, "coordinate", counter.DefaultClusterConfig("-").Coordinated, "decide checks at the margin with the key's coordinator node: a node admits alone only its blind share of a key (a slice of the 10 % tolerance) and asks the coordinator, synchronously, past it; false: every node decides alone with the budget (-budget)")
	fs.DurationVar(&cfg.coordinatorDeadline, "coordinator-deadline", decision.DefaultDeadline, "longest wait for the key's coordinator's answer; past it the node decides alone with the budget and counts a fallback (limiterd_coordinated_checks_total{result=\"fallback_timeout\"}); at most 1s")
	fs.DurationVar(&cfg.maxClockOffset, "max-clock-offset", cdefs.MaxClockOffset, "largest offset by which a peer's clock may be ahead of this node's (limiterd_cluster_clock_offset_seconds) while its counts are still merged (a clock behind is not judged: it looks like delay, and the peer refuses this node's counts instead): beyond it the peer stays a member, but its counts are not merged (limiterd_sync_entries_total{result=\"skewed\"}, a warning a minute) and the two count each other's requests as across a partition until its clock is back; 0: no check; under 10s (the stale-message age)")
	fs.BoolVar(&cfg.budget, "budget", counter.DefaultClusterConfig("-").Budget, "between two syncs, admit at most this node's share of what a key has left: with -coordinate the fallback when the coordinator does not answer in time, else the rule for every check (bounds a burst spread over all nodes; a client at its limit rate never meets it)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), `limiterd: a clustered sliding-window rate limiter.

Usage: limiterd [flags]

Ask it whether a client may proceed with GET /check?key=K[&rule=R][&hits=N]
(200 allowed, 429 denied), or, with -grpc-addr, as Envoy's rate limit
service (envoyproxy/ratelimit's protocol; -rules reads its configuration
files as they are). Every flag can also be set by the environment variable
shown after it; a flag on the command line wins.

Alone by default. With -bind-addr and/or -join it is a cluster node: nodes
find each other over memberlist, send each other their count changes every
-sync-interval, and decide on the merged counts; a check at a key's margin
goes to the key's coordinator node within -coordinator-deadline, and without
an answer the node decides alone with the budget. GET /cluster shows the
members. Several nodes may share a host if each has its own -bind-addr port.

Flags:
`)
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			fmt.Fprintf(fs.Output(), "  -%s %s\n    \t%s (default %q; env %s)\n", f.Name, name, usage, f.DefValue, envName(f.Name))
		})
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v := getenv(envName(f.Name)); v != "" && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("environment variable %s=%q: %w", envName(f.Name), v, err)
			}
		}
	})
	if envErr != nil {
		return cfg, envErr
	}
	rules.set = false // -rules on the command line replaces LIMITERD_RULES
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	cfg.rulesPaths = rules.paths
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments: %q (limiterd takes only flags; see -h)", fs.Args())
	}
	if err := cfg.logLevel.UnmarshalText([]byte(*level)); err != nil {
		return cfg, fmt.Errorf("-log-level: %w", err)
	}
	for _, j := range strings.Split(*join, ",") {
		if j = strings.TrimSpace(j); j != "" {
			cfg.join = append(cfg.join, j)
		}
	}
	if *gossipKey != "" {
		key, err := base64.StdEncoding.DecodeString(strings.TrimSpace(*gossipKey))
		if err != nil {
			return cfg, fmt.Errorf("-gossip-key must be standard base64 (make one with: head -c 32 /dev/urandom | base64): %w", err)
		}
		if err := cluster.CheckGossipKey("-gossip-key", key); err != nil {
			return cfg, err
		}
		cfg.gossipKey = key
	}
	if cfg.gossipKeyFile != "" {
		if *gossipKey != "" {
			return cfg, errors.New("-gossip-key and -gossip-key-file are exclusive")
		}
		keys, err := loadGossipKeys(cfg.gossipKeyFile)
		if err != nil {
			return cfg, err
		}
		cfg.gossipKeys = keys
	}
	if cfg.clustered() && cfg.bindAddr == "" {
		cfg.bindAddr = defaultBindAddr
	}
	if cfg.clustered() && cfg.nodeName == "" {
		name, err := cluster.DefaultNodeName(cfg.bindAddr)
		if err != nil {
			return cfg, fmt.Errorf("-bind-addr: %w", err)
		}
		cfg.nodeName = name
	}
	return cfg, cfg.validate()
}

func (c config) validate() error {
	var errs []error
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("-log-format must be text or json, got %q", c.logFormat))
	}
	if c.sweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("-sweep-interval must be positive, got %v", c.sweepInterval))
	}
	if c.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("-shutdown-timeout must not be negative, got %v", c.shutdownTimeout))
	}
	if len(c.rulesPaths) == 0 {
		errs = append(errs, errors.New("-rules must name a file"))
	}
	if c.keyHeader == "" {
		errs = append(errs, errors.New("-key-header must name a header"))
	}
	if err := c.counterConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-max-keys/-shards: %w", err))
	}
	if err := c.decisionConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("-coordinator-deadline: %w", err))
	}
	if c.coordinatorDeadline <= 0 {
		errs = append(errs, fmt.Errorf("-coordinator-deadline must be positive, got %v", c.coordinatorDeadline))
	}
	if c.clustered() && c.unauthenticated() && !c.insecureCluster {
		errs = append(errs, fmt.Errorf("cluster traffic on %s would be unauthenticated: anyone who reaches it could join and inject counts; set -gossip-key (or %s), bind to a loopback address, or pass -insecure-cluster on a network you trust", c.bindAddr, envName("gossip-key")))
	}
	if c.clustered() {
		if err := c.clusterConfig("").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("cluster flags: %w", err))
		}
		if err := c.counterCluster().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("cluster flags: %w", err))
		}
	}
	return errors.Join(errs...)
}

// unauthenticated reports whether cluster traffic would be neither
// encrypted nor authenticated on an address beyond this host: no gossip
// key, and a bind or advertise address that is not loopback (0.0.0.0
// included).
func (c config) unauthenticated() bool {
	if len(c.gossipKey) > 0 || len(c.gossipKeys) > 0 {
		return false
	}
	for _, a := range []string{c.bindAddr, c.advertiseAddr} {
		if a == "" {
			continue
		}
		host, _, err := net.SplitHostPort(a)
		if err != nil {
			return true // Validate says what is wrong with it
		}
		if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
			return true
		}
	}
	return false
}

// clustered reports whether limiterd runs as a cluster node.
func (c config) clustered() bool { return c.bindAddr != "" || len(c.join) > 0 }

// clusterConfig is the cluster node's configuration; httpAddr is
// published to the peers.
func (c config) clusterConfig(httpAddr string) cluster.Config {
	cc := cluster.DefaultConfig()
	cc.NodeName = c.nodeName
	cc.BindAddr = c.bindAddr
	cc.AdvertiseAddr = c.advertiseAddr
	cc.Join = c.join
	cc.HTTPAddr = httpAddr
	cc.AntiEntropyInterval = c.antiEntropyInterval
	cc.RejoinInterval = c.rejoinInterval
	cc.Label = c.clusterLabel
	cc.GossipKey = c.gossipKey
	cc.GossipKeys = c.gossipKeys
	cc.SyncTransport = c.syncTransport
	cc.SendSpread = c.syncSpread
	cc.MaxClockOffset = c.maxClockOffset
	return cc
}

// clock is the node's clock: the real one, shifted by -test-clock-offset.
// serve builds it once and gives it to the decision layer, the cluster
// node and the sweep, so that they all read the same instants.
func (c config) clock() func() time.Time {
	if c.testClockOffset == 0 {
		return time.Now
	}
	off := c.testClockOffset
	return func() time.Time { return time.Now().Add(off) }
}

// counterCluster is the counter's cluster mode for this node: the one
// place the sync interval is set (the cluster node reads it from the
// counter).
func (c config) counterCluster() counter.ClusterConfig {
	cc := counter.DefaultClusterConfig(c.nodeName)
	cc.SyncInterval = c.syncInterval
	cc.Budget = c.budget
	cc.Coordinated = c.coordinate
	return cc
}

// decisionConfig is the decision layer's configuration; the coordinator
// is the cluster node, set in serve once it exists.
func (c config) decisionConfig() decision.Config {
	dc := decision.DefaultConfig()
	dc.Deadline = c.coordinatorDeadline
	return dc
}

// httpConfig is the HTTP API's configuration; readiness and /cluster are
// the cluster node's, set in build once it exists.
func (c config) httpConfig() httpapi.Config {
	hc := httpapi.DefaultConfig()
	hc.KeyHeader = c.keyHeader
	return hc
}

// rlsConfig is the Envoy rate limit service's configuration.
func (c config) rlsConfig() rls.Config {
	rc := rls.DefaultConfig()
	rc.Draft03Headers = c.draft03Headers
	return rc
}

func (c config) counterConfig() counter.Config {
	cc := counter.DefaultConfig()
	cc.MaxKeys = c.maxKeys
	cc.Shards = c.shards
	return cc
}

func (c config) logger(w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: c.logLevel}
	if c.logFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// loadGossipKeys reads -gossip-key-file: base64 keys, one a line, blank
// lines and lines starting with # ignored; the first encrypts.
func loadGossipKeys(path string) ([][]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("-gossip-key-file: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("-gossip-key-file %s:%d: not standard base64: %w", path, i+1, err)
		}
		if err := cluster.CheckGossipKey(fmt.Sprintf("-gossip-key-file %s:%d: the key", path, i+1), key); err != nil {
			return nil, err
		}
		keys = append(keys, key)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("-gossip-key-file %s: no key", path)
	}
	return keys, nil
}
