package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// ErrInvalidConfig wraps configuration errors of this package.
var ErrInvalidConfig = errors.New("engine: invalid config")

// ErrReplay is returned by Receive for a hello it has answered already (a
// replay: a reply is a full state transfer) and for an ask it has decided
// already or that is stale (deciding it again would grant it twice).
var ErrReplay = errors.New("engine: replayed message")

// ErrStale is returned by Receive for a message sent (on its sender's
// clock) more than Config.MaxMessageAge before it arrived: a replay
// of a captured message, or a peer whose clock is that far behind.
var ErrStale = errors.New("engine: stale message")

// ErrUnheard is returned by Ready while live peers have not been heard
// from since the node joined.
var ErrUnheard = errors.New("engine: live peers not heard from yet")

// ErrNotMember is returned by Receive for a message whose sender is not an
// up member (PeerUp without PeerDown since): it is dropped before any work.
var ErrNotMember = errors.New("engine: sender is not a member")

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

// Purpose says why an Outbound is sent; the transport may count or log by
// it, and decides nothing on it (Reliable and Spread say how to send).
type Purpose uint8

// The purposes of outbound messages.
const (
	// PurposeDelta: the local changes of one tick.
	PurposeDelta Purpose = iota + 1
	// PurposeAntiEntropy: the slices of the hot keys, re-sent.
	PurposeAntiEntropy
	// PurposeHeartbeat: an empty state message, anti-entropy with no hot key.
	PurposeHeartbeat
	// PurposeHello: "this process started; send me what I had counted".
	PurposeHello
	// PurposeReply: the answer to a peer's hello (StateFor the peer).
	PurposeReply
	// PurposeCatchUp: StateFor a peer that joined, came back, or was
	// silent for longer than SilenceThreshold.
	PurposeCatchUp
	// PurposeAnswer: this node's answer, as a key's coordinator, to a
	// peer's ask. Send it at once, ahead of any queued sync traffic: the
	// asker waits for it with a deadline of a few milliseconds. The answer
	// to a reset and its acknowledgements go so too.
	PurposeAnswer
	// PurposeAsk: a check at the margin for the key's coordinator (Ask).
	// Send it at once from the waiting goroutine.
	PurposeAsk
	// PurposeRelease: the release of an ask given up (AskExpired).
	PurposeRelease
	// PurposeReset: a reset for the key's coordinator, or the
	// coordinator's for a peer to apply (reset.go).
	PurposeReset
	// PurposeSilence: a notice that this node failed a coordinator over
	// (silence.go), for every up peer.
	PurposeSilence
)

// String returns the purpose's name, as logs and metrics would show it.
func (p Purpose) String() string {
	switch p {
	case PurposeDelta:
		return "delta"
	case PurposeAntiEntropy:
		return "anti-entropy"
	case PurposeHeartbeat:
		return "heartbeat"
	case PurposeHello:
		return "hello"
	case PurposeReply:
		return "reply"
	case PurposeCatchUp:
		return "catch-up"
	case PurposeAnswer:
		return "answer"
	case PurposeAsk:
		return "ask"
	case PurposeRelease:
		return "release"
	case PurposeReset:
		return "reset"
	case PurposeSilence:
		return "silence"
	}
	return fmt.Sprintf("purpose(%d)", uint8(p))
}

// Outbound is a list of messages for one peer. The Outbounds of one call
// may share their Msgs (the same deltas go to every peer): the transport
// must treat them as read-only.
type Outbound struct {
	To      string
	Purpose Purpose
	Msgs    [][]byte
	// Reliable asks for a stream rather than datagrams: catch-up state and
	// hellos always, everything with StreamOnly. A message longer than
	// DatagramBytes must go over a stream even when Reliable is false.
	Reliable bool
	// Spread allows the transport to spread the messages over a share of
	// the sync interval after the tick (cluster.Config.SendSpread), so that
	// aligned ticks do not all land at once. Only a tick's datagrams are.
	Spread bool
}

// PeerState is what an Engine knows of one peer.
type PeerState struct {
	// Up is whether the peer is a live member (PeerUp without PeerDown
	// since): it is sent deltas and anti-entropy and counted by SetNodes.
	Up bool
	// LastMessage is when the last message from the peer was received; the
	// zero time if none was.
	LastMessage time.Time
	// Offset is the peer's clock minus ours, estimated from its last
	// message's send time (so it includes the one-way network delay).
	Offset time.Duration
	// AsksExpired counts this node's asks to the peer given up without an
	// answer by their deadline (AskExpired), since the peer was first
	// known: a coordinator's misses, which fail it over (ask.go).
	AsksExpired uint64
	// Skewed is whether the peer's clock was beyond MaxClockOffset as of
	// its last sync message (judged on the largest offset of the last one
	// to two anti-entropy intervals): the slices of its own that it sends
	// are not merged.
	Skewed bool
}

