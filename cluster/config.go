package cluster

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/limiterd/limiterd/cluster/engine"
)

// Sync transports (Config.SyncTransport).
const (
	// TransportUDP sends deltas and anti-entropy in datagrams
	// (memberlist's SendBestEffort), each under udpBudget bytes on the
	// wire. The default: see doc.go for the measurement behind it.
	TransportUDP = "udp"
	// TransportTCP sends them over a stream (memberlist's SendReliable,
	// one connection per message) in messages of up to 60,000 bytes.
	TransportTCP = "tcp"
)

// DefaultDatagramBudget is the datagram budget of a node whose
// Config.DatagramBudget is 0, unless it is bound to a loopback address:
// memberlist's own packet budget (UDPBufferSize), which stays under a
// 1,500-byte Ethernet MTU with the IP and UDP headers.
const DefaultDatagramBudget = 1400

// The range of Config.DatagramBudget: at least what IPv6's least MTU
// (1,280 bytes) carries, with room for the longest label and encryption;
// at most the largest message a stream carries (engine.DefaultStreamBytes),
// well under UDP's limit.
const (
	MinDatagramBudget = 1200
	MaxDatagramBudget = engine.DefaultStreamBytes
)

// Config configures a Node. Build it from DefaultConfig.
type Config struct {
	// NodeName names this node in the cluster; unique among the nodes, and
	// stable across restarts (a restarted node learns back from its peers
	// the counts it had sent under this name). It must equal the counter's
	// cluster Self. Default: DefaultNodeName(BindAddr).
	NodeName string
	// BindAddr is the HOST:PORT memberlist listens on, UDP and TCP on the
	// same port. Port 0 picks a free port (tests). Default "0.0.0.0:7946".
	BindAddr string
	// AdvertiseAddr is the HOST:PORT peers reach this node at, when it is
	// not BindAddr (NAT, containers). HOST must be an IP address. Empty:
	// the bound address (with 0.0.0.0, a private address of this host).
	AdvertiseAddr string
	// Join lists HOST:PORT seeds to join at start; empty starts a cluster
	// of one that others join. HOST may be a name: every address it
	// resolves to (A and AAAA) is a seed, so a Kubernetes headless
	// Service's name joins every pod it lists. Seeds that are not alive
	// members are joined again every RejoinInterval, their names looked up
	// again each time, so the halves of a healed partition merge again
	// (memberlist alone would leave them apart) and pods that came later
	// are found.
	Join []string
	// Resolver looks up the names in Join; nil: the system's
	// (net.DefaultResolver).
	Resolver *net.Resolver
	// HTTPAddr, if set, is published to the peers in the node's metadata
	// and shown in their /cluster.
	HTTPAddr string
	// Timing: AntiEntropyInterval, RejoinInterval and MaxClockOffset, as
	// the engine takes them (documented on engine.Timing). Defaults 1s,
	// 10s and 1s (engine.DefaultTiming).
	engine.Timing
	// LeaveTimeout bounds the wait for the leave broadcast at shutdown.
	// Default 2s.
	LeaveTimeout time.Duration
	// Label is memberlist's cluster label: every packet and stream carries
	// it and a node drops what carries another, so two clusters on one
	// network cannot merge by mistake. Empty: no label. At most 255 bytes.
	Label string
	// GossipKey, if set, encrypts and authenticates all cluster traffic
	// (AES-GCM through memberlist's keyring): 16, 24 or 32 bytes for
	// AES-128, -192 or -256. Nodes without the same key cannot join, read
	// or inject counts.
	GossipKey []byte
	// GossipKeys, if set instead of GossipKey, is a keyring: the first key
	// encrypts, every key decrypts, so that a key can be rotated without a
	// restart (Node.SetGossipKeys; see SECURITY.md). Each 16, 24 or 32 bytes.
	GossipKeys [][]byte
	// SyncTransport is TransportUDP (default) or TransportTCP.
	SyncTransport string
	// DatagramBudget is the most bytes one sync datagram (TransportUDP)
	// may take, memberlist's framing included, the IP and UDP headers
	// not. 0 (the default): DefaultDatagramBudget, 1,400, under a
	// 1,500-byte Ethernet MTU, or, when BindAddr is a loopback address
	// (every peer on this host), what the loopback interface carries:
	// 60,000 on Linux (budget.go). On a network of larger frames (an MTU
	// of 9,001 between instances of one AWS VPC, say) a larger budget
	// carries more entries a datagram, so every node sends, receives and
	// handles fewer of them (8,900 carries about six times 1,400's). A
	// budget past the path's MTU makes IP fragment the datagrams, and a
	// lost fragment loses the whole datagram; a network that drops
	// fragments loses them all. Use the MTU less 28 (IPv4) or 48 (IPv6)
	// at most; on an overlay or VPN of a smaller MTU than 1,428, lower it
	// likewise. 0, or MinDatagramBudget to MaxDatagramBudget.
	DatagramBudget int
	// SendSpread spreads the datagrams of one tick to one peer evenly over
	// this share of the sync interval after the tick (default 0.1: 20 ms of
	// 200 ms; 0 sends them at once). Ticks are aligned on every node, so
	// without it every node encodes, sends and merges in the same few
	// milliseconds, and checks answered then wait (docs/real-cluster.md).
	// At most 0.25: the budget assumes a delta is merged within the
	// counter's DeliveryGrace (a quarter of the interval by default) of
	// its tick.
	SendSpread float64
	// QueueLength is how many batches of messages may wait for one peer
	// (each tick makes one batch); beyond it a batch is dropped and
	// counted. Default 64, about 13 s of ticks at 200ms.
	QueueLength int
	// Now is the node's clock: every instant it hands the engine (ticks,
	// receives, stale and silence checks, /cluster and the metrics) is
	// read from it, and the send time in each of its messages. Default
	// time.Now. limiterd's -test-clock-offset shifts it (fault tests of a
	// skewed node: Go ignores libfaketime); the counter's decisions must
	// read the same clock (decision.Config.Now). Timers, socket and send
	// deadlines stay on the real clock: only durations are taken from it.
	Now func() time.Time
	// OnNodesChanged, if set, is called with the number of alive (or
	// suspect) members, this node included, each time it changes, right
	// after the counter was told (counter.SetNodes): the moment the
	// counter's worst case per limit (counter.(*Counter).WorstCase)
	// changes with it. It is not called for the initial count of one. It
	// runs on the node's sync goroutine, one call at a time and in order,
	// with no lock of the node held, so it may call the node's methods; it
	// must return quickly, since the next sync tick waits for it.
	OnNodesChanged func(alive int)
}

