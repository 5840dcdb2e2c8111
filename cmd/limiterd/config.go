package main

import (
	"encoding/base64"
	"errors"
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

// errInvalidConfig wraps every problem of a config: a flag's value, or
// flags that do not go together.
var errInvalidConfig = errors.New("invalid configuration")

// config is everything main needs, from flags and the environment
// (parseConfig). Each flag sets one field; defaultConfig gives the values
// of the flags not set.
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
	adminAddr       string // the admin API's listener; off when empty
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
	syncDeliveryGrace   float64
	leaseShare          float64
	leaseTime           time.Duration
	syncSpread          float64
	antiEntropyInterval time.Duration
	rejoinInterval      time.Duration
	catchUpWait         time.Duration
	clusterLabel        string
	gossipKey           []byte
	syncTransport       string
	syncDatagramBytes   int
	budget              bool
	coordinate          bool
	coordinatorDeadline time.Duration
	insecureCluster     bool
	gossipKeyFile       string
	gossipKeys          [][]byte // from gossipKeyFile
	maxClockOffset      time.Duration
	syncRouting         counter.Routing
}

// defaultConfig returns the flags' defaults: limiterd's own, and those of
// the packages it wires (counter, cluster, decision, httpapi).
func defaultConfig() config {
	ctr, ctrCluster, node := counter.DefaultConfig(), counter.DefaultClusterConfig("-"), cluster.DefaultConfig()
	return config{
		httpAddr:            "127.0.0.1:8080",
		rulesPaths:          []string{"testdata/rules.yaml"},
		keyHeader:           httpapi.DefaultConfig().KeyHeader,
		maxKeys:             ctr.MaxKeys,
		shards:              ctr.Shards,
		sweepInterval:       10 * time.Second,
		shutdownTimeout:     10 * time.Second,
		logLevel:            slog.LevelInfo,
		logFormat:           "text",
		syncInterval:        ctrCluster.SyncInterval,
		syncDeliveryGrace:   ctrCluster.DeliveryGrace,
		leaseShare:          ctrCluster.LeaseShare,
		leaseTime:           ctrCluster.LeaseTime,
		budget:              ctrCluster.Budget,
		coordinate:          ctrCluster.Coordinated,
		syncRouting:         ctrCluster.Routing,
		syncSpread:          node.SendSpread,
		antiEntropyInterval: node.AntiEntropyInterval,
		rejoinInterval:      node.RejoinInterval,
		catchUpWait:         node.CatchUpWait,
		syncTransport:       node.SyncTransport,
		syncDatagramBytes:   node.DatagramBudget,
		maxClockOffset:      node.MaxClockOffset,
		coordinatorDeadline: decision.DefaultDeadline,
	}
}

// validate reports every problem of c, each error wrapping
// errInvalidConfig.
func (c config) validate() error {
	var errs []error
	if c.logFormat != "text" && c.logFormat != "json" {
		errs = append(errs, fmt.Errorf("%w: -log-format must be text or json, got %q", errInvalidConfig, c.logFormat))
	}
	if c.sweepInterval <= 0 {
		errs = append(errs, fmt.Errorf("%w: -sweep-interval must be positive, got %v", errInvalidConfig, c.sweepInterval))
	}
	if c.shutdownTimeout < 0 {
		errs = append(errs, fmt.Errorf("%w: -shutdown-timeout must not be negative, got %v", errInvalidConfig, c.shutdownTimeout))
	}
	if len(c.rulesPaths) == 0 {
		errs = append(errs, fmt.Errorf("%w: -rules must name a file", errInvalidConfig))
	}
	if c.keyHeader == "" {
		errs = append(errs, fmt.Errorf("%w: -key-header must name a header", errInvalidConfig))
	} else if err := c.httpConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: -key-header: %w", errInvalidConfig, err))
	}
	if err := c.counterConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: -max-keys/-shards: %w", errInvalidConfig, err))
	}
	if err := c.decisionConfig().Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: -coordinator-deadline: %w", errInvalidConfig, err))
	}
	for _, other := range []struct{ addr, flag string }{{c.httpAddr, "-http-addr"}, {c.grpcAddr, "-grpc-addr"}, {c.pprofAddr, "-pprof-addr"}} {
		if c.adminAddr != "" && c.adminAddr == other.addr && !strings.HasSuffix(c.adminAddr, ":0") {
			errs = append(errs, fmt.Errorf("%w: -admin-addr must be a listener of its own, not %s's (%s): the admin API is for operators, not for the clients that reach the others", errInvalidConfig, other.flag, c.adminAddr))
		}
	}
	if c.coordinatorDeadline <= 0 {
		errs = append(errs, fmt.Errorf("%w: -coordinator-deadline must be positive, got %v", errInvalidConfig, c.coordinatorDeadline))
	}
	if c.clustered() && c.unauthenticated() && !c.insecureCluster {
		errs = append(errs, fmt.Errorf("%w: cluster traffic on %s would be unauthenticated: anyone who reaches it could join and inject counts; set -gossip-key (or %s), bind to a loopback address, or pass -insecure-cluster on a network you trust", errInvalidConfig, c.bindAddr, envName("gossip-key")))
	}
	if c.clustered() && c.syncSpread >= c.syncDeliveryGrace && c.syncSpread > 0 {
		errs = append(errs, fmt.Errorf("%w: -sync-spread (%v) must be below -sync-delivery-grace (%v): a tick's last datagrams would leave after the grace in which the bound assumes they arrive", errInvalidConfig, c.syncSpread, c.syncDeliveryGrace))
	}
	if c.clustered() {
		if err := c.clusterConfig("").Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: cluster flags: %w", errInvalidConfig, err))
		}
		if err := c.counterCluster().Validate(); err != nil {
			errs = append(errs, fmt.Errorf("%w: cluster flags: %w", errInvalidConfig, err))
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
	cc.CatchUpWait = c.catchUpWait
	cc.Label = c.clusterLabel
	cc.GossipKey = c.gossipKey
	cc.GossipKeys = c.gossipKeys
	cc.SyncTransport = c.syncTransport
	cc.DatagramBudget = c.syncDatagramBytes
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
	cc.DeliveryGrace = c.syncDeliveryGrace
	cc.LeaseShare = c.leaseShare
	cc.LeaseTime = c.leaseTime
	cc.Budget = c.budget
	cc.Coordinated = c.coordinate
	cc.Routing = c.syncRouting
	return cc
}

// decisionConfig is the decision layer's configuration; the coordinator
// is the cluster node, set in build once it exists.
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

// counterConfig is the counter's configuration.
func (c config) counterConfig() counter.Config {
	cc := counter.DefaultConfig()
	cc.MaxKeys = c.maxKeys
	cc.Shards = c.shards
	return cc
}

// logger is the daemon's logger, writing to w.
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
