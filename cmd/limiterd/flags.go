package main

import (
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/limiterd/limiterd/cluster"
)

// envPrefix prefixes the environment variable that mirrors each flag:
// -http-addr is LIMITERD_HTTP_ADDR. A flag on the command line wins.
const envPrefix = "LIMITERD_"

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
	cfg := defaultConfig()
	fs := flag.NewFlagSet("limiterd", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.httpAddr, "http-addr", cfg.httpAddr, "`HOST:PORT` the HTTP API (/check, /metrics, /healthz, /readyz) listens on")
	rules := &fileList{paths: cfg.rulesPaths}
	fs.Var(rules, "rules", "rule `FILE`: limiterd's YAML, or an envoyproxy/ratelimit configuration as it is (recognised by its top-level domain); repeat the flag (or separate with commas) for several, side by side; reloaded on SIGHUP and when a file changes")
	fs.StringVar(&cfg.grpcAddr, "grpc-addr", cfg.grpcAddr, "`HOST:PORT` for Envoy's rate limit service (gRPC envoy.service.ratelimit.v3, with health and reflection); off when empty")
	fs.BoolVar(&cfg.draft03Headers, "envoy-draft03-headers", false, "also send X-RateLimit-Limit, X-RateLimit-Remaining and X-RateLimit-Reset in Envoy's response_headers_to_add, as envoyproxy/ratelimit does, beside the RateLimit fields")
	fs.StringVar(&cfg.keyHeader, "key-header", cfg.keyHeader, "request `HEADER` the key is taken from when /check has no key parameter (X-Forwarded-For: its first address)")
	fs.IntVar(&cfg.maxKeys, "max-keys", cfg.maxKeys, "most (rule limit, key) pairs tracked at once, which bounds memory; new keys past it are allowed uncounted (metric limiterd_untracked_checks_total)")
	fs.IntVar(&cfg.shards, "shards", cfg.shards, "independently locked partitions of the key space (a power of two)")
	fs.DurationVar(&cfg.sweepInterval, "sweep-interval", cfg.sweepInterval, "how often keys whose window is empty are dropped")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", cfg.shutdownTimeout, "how long in-flight requests may take to finish on SIGINT/SIGTERM")
	fs.StringVar(&cfg.pprofAddr, "pprof-addr", cfg.pprofAddr, "`HOST:PORT` for Go's /debug/pprof/ profiles on a listener of their own; off when empty (keep it on loopback)")
	fs.StringVar(&cfg.adminAddr, "admin-addr", cfg.adminAddr, "`HOST:PORT` for the admin API on a listener of its own, never -http-addr's: GET /v1/keys?key=K[&rule=R] shows a key's counts without counting, DELETE resets the key on every node (through its coordinator); off when empty. It has no authentication: keep it on loopback or a network only operators reach")
	level := fs.String("log-level", strings.ToLower(cfg.logLevel.String()), "log `LEVEL`: debug, info, warn or error")
	fs.StringVar(&cfg.logFormat, "log-format", cfg.logFormat, "log `FORMAT`: text or json")
	fs.DurationVar(&cfg.testClockOffset, "test-clock-offset", cfg.testClockOffset, "for fault tests only, never in production: shift every instant this node reads (its decisions, the send time of its cluster messages, its sync ticks, its stale-message checks, /cluster) by this `DURATION`, which may be negative, to play a node whose clock is off (a Go binary ignores libfaketime); 0: the real clock")

	fs.StringVar(&cfg.nodeName, "node-name", cfg.nodeName, "this node's `NAME` in the cluster, unique and stable across restarts (empty: host name and -bind-addr port, e.g. web-3-7946)")
	fs.StringVar(&cfg.bindAddr, "bind-addr", cfg.bindAddr, "`HOST:PORT` the cluster (memberlist, UDP and TCP) listens on; cluster mode is on when this or -join is set (with only -join: "+defaultBindAddr+"); neither: a single node")
	fs.StringVar(&cfg.advertiseAddr, "advertise-addr", cfg.advertiseAddr, "`IP:PORT` peers reach this node at, when not -bind-addr (NAT, containers)")
	join := fs.String("join", "", "`HOST:PORT[,HOST:PORT...]` seeds to join at start, and to join again while they are not members (so the halves of a healed partition merge); a HOST name joins every address it resolves to (a Kubernetes headless Service: every pod); /readyz answers 503 until one has answered, then until every member has been heard from (-catch-up-wait)")
	fs.DurationVar(&cfg.syncInterval, "sync-interval", cfg.syncInterval, "how often each node sends its count changes to its peers (the counter's sync interval: the budget's blind interval too)")
	fs.TextVar(&cfg.syncRouting, "sync-routing", cfg.syncRouting, "`auto`, never or always: where a key's count changes go. auto: to every peer when the key's limit leaves each node a blind share of its tolerance, else (a limit small against the number of nodes, e.g. 600 a minute on more than 24 nodes) to the key's coordinator alone, so that a node's sync cost follows its own traffic, not the cluster's (docs/scaling.md); never: always to every peer; always: always to the coordinator, and no node admits anything blind (every check past a lease asks it). Needs -coordinate")
	fs.DurationVar(&cfg.antiEntropyInterval, "anti-entropy-interval", cfg.antiEntropyInterval, "how often each node re-sends its counts of the keys over half their limit (or a heartbeat): a lost datagram is healed within it")
	fs.DurationVar(&cfg.rejoinInterval, "rejoin-interval", cfg.rejoinInterval, "how often -join seeds that are not members are joined again")
	fs.DurationVar(&cfg.catchUpWait, "catch-up-wait", cfg.catchUpWait, "longest /readyz answers 503 after joining while a live member has not been heard from since (it may not have seen this node yet: a restarted node would decide on counts lacking its peers', with asks they cannot answer); 0: ready once joined")
	fs.StringVar(&cfg.clusterLabel, "cluster-label", cfg.clusterLabel, "`LABEL` carried by all cluster traffic; nodes with another label are ignored (at most 255 bytes)")
	gossipKey := fs.String("gossip-key", "", "`BASE64` of a 16, 24 or 32-byte key that encrypts and authenticates cluster traffic (AES-GCM); nodes without it cannot join or inject counts. Prefer the environment variable: flags show in ps")
	fs.StringVar(&cfg.gossipKeyFile, "gossip-key-file", cfg.gossipKeyFile, "`FILE` of gossip keys, base64, one a line (# comments): the first encrypts, all decrypt; re-read on SIGHUP, so a key rotates without a restart (SECURITY.md). Instead of -gossip-key")
	fs.BoolVar(&cfg.insecureCluster, "insecure-cluster", cfg.insecureCluster, "run the cluster without -gossip-key on an address other hosts can reach: anyone who reaches the port can then join, read counts and inject them. Only on a network you trust; without it a node refuses to start so (a loopback -bind-addr needs no key)")
	fs.Float64Var(&cfg.syncDeliveryGrace, "sync-delivery-grace", cfg.syncDeliveryGrace, "share of -sync-interval after each tick within which a node's count changes must reach its peers (0 to 1, above -sync-spread): a node counts what it admitted in the interval before as not yet seen by its peers for that long, and the 1.1 x bound holds while every change arrives within it (limiterd_rule_worst_case_ratio follows it). Raise it with a short -sync-interval (at 20ms, 0.25 is 5 ms) or a slow or busy network or host (limiterd_sync_late_deltas_total counts the deltas that miss it); the larger, the fewer checks a node admits alone in an interval, and the more it asks the coordinator")
	fs.Float64Var(&cfg.syncSpread, "sync-spread", cfg.syncSpread, "spread each tick's datagrams to a peer over this share of -sync-interval after the tick, so that the nodes' aligned ticks do not all send and merge at once (0: at once; at most 0.25)")
	fs.StringVar(&cfg.syncTransport, "sync-transport", cfg.syncTransport, "`udp` (datagrams of at most -sync-datagram-bytes) or tcp (a stream per message) for count changes; catch-up state always goes over TCP")
	fs.IntVar(&cfg.syncDatagramBytes, "sync-datagram-bytes", cfg.syncDatagramBytes, fmt.Sprintf("`BYTES` one count-change datagram may take, memberlist's framing included (0, or %d to %d). 0 (the default): 1400, under a 1,500-byte MTU, or with a loopback -bind-addr (every peer on this host) what the loopback carries, 60000 on Linux. On larger frames (9,001 within an AWS VPC) up to the MTU less 28 (IPv4) or 48 (IPv6) carries more counts a datagram, so every node handles fewer (8900 carries about six times as many). Past the path's MTU, IP fragments them, and a network that drops fragments loses them all: on an MTU under 1,428 (an overlay, a VPN), lower it likewise", cluster.MinDatagramBudget, cluster.MaxDatagramBudget))
	fs.BoolVar(&cfg.coordinate, "coordinate", cfg.coordinate, "decide checks at the margin with the key's coordinator node: a node admits alone only its blind share of a key (a slice of the 10 % tolerance) and asks the coordinator, synchronously, past it; false: every node decides alone with the budget (-budget)")
	fs.Float64Var(&cfg.leaseShare, "lease-share", cfg.leaseShare, "share of each key's blind pool (the tolerance left after the slices' tails) that its coordinator may lend as leases, 0 to 1; each node's blind share gets the rest. Leases spare a client whose checks all reach one node (600 checks sent to one node at once: 29 asks at the default 0.46, the least share that keeps them within 5 %, 24 at 0.6); blind shares spare clients spread over the nodes (simulated HS2 load: clients within their limit wait for 0.006 % of their checks at 0.46, 0.13 % at 0.6, none at 0; clients at 0.9 to 1.1 x it for 0.1 % at 0.46, 1.26 % at 0.6). The worst case stays within 1.1 x at every share (limiterd_rule_worst_case_ratio follows it). Needs -coordinate")
	fs.DurationVar(&cfg.leaseTime, "lease-time", cfg.leaseTime, "how long a node decides a key on a lease of a limit every node merges before it asks its coordinator again (a node uses one at most about 65 s, whatever this says). Such a lease bounds what its holder admitted that its peers have not yet merged, not what it admits in all, so the 1.1 x bound holds at any lease time: a longer one means fewer renewals, each a check that waits on the network, and the pool held longer by a node that stopped using its lease (its coordinator counts the lease that long, routed limits' leases too, though those are used a second). At 10s, 1,000 keys each checked at five times its limit at one node asked a fifth less than at 3s (scripts/bench-loopback.sh), and the simulated HS2 load waited 0.32-0.33 % of its checks against 0.31-0.33 %. Needs -lease-share above 0")
	fs.DurationVar(&cfg.coordinatorDeadline, "coordinator-deadline", cfg.coordinatorDeadline, "longest wait for the key's coordinator's answer (the ask is sent again at half of it); past it the node decides alone with the budget and counts a fallback (limiterd_coordinated_checks_total{result=\"fallback_timeout\"}); at most 1s")
	fs.DurationVar(&cfg.maxClockOffset, "max-clock-offset", cfg.maxClockOffset, "largest offset by which a peer's clock may be ahead of this node's (limiterd_cluster_clock_offset_seconds) while its counts are still merged (a clock behind is not judged: it looks like delay, and the peer refuses this node's counts instead): beyond it the peer stays a member, but its counts are not merged (limiterd_sync_entries_total{result=\"skewed\"}, a warning a minute), it is not asked about the keys it coordinates (their runner-up decides them), and the two count each other's requests as across a partition until its clock is back; 0: no check; under 10s (the stale-message age)")
	fs.BoolVar(&cfg.budget, "budget", cfg.budget, "between two syncs, admit at most this node's share of what a key has left: with -coordinate the fallback when the coordinator does not answer in time, else the rule for every check (bounds a burst spread over all nodes; a client at its limit rate never meets it)")
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