// Stats counts an Engine's traffic. Read with the atomics' Load.
type Stats struct {
	MessagesSent, BytesSent         atomic.Uint64 // as reported by the transport (CountSent)
	MessagesReceived, BytesReceived atomic.Uint64
	DecodeErrors                    atomic.Uint64 // malformed: corrupt, forged or over DecodeLimits
	VersionMismatches               atomic.Uint64 // well framed, of a wire version this node does not decode
	EntriesMerged, EntriesIgnored   atomic.Uint64 // ignored: expired, unknown limit, no room, unchanged, erased by a reset
	EntriesRefused                  atomic.Uint64 // forged: another node's slices, or more than a window holds
	EntriesSkewed                   atomic.Uint64 // not merged: their origin's clock is beyond MaxClockOffset
	SkewedMessages                  atomic.Uint64 // sync messages and asks of a peer beyond MaxClockOffset: slices not merged, asks not decided
	DeltaMessages                   atomic.Uint64 // delta messages Tick encoded, once however many peers get them
	CatchUps                        atomic.Uint64 // catch-ups sent, on PeerUp or after silence
	SilenceCatchUps                 atomic.Uint64 // of which after a peer's silence
	Replies                         atomic.Uint64 // full states sent for a hello, or owed and sent by Tick
	AsksAnswered                    atomic.Uint64 // peers' asks this node decided as coordinator
	AnswersRepeated                 atomic.Uint64 // of peers' asks repeated (AskAgain), those answered again with the answer given
	AsksRelayed                     atomic.Uint64 // peers' asks of a routed key passed on to its coordinator (relayTo, relay.go)
	AnswersForwarded                atomic.Uint64 // answers to asks this node passed on, forwarded to their askers (relay.go)
	AsksAround                      atomic.Uint64 // asks sent through the next node to a coordinator failed over here, by its runner-up (relay.go)
	AsksToCoordinator               atomic.Uint64 // asks this node sent to the key's coordinator (Ask)
	AsksToRunnerUp                  atomic.Uint64 // asks sent to a runner-up instead: the key's coordinator had missed its asks
	AsksRetried                     atomic.Uint64 // asks sent again, the same message, after no answer within part of the deadline (AskAgain)
	AsksExpired                     atomic.Uint64 // asks of either kind given up without an answer (AskExpired)
	AsksAlone                       atomic.Uint64 // checks Ask left to the budget at once: every node above this one had missed its asks
	SilenceNoticesSent              atomic.Uint64 // notices of coordinators failed over here, once however many peers get them (silence.go)
	SilenceNoticesReceived          atomic.Uint64 // peers' notices taken
	FailoversTold                   atomic.Uint64 // coordinators failed over here on a peer's notice, not on this node's misses
	Releases                        atomic.Uint64 // releases received
	NotMember                       atomic.Uint64 // messages dropped: the sender is no member
	Replays                         atomic.Uint64 // hellos and asks dropped as replays
	Stale                           atomic.Uint64 // messages dropped as older than MaxMessageAge
	StatesDeferred                  atomic.Uint64 // catch-ups and hello replies held back by a rate limit, sent by a later Tick
	// DeltaDelays holds, for each delta message of a peer (anti-entropy's
	// included), how much later it arrived than the fastest of that peer's
	// messages of the last one or two AntiEntropyIntervals (clockEstimate):
	// its delay less theirs, the clocks' offset cancelled. Its sender's
	// tick sets its send time, so this is at most how long after that tick
	// it arrived, and short of it by the fastest message's delay (well
	// under a millisecond on a LAN). LateDeltas counts those later than
	// the counter's DeliveryGrace, within which the bound assumes every
	// delta arrives.
	DeltaDelays DelayHistogram
	LateDeltas  atomic.Uint64
}

// peer is the engine's state of one peer, under Engine.mu.
type peer struct {
	PeerState
	greeted     bool             // this engine sent it a hello
	asks        map[uint64]int64 // ids of its asks decided here, and when (freshAsk)
	helloSet    bool             // lastHelloMs is set
	lastHelloMs int64            // send time of the last hello answered (the sender's clock)
	caughtUp    bool             // lastCatchUp is set
	lastCatchUp time.Time        // when it was last sent a catch-up
	replied     bool             // lastReply is set
	lastReply   time.Time        // when a hello of its was last answered
	stateDue    bool             // owed a full state that a rate limit held back (Tick sends it)
	clock       clockEstimate    // its clock offset, for MaxClockOffset (skew.go)
	misses      int              // asks to it given up in a row since it was last heard (ask.go)
	told        bool             // its failover was told to the peers, or by one, since it was last heard (silence.go)
	toldAt      time.Time        // when this node last told the peers it failed it over
	noRelay     bool             // it does not decode the relay envelopes (SetPeerRelays)
	noLead      bool             // it does not decode version 5 asks, which state a lead (SetPeerCoordVersion)
	leadSet     bool             // leadMs is set
	leadMs      int64            // the lead of this node's clock its last ask decided here reported (counter.Ask.Lead)
	leadAtMs    int64            // when that ask was decided, unix ms
	lastCoord   time.Time        // its last coordination message, answers forwarded through this node included (heard)
	// decodes is the newest sync version it decodes (SetPeerSyncVersion);
	// 0 when not told, taken as wireVersion.
	decodes uint8
}

