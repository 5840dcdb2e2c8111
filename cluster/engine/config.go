package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ErrInvalidConfig wraps configuration errors of this package.
var ErrInvalidConfig = errors.New("engine: invalid config")

// DefaultStreamBytes caps the messages sent over a stream: catch-up state
// always, and everything when every message goes over streams.
const DefaultStreamBytes = 60_000

// DefaultDatagramBytes is the largest message sent as one datagram by
// default: a 1,400-byte UDP packet (memberlist's packet budget, under a
// 1,500-byte Ethernet MTU with the IP and UDP headers) less memberlist's
// framing without a label or encryption. The cluster package computes the
// exact figure for its label and gossip key.
const DefaultDatagramBytes = 1400 - 1 - 5

// Timing is the part of Config that cluster.Config carries as it is
// (embedded), so that each of these settings is declared and documented
// once.
type Timing struct {
	// AntiEntropyInterval is how often the engine re-sends, to every up
	// peer, its slices of the keys whose window is at least the counter's
	// HotShare full (where a lost datagram could change a decision), or,
	// with no such key, a heartbeat: a lost delta is healed within it. It
	// is scheduled in ticks: the tick of every ceil(AntiEntropyInterval /
	// SyncInterval)-th sync slot (slots counted from the Unix epoch, so
	// every node runs it at the same instants), or the first tick after
	// such a slot when that tick was skipped. The sync interval itself is
	// the counter's (counter.ClusterConfig.SyncInterval): there is one,
	// set once, on the counter. Default 1s.
	AntiEntropyInterval time.Duration
	// RejoinInterval is the least time between two catch-ups (full state)
	// sent to one peer, so that a flapping peer cannot cause a storm of
	// full transfers; the cluster layer also joins its seeds that are not
	// alive members again this often (cluster.Config.Join). Default 10s.
	RejoinInterval time.Duration
	// MaxClockOffset is the largest offset by which a peer's clock may be
	// ahead of ours (as estimated from its messages) while this node still
	// merges the peer's slices: their starts are read on the peer's clock
	// (package counter), so past it they land too far off in our window
	// to count right. Only a clock ahead is judged: a message is never
	// early, so an offset ahead is the clocks', while one behind may be
	// nothing but delay (a queue, a node starved of CPU); a peer behind
	// sees this node ahead, and refuses for both. Beyond it the slices of
	// the peer's own that its sync messages carry are not merged but
	// counted (Stats.EntriesSkewed), its asks are answered that this node
	// cannot decide them, and a warning is logged (Config.Log) at most
	// once a minute per peer. Everything else goes on: the peer stays a
	// live member (heartbeats, hellos, membership, its share of the node
	// count), it is sent what every peer is sent, and the slices of this
	// node's own that it sends back are merged (they are on this clock);
	// the two count each other's requests as if partitioned (doc.go) until
	// the offset is back under it. The offset judged is the largest its
	// messages showed over the last one to two AntiEntropyIntervals (a
	// late message looks behind, never ahead). When it is back under the
	// limit, merging resumes with that message, and a hello asks the peer
	// for its state, which brings back the slices refused meanwhile. 0
	// turns the check off. Default 1s in cluster.DefaultConfig (limiterd's
	// -max-clock-offset); DefaultConfig here leaves it 0, as a simulation
	// of skew needs. Under Config.MaxMessageAge (10s), past which messages
	// are stale.
	MaxClockOffset time.Duration
	// CatchUpWait is the longest a node that has just joined its cluster
	// waits to be ready (Ready) for every live peer to be heard from
	// (Unheard): until then its peers may not have seen it up, so that it
	// would decide on counts that lack theirs with asks they cannot
	// answer. A peer that never speaks (dead, not yet declared so) holds
	// it back no longer than this (NFR3). 0: ready at once. Default 5s:
	// a peer sends a member it sees up a heartbeat every
	// AntiEntropyInterval, and memberlist spreads a join within a second
	// or two.
	CatchUpWait time.Duration
}