// DefaultConfig returns the defaults documented on Config, with NodeName
// derived from the default BindAddr.
func DefaultConfig() Config {
	c := Config{
		BindAddr:       "0.0.0.0:7946",
		Timing:         engine.DefaultTiming(),
		LeaveTimeout:   2 * time.Second,
		SyncTransport:  TransportUDP,
		DatagramBudget: 0, // DefaultDatagramBudget, or the loopback's (budget.go)
		SendSpread:     0.1,
		QueueLength:    64,
		Now:            time.Now,
	}
	c.NodeName, _ = DefaultNodeName(c.BindAddr)
	return c
}

// DefaultNodeName returns the host name and the port of bindAddr, joined by
// a dash ("web-3-7946"): unique among several nodes on one host, and stable
// across restarts on the same port.
func DefaultNodeName(bindAddr string) (string, error) {
	_, port, err := net.SplitHostPort(bindAddr)
	if err != nil {
		return "", fmt.Errorf("%w: bind address %q: %v", ErrInvalidConfig, bindAddr, err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "limiterd"
	}
	return host + "-" + port, nil
}

// maxLabelBytes is memberlist's LabelMaxSize.
const maxLabelBytes = 255

// Validate reports every invalid field, each error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.NodeName == "" || len(c.NodeName) > engine.DefaultDecodeLimits().MaxNameBytes {
		bad("NodeName must have 1 to %d bytes, got %d", engine.DefaultDecodeLimits().MaxNameBytes, len(c.NodeName))
	}
	if host, _, err := splitHostPort(c.BindAddr); err != nil {
		bad("BindAddr: %v", err)
	} else if host != "" && net.ParseIP(host) == nil {
		bad("BindAddr: host %q must be an IP address", host)
	}
	if c.AdvertiseAddr != "" {
		if host, _, err := splitHostPort(c.AdvertiseAddr); err != nil {
			bad("AdvertiseAddr: %v", err)
		} else if net.ParseIP(host) == nil {
			bad("AdvertiseAddr: host %q must be an IP address", host)
		}
	}
	for _, j := range c.Join {
		if _, _, err := net.SplitHostPort(j); err != nil {
			bad("Join address %q: %v", j, err)
		}
	}
	for _, p := range c.Timing.Problems(engine.DefaultConfig("-").MaxMessageAge) {
		bad("%s", p)
	}
	if c.LeaveTimeout <= 0 {
		bad("LeaveTimeout must be positive, got %v", c.LeaveTimeout)
	}
	if len(c.Label) > maxLabelBytes {
		bad("Label must have at most %d bytes, got %d", maxLabelBytes, len(c.Label))
	}
	if len(c.GossipKey) > 0 && len(c.GossipKeys) > 0 {
		bad("GossipKey and GossipKeys are exclusive")
	}
	for _, k := range c.GossipKeys {
		if err := CheckGossipKey("every key of GossipKeys", k); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.GossipKey) > 0 {
		if err := CheckGossipKey("GossipKey", c.GossipKey); err != nil {
			errs = append(errs, err)
		}
	}
	if c.SyncTransport != TransportUDP && c.SyncTransport != TransportTCP {
		bad("SyncTransport must be %q or %q, got %q", TransportUDP, TransportTCP, c.SyncTransport)
	}
	if c.DatagramBudget != 0 && (c.DatagramBudget < MinDatagramBudget || c.DatagramBudget > MaxDatagramBudget) {
		bad("DatagramBudget must be 0 (the default for BindAddr) or between %d and %d bytes, got %d", MinDatagramBudget, MaxDatagramBudget, c.DatagramBudget)
	}
	if !(c.SendSpread >= 0 && c.SendSpread <= 0.25) {
		bad("SendSpread must be between 0 and 0.25 (a share of the sync interval), got %v", c.SendSpread)
	}
	if c.QueueLength < 1 {
		bad("QueueLength must be positive, got %d", c.QueueLength)
	}
	return errors.Join(errs...)
}