// Engine is the cluster's sync policy, with no goroutine, clock, network or
// membership library of its own: the transport tells it the time, the
// membership events and the messages that arrived, and sends the messages
// it returns. See the package documentation for the policy and the
// concurrency contract.
type Engine struct {
	c    *counter.Counter
	cfg  Config
	log  *slog.Logger
	h    *codec.MsgpackHandle
	pool sync.Pool // of *wire

	tickMu  sync.Mutex      // serializes Tick: the counter's change set and buf
	buf     []counter.Entry // reused by Tick
	aeRound int64           // anti-entropy round of the last tick; valid with aeSet
	aeSet   bool
	// hotRounds counts the anti-entropy rounds, and hotAt holds when the
	// two last ones were (hotSlices).
	hotRounds int64
	hotAt     [2]time.Time
	// Routing (route.go), for the tick under way.
	routed   map[string]bool            // the limits routed (counter.Counter.Routed)
	routes   map[string][]counter.Entry // entries for each node
	lastView view                       // where the previous tick routed
	resend   []counter.Entry            // routed entries sent since the last anti-entropy

	mu    sync.Mutex
	peers map[string]*peer
	// moved is set where the view (route.go) may have changed, a member
	// or a failover: Moved looks at the view only then.
	moved atomic.Bool
	ring  *ring // this node and its up peers; nil when membership changed since it was built
	nodes int   // up peers plus one, as last given to the counter
	// sends is the sync version this node writes: the oldest one a peer
	// was told to decode (SetPeerSyncVersion), wireVersion if none.
	sends   atomic.Uint32
	states  tokens     // the MaxStateSends bucket
	owed    int        // peers with stateDue
	answers answerRing // the last answers this node gave, for repeats (engine_coord.go)

	askMu   sync.Mutex            // the asking side (ask.go)
	askSeq  uint64                // the last ask id
	pending map[uint64]pendingAsk // asks sent, neither answered nor given up

	Stats Stats
}

// New returns an Engine for c, which must be in cluster mode
// (counter.SetCluster) with Self equal to cfg.Self. The sync interval is
// the counter's: (*counter.Counter).Cluster, read at every call, so that
// the interval the budget assumes and the one the ticks follow cannot
// differ.
func New(c *counter.Counter, cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%w: nil counter", ErrInvalidConfig)
	}
	if _, ok := c.Cluster(); !ok {
		return nil, fmt.Errorf("%w: the counter is not in cluster mode (counter.SetCluster)", ErrInvalidConfig)
	}
	if self := c.Self(); self != cfg.Self {
		return nil, fmt.Errorf("%w: counter's cluster Self is %q, engine's %q", ErrInvalidConfig, self, cfg.Self)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	e := &Engine{c: c, cfg: cfg, log: lg, h: newHandle(1024), peers: make(map[string]*peer), pending: make(map[uint64]pendingAsk), nodes: 1, routes: make(map[string][]counter.Entry), askSeq: cfg.FirstAskID}
	e.pool.New = func() any { return newWire(e.h) }
	e.sends.Store(wireVersion)
	return e, nil
}

