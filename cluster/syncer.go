package cluster

import (
	"cmp"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// SyncConfig configures a Syncer.
type SyncConfig struct {
	// Self is this node's name; it must match the counter's cluster Self.
	Self string
	// MaxMessageBytes caps every message the Syncer produces (default
	// 60,000: under memberlist's stream limits and one allocation each).
	MaxMessageBytes int
	// StateMessageBytes caps the messages of StateFor (and so the replies
	// to a hello), which can be large and which a transport may send over a
	// stream rather than in datagrams; 0 means MaxMessageBytes.
	StateMessageBytes int
	// Limits bound decoding.
	Limits DecodeLimits
}

// DefaultSyncConfig returns the defaults documented on SyncConfig.
func DefaultSyncConfig(self string) SyncConfig {
	return SyncConfig{Self: self, MaxMessageBytes: 60_000, Limits: DefaultDecodeLimits()}
}

// Validate reports the first invalid field.
func (c SyncConfig) Validate() error {
	switch {
	case c.Self == "":
		return fmt.Errorf("%w: Self must name this node", ErrInvalidConfig)
	case c.MaxMessageBytes < 512 || c.MaxMessageBytes > c.Limits.MaxMessageBytes:
		return fmt.Errorf("%w: MaxMessageBytes must be between 512 and Limits.MaxMessageBytes (%d), got %d", ErrInvalidConfig, c.Limits.MaxMessageBytes, c.MaxMessageBytes)
	case c.StateMessageBytes != 0 && (c.StateMessageBytes < 512 || c.StateMessageBytes > c.Limits.MaxMessageBytes):
		return fmt.Errorf("%w: StateMessageBytes must be 0 or between 512 and Limits.MaxMessageBytes (%d), got %d", ErrInvalidConfig, c.Limits.MaxMessageBytes, c.StateMessageBytes)
	case c.Limits.MaxEntries < 1 || c.Limits.MaxKeyBytes < 1 || c.Limits.MaxNameBytes < 1:
		return fmt.Errorf("%w: decode limits must be positive: %+v", ErrInvalidConfig, c.Limits)
	}
	return nil
}

// Syncer turns a Counter's changes into messages and peers' messages into
// merges. It does no I/O and reads no clock: the transport (memberlist in
// limiterd, a simulated network in limitsim) calls it with the time and
// carries the bytes. Safe for concurrent use.
type Syncer struct {
	c    *counter.Counter
	cfg  SyncConfig
	h    *codec.MsgpackHandle
	pool sync.Pool // of *wire

	mu    sync.Mutex
	peers map[string]*PeerState
	buf   []counter.Entry // reused by Tick (under mu)

	Stats SyncStats
}

// PeerState is what a Syncer knows of one peer from its messages.
type PeerState struct {
	// LastMessage is when the last message from the peer was received.
	LastMessage time.Time
	// Offset is the peer's clock minus ours, estimated from its last
	// message's send time (so it includes the one-way network delay).
	Offset time.Duration
}

// SyncStats counts a Syncer's traffic. Read with the atomics' Load.
type SyncStats struct {
	MessagesSent, BytesSent         atomic.Uint64
	MessagesReceived, BytesReceived atomic.Uint64
	DecodeErrors                    atomic.Uint64
	EntriesMerged, EntriesIgnored   atomic.Uint64 // ignored: expired, unknown limit, no room, unchanged
}

// ErrInvalidConfig wraps configuration errors of this package.
var ErrInvalidConfig = fmt.Errorf("cluster: invalid config")

// NewSyncer returns a Syncer for c, which must be in cluster mode with the
// same Self (counter.SetCluster).
func NewSyncer(c *counter.Counter, cfg SyncConfig) (*Syncer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if self := c.Self(); self != cfg.Self {
		return nil, fmt.Errorf("%w: counter's cluster Self is %q, syncer's %q", ErrInvalidConfig, self, cfg.Self)
	}
	s := &Syncer{c: c, cfg: cfg, h: newHandle(1024), peers: make(map[string]*PeerState)}
	s.pool.New = func() any { return newWire(s.h) }
	return s, nil
}

// encode encodes entries with a pooled wire.
func (s *Syncer) encode(kind byte, now time.Time, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	w := s.pool.Get().(*wire)
	msgs, err := w.encodeEntries(kind, s.cfg.Self, now.UnixMilli(), entries, maxBytes)
	if err == nil {
		s.pool.Put(w) // after an error the codec's state is not trusted again
	}
	return msgs, err
}

// Tick collects the local changes since the previous Tick and returns them
// as delta messages, the same for every peer. Call it every sync interval.
// Nothing is counted as sent here: the transport calls CountSent for
// every copy it actually sends.
func (s *Syncer) Tick(now time.Time) ([][]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf = s.c.AppendChanges(s.buf[:0], now)
	msgs, err := s.encode(kindDelta, now, s.buf, s.cfg.MaxMessageBytes)
	clear(s.buf) // drop key references until the next tick
	return msgs, err
}

// Hot returns state messages with this node's slices of every key whose
// window is at least the counter's HotShare full (counter.ClusterConfig):
// anti-entropy for the keys where a lost delta could change a decision.
func (s *Syncer) Hot(now time.Time) ([][]byte, error) {
	es := s.c.AppendHot(nil, now, s.cfg.Self)
	return s.encode(kindState, now, es, s.cfg.MaxMessageBytes)
}

// StateFor returns state messages for a peer that just joined or rejoined:
// all of this node's live slices, and all the peer's own slices this node
// holds (which is how a restarted peer learns back what it had counted).
func (s *Syncer) StateFor(now time.Time, peer string) ([][]byte, error) {
	es := s.c.AppendState(nil, now, s.cfg.Self, 0)
	if peer != s.cfg.Self {
		es = s.c.AppendState(es, now, peer, 0)
	}
	return s.encode(kindState, now, es, cmp.Or(s.cfg.StateMessageBytes, s.cfg.MaxMessageBytes))
}

// Hello returns the message a node sends each peer when it starts: the
// peer answers with StateFor the sender.
func (s *Syncer) Hello(now time.Time) ([][]byte, error) {
	return s.encode(kindHello, now, nil, s.cfg.MaxMessageBytes)
}

// Heartbeat returns an empty state message: what anti-entropy sends when
// no key is hot, so that peers keep hearing from this node.
func (s *Syncer) Heartbeat(now time.Time) ([][]byte, error) {
	w := s.pool.Get().(*wire)
	b, err := w.encode(kindState, message{Version: wireVersion, From: s.cfg.Self, SentMs: now.UnixMilli()})
	if err != nil {
		return nil, err
	}
	s.pool.Put(w)
	return [][]byte{b}, nil
}

// CountSent records n more messages of the given total size as sent.
func (s *Syncer) CountSent(n int, bytes int) {
	s.Stats.MessagesSent.Add(uint64(n))
	s.Stats.BytesSent.Add(uint64(bytes))
}

// Receive decodes a message and merges its entries at now. For a hello it
// returns the reply for the sender (StateFor). A malformed or oversized
// message is dropped whole, counted, and returned as an error wrapping
// ErrMalformed; the caller only logs it.
func (s *Syncer) Receive(now time.Time, b []byte) (from string, reply [][]byte, err error) {
	s.Stats.MessagesReceived.Add(1)
	s.Stats.BytesReceived.Add(uint64(len(b)))
	w := s.pool.Get().(*wire)
	kind, m, err := w.decode(b, s.cfg.Limits)
	if err != nil {
		s.Stats.DecodeErrors.Add(1)
		return "", nil, err // w is dropped: the codec's state after an error is not trusted
	}
	defer s.pool.Put(w)
	s.mu.Lock()
	p := s.peers[m.From]
	if p == nil && m.From != s.cfg.Self {
		p = &PeerState{}
		s.peers[m.From] = p
	}
	if p != nil {
		p.LastMessage = now
		p.Offset = time.Duration(m.SentMs-now.UnixMilli()) * time.Millisecond
	}
	s.mu.Unlock()
	if kind == kindHello {
		reply, err = s.StateFor(now, m.From)
		return m.From, reply, err
	}
	w.entries = m.entries(w.entries[:0])
	ms := s.c.Merge(now, w.entries)
	clear(w.entries) // drop key references while w waits in the pool
	s.Stats.EntriesMerged.Add(uint64(ms.Merged))
	s.Stats.EntriesIgnored.Add(uint64(ms.Unchanged + ms.Expired + ms.Unknown + ms.NoRoom))
	return m.From, nil, nil
}

// Peers returns a copy of what is known of each peer that sent a message.
func (s *Syncer) Peers() map[string]PeerState {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]PeerState, len(s.peers))
	for k, v := range s.peers {
		out[k] = *v
	}
	return out
}

// Forget drops what is known of a peer that left the cluster for good.
func (s *Syncer) Forget(peer string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.peers, peer)
}