// splitHostPort splits HOST:PORT with a numeric port.
func splitHostPort(hp string) (string, int, error) {
	host, p, err := net.SplitHostPort(hp)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("port %q is not a number between 0 and 65535", p)
	}
	return host, port, nil
}

// datagramMessageBytes is the largest sync message that still fits one
// datagram of c.DatagramBudget bytes with c's label and encryption.
func (c Config) datagramMessageBytes() int {
	budget := c.DatagramBudget
	if budget == 0 { // not resolved (resolveBudget): the least default
		budget = DefaultDatagramBudget
	}
	return datagramBytes(budget, c.Label, len(c.GossipKey) > 0 || len(c.GossipKeys) > 0)
}

// datagramBytes is the largest sync message that still fits one datagram
// of budget bytes with memberlist's framing: the user-message byte, the
// CRC header, the label header and the AES-GCM overhead.
func datagramBytes(budget int, label string, encrypted bool) int {
	n := budget - 1 - 5
	if label != "" {
		n -= 2 + len(label)
	}
	if encrypted {
		n -= 1 + 12 + 16 // version, nonce, tag
	}
	return n
}

// engineConfig is the Engine's configuration for this node.
func (c Config) engineConfig() engine.Config {
	ec := engine.DefaultConfig(c.NodeName)
	ec.Timing = c.Timing
	ec.DatagramBytes = c.syncMessageBytes()
	ec.StreamBytes = engine.DefaultStreamBytes
	ec.StreamOnly = c.SyncTransport == TransportTCP
	return ec
}

// syncMessageBytes caps delta and anti-entropy messages.
func (c Config) syncMessageBytes() int {
	if c.SyncTransport == TransportTCP {
		return engine.DefaultStreamBytes
	}
	return c.datagramMessageBytes()
}

// ErrInvalidConfig wraps configuration errors of this package.
var ErrInvalidConfig = errors.New("cluster: invalid config")