// SetPeerSyncVersion records the newest sync message version the peer
// name decodes, as its membership metadata states it: 1 for a release
// before version 2 (whose metadata states none). Until every peer this
// engine knows of decodes wireVersion, it writes its sync messages in
// version 1, which every release decodes, so that a rolling upgrade never
// splits the cluster; a peer never told is taken to decode wireVersion
// (the simulator's and the tests' engines are all of this release).
// Forget drops what it was told.
func (e *Engine) SetPeerSyncVersion(name string, version uint8) {
	if name == e.cfg.Self {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	e.peer(name).decodes = version
	if was := e.SyncVersion(); e.resetSends() != was {
		e.log.Info("sync message version changed: it is the oldest a member decodes", "version", e.SyncVersion(), "was", was, "peer", name, "peer_decodes", version)
	}
}

// resetSends sets e.sends from the peers' versions and returns it. Under e.mu.
func (e *Engine) resetSends() uint8 {
	v := uint8(wireVersion)
	for _, p := range e.peers {
		if p.decodes != 0 {
			v = min(v, max(p.decodes, wireVersionPlain))
		}
	}
	e.sends.Store(uint32(v))
	return v
}

// SyncVersion returns the sync message version this engine writes now
// (SetPeerSyncVersion).
func (e *Engine) SyncVersion() uint8 { return uint8(e.sends.Load()) }

// SyncInterval returns the counter's sync interval.
func (e *Engine) SyncInterval() time.Duration {
	cc, _ := e.c.Cluster() // in cluster mode since New: it never leaves it
	return cc.SyncInterval
}

// observeDelay counts a delta that came ms later than its sender's
// fastest recent message (Stats.DeltaDelays), and counts it late if that
// is past the delivery grace.
func (e *Engine) observeDelay(ms int64) {
	e.Stats.DeltaDelays.observe(ms)
	cc, _ := e.c.Cluster()
	if float64(ms) > cc.DeliveryGrace*float64(cc.SyncInterval.Milliseconds()) {
		e.Stats.LateDeltas.Add(1)
	}
}

// SilenceThreshold returns how long a peer may stay silent before it is
// suspect and its next message brings it a catch-up.
func (e *Engine) SilenceThreshold() time.Duration {
	if e.cfg.SilenceThreshold > 0 {
		return e.cfg.SilenceThreshold
	}
	return 3*e.cfg.AntiEntropyInterval + e.SyncInterval()
}

// slot is the number of whole sync intervals from the Unix epoch to t.
func slot(t time.Time, every time.Duration) int64 {
	ns, d := t.UnixNano(), int64(every)
	q := ns / d
	if ns%d != 0 && ns < 0 {
		q--
	}
	return q
}

// NextTick returns the first multiple of the sync interval, counted from
// the Unix epoch (which wall clocks share), after now: the instant of the
// next tick. Ticks fall on those instants on every node, so every node
// ends its blind interval at the same instant (up to clock offset): the
// per-node budget's bound assumes it, and with unaligned ticks the nodes'
// shares overlap (limitsim --stagger; docs/blind-interval.md).
func (e *Engine) NextTick(now time.Time) time.Time {
	every := e.SyncInterval()
	return time.Unix(0, (slot(now, every)+1)*int64(every))
}

// aeTicks is how many sync slots an anti-entropy round spans.
func (e *Engine) aeTicks(every time.Duration) int64 {
	return max(1, int64((e.cfg.AntiEntropyInterval+every-1)/every))
}

// NextAntiEntropy returns the start of the first sync slot at or after
// now's in which a Tick runs anti-entropy: every tick before it sends
// deltas only, so a driver that skips the ticks of a node without changes
// (limitsim) must still tick it then.
func (e *Engine) NextAntiEntropy(now time.Time) time.Time {
	every := e.SyncInterval()
	k := e.aeTicks(every)
	e.tickMu.Lock()
	round, set := e.aeRound, e.aeSet
	e.tickMu.Unlock()
	s := slot(now, every)
	next := (floorDivInt(s-1, k) + 1) * k // first multiple of k at or after s
	if set {
		// The first slot of the next round, or now's if a tick in it
		// already runs anti-entropy (the round's first tick was skipped).
		next = max((round+1)*k, s)
	}
	return time.Unix(0, next*int64(every))
}

func floorDivInt(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

// Tick is the work of one sync instant; call it at every NextTick (a
// late or skipped tick only delays its work). It collects the local
// changes since the previous Tick and returns them as deltas for every
// up peer, and when anti-entropy is due the hot keys' slices or a
// heartbeat. The counter starts a new budget interval even when no peer
// is up. It also sets the counter's clock lead to what this node's askers
// report of its clock (counter.SetClockLead, skew.go). Ticks are
// serialized; Receive may run concurrently.
func (e *Engine) Tick(now time.Time) ([]Outbound, error) {
	e.setClockLead(now)
	peers := e.upPeers()
	every := e.SyncInterval()
	e.tickMu.Lock()
	defer e.tickMu.Unlock()
	e.buf = e.c.AppendChanges(e.buf[:0], now)
	round := floorDivInt(slot(now, every), e.aeTicks(every))
	ae := e.aeSet && round > e.aeRound || !e.aeSet && slot(now, every)%e.aeTicks(every) == 0
	if !e.aeSet || round > e.aeRound {
		e.aeRound, e.aeSet = round, true
	}
	if len(peers) == 0 {
		clear(e.buf)
		return nil, nil
	}
	e.routeTick(now)
	msgs, err := e.encode(kindDelta, now, e.split(e.buf, true), e.cfg.DatagramBytes)
	clear(e.buf) // drop key references until the next tick
	if err != nil {
		return nil, err
	}
	e.Stats.DeltaMessages.Add(uint64(len(msgs)))
	out, err := e.owedStates(now)
	if err != nil {
		return out, err
	}
	if out, err = e.silenceNotice(out, now, peers); err != nil {
		return out, err
	}
	out = e.broadcast(out, peers, PurposeDelta, msgs)
	if out, err = e.sendRoutes(out, now, kindDelta, PurposeDelta); err != nil || !ae {
		return out, err
	}
	return e.antiEntropy(out, now, peers)
}

// hotFullEvery is how often anti-entropy re-sends every slice of the hot
// keys: every hotFullEvery-th round; the others re-send the slices that
// may have changed since the round before the last (hotSlices).
const hotFullEvery = 10

// hotSlices returns this round's anti-entropy of the hot keys
// (counter.Counter.AppendHotChanged): every slice that may have changed
// since the round before the previous one, so that a change is in the
// next two rounds after it, and every live slice at every hotFullEvery-th
// round, and at the first two. A change whose delta and both re-sends are
// lost is healed by the next full round.
//
// Why not every slice every round, as before: a key past its limit keeps
// a slice for every few admissions, hundreds in its window, and only its
// newest change; re-sending all of them each second made each peer merge
// hundreds of known slices per hot key and second, most of a peer's work
// with 1,000 keys past their limit (BENCHMARKS.md, "Anti-entropy of hot
// keys"). Under e.tickMu.
func (e *Engine) hotSlices(now time.Time) []counter.Entry {
	recent := time.Duration(0)
	if e.hotRounds >= 2 && e.hotRounds%hotFullEvery != 0 {
		recent = max(0, now.Sub(e.hotAt[0]))
	}
	e.hotAt[0], e.hotAt[1] = e.hotAt[1], now
	e.hotRounds++
	if recent == 0 {
		return e.c.AppendHot(nil, now, e.cfg.Self)
	}
	return e.c.AppendHotChanged(nil, now, e.cfg.Self, recent)
}

// antiEntropy appends a tick's anti-entropy: this node's slices of its
// hot keys that may have changed lately (hotSlices), broadcast or routed
// as the deltas are, the routed changes of the interval again
// (resendRouted), and a heartbeat for every peer that gets none of them.
// Under e.tickMu, after routeTick.
func (e *Engine) antiEntropy(out []Outbound, now time.Time, peers []string) ([]Outbound, error) {
	bc := e.split(e.hotSlices(now), false)
	e.resendRouted()
	if len(bc) > 0 {
		msgs, err := e.encode(kindState, now, bc, e.cfg.DatagramBytes)
		if err != nil {
			return out, err
		}
		out = e.broadcast(out, peers, PurposeAntiEntropy, msgs)
	} else {
		var quiet []string
		for _, name := range peers {
			if len(e.routes[name]) == 0 {
				quiet = append(quiet, name)
			}
		}
		msgs, err := e.heartbeat(now)
		if err != nil {
			return out, err
		}
		out = e.broadcast(out, quiet, PurposeHeartbeat, msgs)
	}
	return e.sendRoutes(out, now, kindState, PurposeAntiEntropy)
}

// broadcast appends an Outbound of msgs for each peer.
func (e *Engine) broadcast(out []Outbound, peers []string, p Purpose, msgs [][]byte) []Outbound {
	if len(msgs) == 0 {
		return out
	}
	for _, name := range peers {
		out = append(out, Outbound{To: name, Purpose: p, Msgs: msgs, Reliable: e.cfg.StreamOnly, Spread: !e.cfg.StreamOnly})
	}
	return out
}

// upPeers returns the up peers' names, sorted: a deterministic order.
func (e *Engine) upPeers() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var up []string
	for name, p := range e.peers {
		if p.Up {
			up = append(up, name)
		}
	}
	slices.Sort(up)
	return up
}

// Receive decodes a message that arrived at now and merges its entries.
// It returns the sender and what to send back: for a hello the sender's
// state (StateFor), and for any other message from an up peer that was
// silent for longer than SilenceThreshold a catch-up (at most one per
// RejoinInterval per peer), since what it sent while cut off, and what we
// sent it, was lost. A malformed, oversized or other-version message is
// dropped whole, counted, and returned as an error wrapping ErrMalformed;
// the caller only logs it. Safe for concurrent use: only the peer table is
// locked, decoding and merging are not serialized.
func (e *Engine) Receive(now time.Time, b []byte) (Received, error) {
	e.Stats.MessagesReceived.Add(1)
	e.Stats.BytesReceived.Add(uint64(len(b)))
	if isCoordKind(b) {
		return e.receiveCoord(now, b)
	}
	if isResetKind(b) {
		return e.receiveReset(now, b) // reset.go
	}
	if len(b) > 0 && b[0] == kindSilent {
		return e.receiveSilent(now, b) // silence.go
	}
	if len(b) > 0 && b[0] == kindPassed {
		return e.receivePassed(now, b) // relay.go
	}
	if len(b) > 0 && b[0] == kindForward {
		return e.receiveForward(now, b) // relay.go
	}
	from, out, err := e.receiveSync(now, b)
	return Received{From: from, Out: out}, err
}

// Received is what Receive returns for one message.
type Received struct {
	// From is the sender ("" when the message could not be decoded).
	From string
	// Out is what to send back: a hello's reply, a catch-up, an answer
	// to an ask.
	Out []Outbound
	// Answer, with Answered, is the answer to one of this node's pending
	// asks (Ask), from the node asked: the transport hands it to the
	// check waiting for Answer.ID. An answer nobody waits for (late, or
	// after AskExpired) is dropped here.
	Answer   Answer
	Answered bool
	// Reset, when set, is a reply to one of this node's resets: the
	// transport hands it to whoever waits for Reset.ID (reset.go).
	Reset *ResetReply
}

// receiveSync handles a sync message (delta, state, hello).
func (e *Engine) receiveSync(now time.Time, b []byte) (from string, out []Outbound, err error) {
	w := e.pool.Get().(*wire)
	// Then w keeps nothing of b, whose strings the decoded message
	// aliases (wire.decode): the transport may reuse b once we return.
	defer e.putDecoded(w)
	kind, m, err := w.decode(b, e.cfg.Limits)
	if err != nil {
		e.countDecodeError(err)
		return "", nil, err
	}
	from = m.From
	catchUp, reply, skewed, pull := false, false, false, false
	empty := kind == kindHello && e.holdsNothing()
	if from != e.cfg.Self {
		quiet := e.SilenceThreshold()
		if !e.member(from) {
			// Only a current member is heard: a forged or departed sender
			// costs no merge, no reply and no memory (its name is not kept).
			e.Stats.NotMember.Add(1)
			return from, nil, fmt.Errorf("%w: %.64q is no member here", ErrNotMember, from)
		}
		if age := now.UnixMilli() - m.SentMs; age > e.cfg.MaxMessageAge.Milliseconds() {
			// A captured message replayed, or a peer whose clock is far
			// behind: either way nothing it says can be placed in time.
			e.Stats.Stale.Add(1)
			return from, nil, fmt.Errorf("%w: a %q message from %.64q sent %d ms ago (at most %v)", ErrStale, kind, from, age, e.cfg.MaxMessageAge)
		}
		e.mu.Lock()
		p := e.peer(from)
		prev := p.LastMessage
		if p.heard(now) {
			e.moved.Store(true)
		}
		p.Offset = time.Duration(m.SentMs-now.UnixMilli()) * time.Millisecond
		note := e.updateSkew(p, now, m.SentMs)
		if kind == kindDelta {
			e.observeDelay(note.offset.Milliseconds() - (m.SentMs - now.UnixMilli()))
		}
		skewed = p.Skewed
		replay := false
		switch {
		case kind == kindHello && p.helloSet && m.SentMs <= p.lastHelloMs:
			// A hello costs a full state reply: one sent no later than the
			// last one answered is a replay (a process greets each peer
			// once, and a restarted one later than the process before it).
			// With a gossip key nobody can make a new one.
			replay = true
		case kind == kindHello:
			// A new process, which has had no catch-up yet. Answered now
			// if it is up here (else its PeerUp, which gives the transport
			// a way to reach it, sends it the same state) and the rate
			// limits allow; otherwise the state is owed, and a later Tick
			// sends it.
			p.helloSet, p.lastHelloMs = true, m.SentMs
			p.caughtUp = false
			if p.Up {
				reply = e.mayReply(p, now, empty)
			} else {
				e.owe(p)
			}
		case p.Up && !prev.IsZero() && now.Sub(prev) > quiet:
			catchUp = e.mayCatchUp(p, now, false)
		}
		// Back within MaxClockOffset: the slices of the peer's refused
		// meanwhile are missing as after a partition, and anti-entropy
		// re-sends only its hot keys. A hello asks for them: the peer
		// answers it with its state, under the limits of any hello. A
		// pull, not a catch-up pushed: the peer, which saw our clock as
		// far off, may not merge again yet (each side judges the
		// largest offset of the last two buckets, and a clock set back
		// leaves the larger one there for that long); it asks in turn.
		pull = p.Up && note.resumed && kind != kindHello
		e.mu.Unlock()
		e.logSkew(from, note)
		if replay {
			e.Stats.Replays.Add(1)
			return from, nil, fmt.Errorf("%w: a hello from %.64q sent at %d ms", ErrReplay, from, m.SentMs)
		}
	}
	if kind == kindHello {
		if !reply {
			return from, nil, nil
		}
		msgs, err := e.StateFor(now, from)
		if err != nil || len(msgs) == 0 {
			return from, nil, err
		}
		return from, []Outbound{{To: from, Purpose: PurposeReply, Msgs: msgs, Reliable: true}}, nil
	}
	if from != e.cfg.Self && !m.onlyFrom(from, e.cfg.Self) {
		// A node sends its own slices and, in a catch-up, the receiver's:
		// a slice of a third node's in its message is forged.
		n := m.dropOthers(from, e.cfg.Self)
		e.Stats.EntriesRefused.Add(uint64(n))
	}
	if skewed {
		// Its slices start on a clock too far from ours to place them in
		// our windows: not merged, so that each side counts the other's
		// requests as across a partition (doc.go). Our own slices, which
		// a catch-up or reply carries back, are on our clock and merged.
		e.Stats.SkewedMessages.Add(1)
		e.Stats.EntriesSkewed.Add(uint64(m.dropOrigin(from)))
	}
	w.entries = m.entries(w.entries[:0])
	ms := e.c.Merge(now, w.entries) // copies what it keeps (counter.Entry)
	e.Stats.EntriesMerged.Add(uint64(ms.Merged))
	e.Stats.EntriesIgnored.Add(uint64(ms.Unchanged + ms.Expired + ms.Unknown + ms.NoRoom + ms.Erased))
	e.Stats.EntriesRefused.Add(uint64(ms.Refused))
	if pull {
		msgs, err := e.encode(kindHello, now, nil, e.cfg.DatagramBytes)
		if err != nil {
			return from, nil, err
		}
		out = append(out, Outbound{To: from, Purpose: PurposeHello, Msgs: msgs, Reliable: true})
	}
	if !catchUp {
		return from, out, nil
	}
	// After the merge, so that the catch-up carries what just arrived.
	e.Stats.SilenceCatchUps.Add(1)
	msgs, err := e.StateFor(now, from)
	if err != nil || len(msgs) == 0 {
		return from, out, err
	}
	return from, append(out, Outbound{To: from, Purpose: PurposeCatchUp, Msgs: msgs, Reliable: true}), nil
}

// peer returns name's state, created if new. Under e.mu.
func (e *Engine) peer(name string) *peer {
	p := e.peers[name]
	if p == nil {
		p = &peer{}
		e.peers[name] = p
	}
	return p
}

// mayCatchUp reports whether p may be sent a catch-up at now, and if so
// records it. Under e.mu. A peer that flaps (falsely declared dead, back a
// moment later) must not cost a full state transfer each time: within
// RejoinInterval of its last catch-up it missed at most that long of
// deltas, and anti-entropy re-sends the keys near their limit anyway. A
// catch-up refused only by the total limit (MaxStateSends) is owed.
func (e *Engine) mayCatchUp(p *peer, now time.Time, empty bool) bool {
	if p.caughtUp && now.Sub(p.lastCatchUp) < e.cfg.RejoinInterval {
		return false
	}
	if !empty && !e.takeState(now) {
		e.owe(p)
		return false
	}
	p.caughtUp, p.lastCatchUp = true, now
	e.paid(p)
	if empty {
		return false // an empty state: nothing to send (holdsNothing)
	}
	e.Stats.CatchUps.Add(1)
	return true
}

// mayReply reports whether p's new process may have its hello answered at
// now, and if so records it; if not, the state is owed. Under e.mu. A
// process that really started gets its state within a RejoinInterval
// whatever the limits; a flood of forged hellos naming a real member
// (without a gossip key anyone can make one) costs one full state per
// peer per RejoinInterval, and MaxStateSends per RejoinInterval in all.
func (e *Engine) mayReply(p *peer, now time.Time, empty bool) bool {
	if p.replied && now.Sub(p.lastReply) < e.cfg.RejoinInterval || !empty && !e.takeState(now) {
		e.owe(p)
		return false
	}
	p.replied, p.lastReply = true, now
	e.paid(p)
	if empty {
		return false // an empty state: nothing to send (holdsNothing)
	}
	e.Stats.Replies.Add(1)
	return true
}

// holdsNothing reports whether the counter tracks no key: a full state
// would then be empty, so a catch-up or hello reply is recorded as done
// but not sent, and takes no full-state send. Else a cluster started all at once
// would owe each node N − 1 states past MaxStateSends, which later Ticks
// send, each a scan of a table full by then, carrying what the deltas
// have carried meanwhile. Not under e.mu: it locks the counter's shards.
func (e *Engine) holdsNothing() bool {
	return e.c.Stats().Keys == 0
}

// takeState takes one full-state send from the MaxStateSends bucket. Under e.mu.
func (e *Engine) takeState(now time.Time) bool {
	return e.states.take(now, float64(e.cfg.MaxStateSends), e.cfg.RejoinInterval)
}

// owe records that p is owed a full state. Under e.mu.
func (e *Engine) owe(p *peer) {
	if !p.stateDue {
		p.stateDue = true
		e.owed++
		e.Stats.StatesDeferred.Add(1)
	}
}

// paid records that p was sent a full state. Under e.mu.
func (e *Engine) paid(p *peer) {
	if p.stateDue {
		p.stateDue = false
		e.owed--
	}
}

// owedStates returns the full states owed to up peers that the rate
// limits now allow, for Tick. Its cost is one check when none is owed.
func (e *Engine) owedStates(now time.Time) ([]Outbound, error) {
	e.mu.Lock()
	var due []string
	if e.owed > 0 {
		for name, p := range e.peers {
			if p.stateDue && p.Up && e.mayReply(p, now, false) {
				due = append(due, name)
			}
		}
	}
	e.mu.Unlock()
	slices.Sort(due)
	var out []Outbound
	for _, name := range due {
		msgs, err := e.StateFor(now, name)
		if err != nil {
			return out, err
		}
		if len(msgs) > 0 {
			out = append(out, Outbound{To: name, Purpose: PurposeReply, Msgs: msgs, Reliable: true})
		}
	}
	return out, nil
}

// PeerUp records that name joined, came back, or was seen joining again
// (a join event for a peer already up is not an error: it may have
// restarted between two membership events). It returns a catch-up for it
// (this node's slices and the peer's own that it holds, rate-limited per
// peer by RejoinInterval) and, once per engine and peer, a hello, which
// the peer answers with the slices this node had sent it: so a node that
// restarts under its name learns back what it had counted, even when the
// cluster had not noticed it was gone.
func (e *Engine) PeerUp(now time.Time, name string) ([]Outbound, error) {
	if name == e.cfg.Self {
		return nil, nil
	}
	empty := e.holdsNothing()
	e.mu.Lock()
	p := e.peer(name)
	changed := !p.Up
	p.Up = true
	hello := !p.greeted
	p.greeted = true
	catchUp := e.mayCatchUp(p, now, empty)
	nodes := e.recount()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
	var out []Outbound
	if catchUp {
		msgs, err := e.StateFor(now, name)
		if err != nil {
			return nil, err
		}
		if len(msgs) > 0 {
			out = append(out, Outbound{To: name, Purpose: PurposeCatchUp, Msgs: msgs, Reliable: true})
		}
	}
	if hello {
		msgs, err := e.encode(kindHello, now, nil, e.cfg.DatagramBytes)
		if err != nil {
			return out, err
		}
		out = append(out, Outbound{To: name, Purpose: PurposeHello, Msgs: msgs, Reliable: true})
	}
	return out, nil
}

// PeerDown records that name is no longer a live member (failed or left):
// it is sent nothing more and no longer counted among the nodes. What it
// counted keeps counting until its slices leave the window.
func (e *Engine) PeerDown(now time.Time, name string) {
	e.mu.Lock()
	p := e.peers[name]
	changed := p != nil && p.Up
	if changed {
		p.Up = false
	}
	nodes := e.recount()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
}

// Forget drops everything known of a peer that left the cluster for good
// (its hello and catch-up history included); a peer of that name is then
// new again.
func (e *Engine) Forget(name string) {
	e.mu.Lock()
	p := e.peers[name]
	changed := p != nil && p.Up
	if p != nil {
		e.paid(p) // nothing is owed to a peer that left for good
	}
	delete(e.peers, name)
	nodes := e.recount()
	e.resetSends()
	e.mu.Unlock()
	if changed {
		e.nodesChanged(nodes)
	}
}

// recount updates e.nodes and returns it. Under e.mu.
func (e *Engine) recount() int {
	e.ring = nil
	e.moved.Store(true)
	n := 1
	for _, p := range e.peers {
		if p.Up {
			n++
		}
	}
	e.nodes = n
	return n
}

// nodesChanged tells the counter and the callback, outside e.mu: the
// callback may call back into the engine.
func (e *Engine) nodesChanged(nodes int) {
	if err := e.c.SetNodes(nodes); err != nil {
		return // nodes >= 1 always: SetNodes cannot refuse it
	}
	if e.cfg.OnNodesChanged != nil {
		e.cfg.OnNodesChanged(nodes)
	}
}

// Nodes returns the up peers plus one: what the counter was last given.
func (e *Engine) Nodes() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.nodes
}

