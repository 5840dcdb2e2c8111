package engine

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

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
	// hotRounds counts the anti-entropy rounds, hotAt holds when the two
	// last ones were and hotFullAt when the two last full ones were
	// (hotSlices).
	hotRounds int64
	hotAt     [2]time.Time
	hotFullAt [2]time.Time
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

// SilenceThreshold returns how long a peer may stay silent before it is
// suspect and its next message brings it a catch-up.
func (e *Engine) SilenceThreshold() time.Duration {
	if e.cfg.SilenceThreshold > 0 {
		return e.cfg.SilenceThreshold
	}
	return 3*e.cfg.AntiEntropyInterval + e.SyncInterval()
}

// CountSent records n more messages of the given total size as sent; the
// transport calls it for every copy it actually sent.
func (e *Engine) CountSent(n int, bytes int) {
	e.Stats.MessagesSent.Add(uint64(n))
	e.Stats.BytesSent.Add(uint64(bytes))
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