// DefaultTiming returns the defaults documented on Timing, those of a
// cluster node: MaxClockOffset 1s.
func DefaultTiming() Timing {
	return Timing{AntiEntropyInterval: time.Second, RejoinInterval: 10 * time.Second, MaxClockOffset: time.Second, CatchUpWait: 5 * time.Second}
}

// Problems returns what is wrong with t, one text a field, for messages
// that may be maxMessageAge old (Config.MaxMessageAge). Config.Validate
// and cluster.Config.Validate wrap each in their ErrInvalidConfig.
func (t Timing) Problems(maxMessageAge time.Duration) []string {
	var p []string
	if t.AntiEntropyInterval <= 0 {
		p = append(p, fmt.Sprintf("AntiEntropyInterval must be positive, got %v", t.AntiEntropyInterval))
	}
	if t.RejoinInterval <= 0 {
		p = append(p, fmt.Sprintf("RejoinInterval must be positive, got %v", t.RejoinInterval))
	}
	if t.CatchUpWait < 0 {
		p = append(p, fmt.Sprintf("CatchUpWait must be at least 0 (0: no wait), got %v", t.CatchUpWait))
	}
	if t.MaxClockOffset < 0 || t.MaxClockOffset >= maxMessageAge {
		p = append(p, fmt.Sprintf("MaxClockOffset must be at least 0 (0: no check) and under the stale-message age %v (MaxMessageAge), got %v", maxMessageAge, t.MaxClockOffset))
	}
	return p
}

// Config configures an Engine. Build it from DefaultConfig.
type Config struct {
	// Self is this node's name; it must match the counter's cluster Self.
	Self string
	// Timing: AntiEntropyInterval, RejoinInterval and MaxClockOffset.
	Timing
	// MaxStateSends caps the full-state messages (catch-ups and hello
	// replies, which cost far more than the message that asked for them)
	// sent to all peers together per RejoinInterval; each peer gets at most
	// one per RejoinInterval anyway. A state owed past either limit (a
	// hello from a new process, or a catch-up refused by this cap) is sent
	// by the first Tick that may. Default 16.
	MaxStateSends int
	// MaxMessageAge is the oldest a message may be, its send time on the
	// sender's clock against ours, before it is dropped as stale (ErrStale):
	// the clock offset tolerated plus delivery. A replayed message older
	// than that does nothing. Default 10s, the most it may be.
	MaxMessageAge time.Duration
	// Log, if set, receives the engine's warnings (a peer's clock beyond
	// MaxClockOffset, and its return). nil: discarded.
	Log *slog.Logger
	// SilenceThreshold is how long a peer may stay silent before the
	// engine treats it as having been cut off: its next message brings it
	// a catch-up, and Suspect reports it meanwhile. Zero: three
	// anti-entropy intervals (three missed heartbeats) plus one sync
	// interval.
	SilenceThreshold time.Duration
	// DatagramBytes caps delta, anti-entropy, heartbeat and hello
	// messages: the largest message the transport sends as one datagram
	// (default 1,394: a 1,400-byte UDP packet less memberlist's framing
	// without label or encryption). A single entry that cannot fit still
	// makes a larger message, which the transport must send over a stream.
	DatagramBytes int
	// StreamBytes caps catch-up state and hello replies, which can be
	// megabytes and always go over a stream (default 60,000).
	StreamBytes int
	// StreamOnly marks deltas and anti-entropy reliable too (TransportTCP);
	// set DatagramBytes to StreamBytes with it.
	StreamOnly bool
	// Limits bound decoding.
	Limits DecodeLimits
	// OnNodesChanged, if set, is called with the number of up peers plus
	// one each time PeerUp, PeerDown or Forget changes it, right after
	// counter.SetNodes. It runs on the goroutine that made that call, with
	// no lock of the engine held.
	OnNodesChanged func(alive int)
	// Members, if set, says whether a name is a current member of the
	// cluster; Receive drops a message from anyone else before any work,
	// and keeps nothing of it. The transport's view of membership, which
	// may be ahead of PeerUp (a member's first messages can arrive before
	// its join reaches the engine). nil: every sender is heard (a
	// simulation, whose network holds members only).
	Members func(name string) bool
	// FailoverMisses is how many asks in a row a key's coordinator may
	// miss (no answer by the deadline: AskExpired) before this node asks
	// the next member on the ring instead, until the coordinator
	// is heard from again (any message). Default 3: a lost datagram or
	// two do not move a key, a silent node is passed over after three
	// checks' deadlines.
	FailoverMisses int
	// FailoverSilence passes over a coordinator after a single miss when
	// nothing at all (not even a heartbeat) came from it for this long,
	// so that a key whose checks at the margin are rare does not wait on
	// a silent node FailoverMisses times. Default 1s: a live peer sends at
	// least a heartbeat every AntiEntropyInterval.
	FailoverSilence time.Duration
	// FirstAskID is where this engine's ask ids start (the first is one
	// above it). A coordinator remembers the ids it decided for
	// MaxMessageAge and drops an ask it saw before as a replay, so a
	// process that restarts under its name must not reuse its previous
	// incarnation's ids: the transport sets it from the start time (unix
	// nanoseconds), which grows faster than any process asks. 0 in a
	// simulation, where no process restarts with its engine's memory lost.
	FirstAskID uint64
}