// Peers returns a copy of what is known of each peer that is up, sent a
// message, or missed an ask.
func (e *Engine) Peers() map[string]PeerState {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]PeerState, len(e.peers))
	for k, v := range e.peers {
		if v.Up || !v.LastMessage.IsZero() || v.AsksExpired > 0 {
			out[k] = v.PeerState
		}
	}
	return out
}

// Unheard appends to dst, sorted, the live peers (PeerUp without PeerDown
// since) from which this engine has had no sync message. A peer sends a
// member it sees up a heartbeat at least every AntiEntropyInterval, and
// first what it owes it (a catch-up, the reply to its hello); one that
// has not seen it up yet sends it nothing, not even the answers to its
// asks. So a new process that still has unheard peers decides on counts
// that lack theirs, and its asks to them go unanswered and fall back to
// its budget, which trusts those counts: cluster.Node.Ready holds it
// back from taking checks until none is left (or for at most a while).
// Coordination messages do not count: an ask passed on by another node
// (relay.go) names a sender that may not see this one.
func (e *Engine) Unheard(dst []string) []string {
	e.mu.Lock()
	n := len(dst)
	for name, p := range e.peers {
		if p.Up && p.LastMessage.IsZero() {
			dst = append(dst, name)
		}
	}
	e.mu.Unlock()
	slices.Sort(dst[n:])
	return dst
}

// Ready reports nil once a node whose engine this is, which joined its
// cluster at since, may take checks: every live peer has been heard from
// (Unheard), or CatchUpWait has passed since since. Otherwise an error
// wrapping ErrUnheard that names the peers (a few of them) it still
// waits for. cluster.Node.Ready answers with it, and so /readyz.
func (e *Engine) Ready(now, since time.Time) error {
	if now.Sub(since) >= e.cfg.CatchUpWait {
		return nil
	}
	unheard := e.Unheard(nil)
	if len(unheard) == 0 {
		return nil
	}
	more := ""
	if len(unheard) > 3 {
		more = fmt.Sprintf(" and %d more", len(unheard)-3)
		unheard = unheard[:3]
	}
	return fmt.Errorf("%w: %s%s, %v after joining (at most %v)", ErrUnheard, strings.Join(unheard, ", "), more, now.Sub(since).Round(time.Millisecond), e.cfg.CatchUpWait)
}

// Suspect reports whether peer name, a member since since, has sent
// nothing (not even a heartbeat) for longer than SilenceThreshold: still
// sent to and counted as a node, but likely cut off or overloaded.
func (e *Engine) Suspect(now time.Time, name string, since time.Time) bool {
	heard := since
	e.mu.Lock()
	if p := e.peers[name]; p != nil && p.LastMessage.After(heard) {
		heard = p.LastMessage
	}
	e.mu.Unlock()
	return now.Sub(heard) > e.SilenceThreshold()
}