// DefaultConfig returns the defaults documented on Config.
func DefaultConfig(self string) Config {
	t := DefaultTiming()
	t.MaxClockOffset = 0 // no check: a simulation of skew needs none
	return Config{
		Self:            self,
		Timing:          t,
		MaxStateSends:   16,
		MaxMessageAge:   askMemory,
		DatagramBytes:   DefaultDatagramBytes,
		StreamBytes:     DefaultStreamBytes,
		Limits:          DefaultDecodeLimits(),
		FailoverMisses:  3,
		FailoverSilence: time.Second,
	}
}

// Validate reports every invalid field, each error wrapping ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if c.Self == "" || len(c.Self) > c.Limits.MaxNameBytes {
		bad("Self must have 1 to %d bytes, got %d", c.Limits.MaxNameBytes, len(c.Self))
	}
	for _, p := range c.Timing.Problems(c.MaxMessageAge) {
		bad("%s", p)
	}
	if c.MaxStateSends < 1 {
		bad("MaxStateSends must be at least 1, got %d", c.MaxStateSends)
	}
	if c.MaxMessageAge <= 0 || c.MaxMessageAge > askMemory {
		bad("MaxMessageAge must be positive and at most %v, got %v", askMemory, c.MaxMessageAge)
	}
	if c.SilenceThreshold < 0 {
		bad("SilenceThreshold must not be negative, got %v", c.SilenceThreshold)
	}
	if c.DatagramBytes < 512 || c.DatagramBytes > c.Limits.MaxMessageBytes {
		bad("DatagramBytes must be between 512 and Limits.MaxMessageBytes (%d), got %d", c.Limits.MaxMessageBytes, c.DatagramBytes)
	}
	if c.StreamBytes < c.DatagramBytes || c.StreamBytes > c.Limits.MaxMessageBytes {
		bad("StreamBytes must be between DatagramBytes (%d) and Limits.MaxMessageBytes (%d), got %d", c.DatagramBytes, c.Limits.MaxMessageBytes, c.StreamBytes)
	}
	if c.Limits.MaxEntries < 1 || c.Limits.MaxKeyBytes < 1 || c.Limits.MaxNameBytes < 1 {
		bad("decode limits must be positive: %+v", c.Limits)
	}
	if c.FailoverMisses < 1 {
		bad("FailoverMisses must be at least 1, got %d", c.FailoverMisses)
	}
	if c.FailoverSilence <= 0 {
		bad("FailoverSilence must be positive, got %v", c.FailoverSilence)
	}
	return errors.Join(errs...)
}