// CountSent records n more messages of the given total size as sent; the
// transport calls it for every copy it actually sent.
func (e *Engine) CountSent(n int, bytes int) {
	e.Stats.MessagesSent.Add(uint64(n))
	e.Stats.BytesSent.Add(uint64(bytes))
}

// StateFor returns state messages for peer: all of this node's live
// slices, and all the peer's own slices this node holds (which is how a
// restarted peer learns back what it had counted). Catch-ups and hello
// replies carry it.
func (e *Engine) StateFor(now time.Time, peer string) ([][]byte, error) {
	es := e.routedFor(now, peer, e.c.AppendState(nil, now, e.cfg.Self, 0))
	if peer != e.cfg.Self {
		es = e.c.AppendState(es, now, peer, 0)
	}
	return e.encode(kindState, now, es, e.cfg.StreamBytes)
}

// heartbeat returns an empty state message: what anti-entropy sends when
// no key is hot, so that peers keep hearing from this node.
func (e *Engine) heartbeat(now time.Time) ([][]byte, error) {
	w := e.pool.Get().(*wire)
	b, err := w.encode(kindState, message{Version: e.SyncVersion(), From: e.cfg.Self, SentMs: now.UnixMilli()})
	if err != nil {
		return nil, err
	}
	e.pool.Put(w)
	return [][]byte{b}, nil
}

// encode encodes entries with a pooled wire.
func (e *Engine) encode(kind byte, now time.Time, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	w := e.pool.Get().(*wire)
	msgs, err := w.encodeEntries(kind, e.SyncVersion(), e.cfg.Self, now.UnixMilli(), entries, cmp.Or(maxBytes, e.cfg.DatagramBytes))
	if err == nil {
		e.pool.Put(w) // after an error the codec's state is not trusted again
	}
	return msgs, err
}

// countDecodeError counts a message that could not be decoded: apart when
// it is a peer of another release (ErrVersion), which needs an upgrade,
// not an investigation of corruption.
func (e *Engine) countDecodeError(err error) {
	if errors.Is(err, ErrVersion) {
		e.Stats.VersionMismatches.Add(1)
		return
	}
	e.Stats.DecodeErrors.Add(1)
}
