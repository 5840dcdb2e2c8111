package engine

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"slices"
	"strings"
	"unsafe"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// Message kinds, the first byte of every sync message.
const (
	kindDelta byte = 'D' // changes since the sender's last tick
	kindState byte = 'S' // anti-entropy or catch-up: a set of live slices
	kindHello byte = 'H' // "I (re)started: send me what I had counted"
)

// Sync message versions. A receiver decodes both and drops others
// (ErrVersion); a sender writes wireVersion when every peer it sends to
// decodes it, and wireVersionPlain otherwise (Engine.SetPeerSyncVersion,
// doc.go "Wire format and versions").
//
// Version 1 writes each key whole and each start as unix ms: 9 bytes a
// start, and the whole key, when a tick's keys are mostly of one form
// ("client-123456") and its slices a few seconds old. Version 2 has the
// same msgpack schema and writes, in the Keys column, each key as one
// string: a byte, the length of the prefix it shares with the group's
// previous key (0 for a group's first, at most 255), then the rest of the
// key; and in the Starts column each start as SentMs − start, its age at
// the send (two's complement, so every int64 start round-trips). A tick
// of short keys of one form takes about half the bytes, so half the
// datagrams, each a send and a read.
const (
	wireVersionPlain = 1
	wireVersion      = 2
)

// knownWireVersion reports whether v is a sync version this node decodes.
func knownWireVersion(v uint64) bool { return v == wireVersionPlain || v == wireVersion }

// maxSharedPrefix is the longest shared prefix a version 2 key states
// (its first byte).
const maxSharedPrefix = 255

// sharedPrefix returns the length of the prefix a version 2 key states:
// what it shares with prev, at most maxSharedPrefix.
func sharedPrefix(prev, key string) int {
	n := min(len(prev), len(key), maxSharedPrefix)
	i := 0
	// Eight bytes at a time: a tick's keys share most of their prefix.
	for ; i+8 <= n; i += 8 {
		if x := load64(prev, i) ^ load64(key, i); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	if i == n {
		return n
	}
	if n >= 8 {
		// The last eight bytes at once, overlapping those found equal:
		// the first that differs lies past them.
		if x := load64(prev, n-8) ^ load64(key, n-8); x != 0 {
			return n - 8 + bits.TrailingZeros64(x)/8
		}
		return n
	}
	for i < n && prev[i] == key[i] {
		i++
	}
	return i
}

// load64 reads s[i:i+8] as a little-endian word; i+8 <= len(s).
func load64(s string, i int) uint64 {
	return binary.LittleEndian.Uint64(unsafe.Slice(unsafe.StringData(s[i:]), 8))
}

// message is the msgpack body after the kind byte.
type message struct {
	_struct struct{} `codec:",toarray"` //nolint:unused // msgpack: encode as an array, no field names
	Version uint8
	From    string // sender's node name
	SentMs  int64  // sender's clock when it sent, unix ms: for the offset metric
	Groups  []group
}

// group holds the entries of one (limit, origin) as parallel columns.
type group struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Limit   string
	Origin  string
	Keys    []string
	Starts  []int64
	Counts  []uint32
	// shared is, when the encoder filled it (one per key), the prefix
	// each key shares with the one before it, which it measured to size
	// the message; appendMessage writes version 2 keys with it rather
	// than measure again. Not on the wire.
	shared []uint8
}

// DecodeLimits bound what a decoder accepts; a message beyond them is
// dropped whole (and counted), never half-applied.
type DecodeLimits struct {
	MaxMessageBytes int // default 1 MiB
	MaxEntries      int // per message, default 100,000
	MaxKeyBytes     int // default 1024, as limiter.MaxKeyBytes
	MaxNameBytes    int // node and limit names, default 512
}

// DefaultDecodeLimits returns the defaults documented on DecodeLimits.
func DefaultDecodeLimits() DecodeLimits {
	return DecodeLimits{MaxMessageBytes: 1 << 20, MaxEntries: 100_000, MaxKeyBytes: 1024, MaxNameBytes: 512}
}

// ErrMalformed wraps every decode error but a version mismatch.
var ErrMalformed = errors.New("engine: malformed message")

// ErrVersion wraps the decode error of a well-framed message of a version
// this node does not decode: a peer of another release, not corruption.
// It is counted apart (Stats.VersionMismatches).
var ErrVersion = errors.New("engine: unknown wire version")

func newHandle(maxInit int) *codec.MsgpackHandle {
	h := &codec.MsgpackHandle{}
	h.MaxInitLen = maxInit // a lying length prefix cannot make us allocate much
	h.RawToString = true
	return h
}

// wire is the reusable state of encoding and decoding sync messages: the
// encoder's buffer and groups, and the decoded message whose columns the
// next decode fills again. An Engine pools them, so the sync path's
// garbage is the messages it sends, not buffers regrown for every message
// nor a string per key. A wire is used by one goroutine at a time.
type wire struct {
	body    []byte            // the message being encoded, kind byte first
	groups  []group           // being encoded
	m       message           // last decoded; its strings alias the message's bytes (a version 2 message's keys alias keys)
	keys    []byte            // the keys of the last decoded message of version 2, rebuilt (expandKey)
	keyEnds []int             // where each of them ends in keys
	entries []counter.Entry   // last decoded, flattened
	names   map[string]string // senders' names, copied once (wire.decode)
	coord   coordBufs         // the coordination messages' (askcodec_decode.go)
}

// newWire returns an empty wire. The codecs of the sync and coordination
// kinds are this package's own (msgpack.go) and do not use h; the
// parameter stays so that their callers keep one signature.
func newWire(*codec.MsgpackHandle) *wire {
	return &wire{}
}

// maxNames bounds a wire's copies of sender names: a cluster has a few
// dozen members, and names forged by non-members must not grow it.
const maxNames = 64

// groupedInOrder is slices.IsSortedFunc(entries, byGroup), comparing only
// where the group changes: neighbours mostly share their limit's and
// origin's strings, which an equality tells without a call.
func groupedInOrder(entries []counter.Entry, byGroup func(a, b counter.Entry) int) bool {
	for i := 1; i < len(entries); i++ {
		a, b := &entries[i-1], &entries[i]
		if (a.Limit != b.Limit || a.Origin != b.Origin) && byGroup(*a, *b) > 0 {
			return false
		}
	}
	return true
}

// encodeEntries encodes entries into messages of kind, at wireVersion,
// with a fresh wire.
func encodeEntries(h *codec.MsgpackHandle, kind byte, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	return newWire(h).encodeEntries(kind, wireVersion, from, sentMs, entries, maxBytes)
}

// decode decodes one message with a fresh wire.
func decode(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (byte, message, error) {
	kind, m, err := newWire(h).decode(b, lim)
	if m == nil {
		return kind, message{}, err
	}
	return kind, *m, err
}

// encodeEntries encodes entries into messages of kind and version, none
// longer than maxBytes. Entries are grouped by (limit, origin) so names are
// sent once a group; a group that does not fit is split across messages.
// It sorts entries in place.
func (w *wire) encodeEntries(kind byte, version uint8, from string, sentMs int64, entries []counter.Entry, maxBytes int) ([][]byte, error) {
	byGroup := func(a, b counter.Entry) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Origin, b.Origin))
	}
	// A tick's changes are this node's slices of one limit or a few, in
	// order already: checking costs a compare an entry, a stable sort of
	// equal elements many.
	if !groupedInOrder(entries, byGroup) {
		slices.SortStableFunc(entries, byGroup)
	}
	var out [][]byte
	groups := w.groups[:0]
	defer func() { w.groups = groups[:0] }()
	// The exact length of the message so far (msgpack.go's sizes), so that
	// each message is filled to maxBytes: a tick's changes take as few
	// datagrams as they can, and every datagram costs a send and a read.
	// The message's array, version and kind; its sender, time and groups'
	// array header follow.
	head := 3 + stringSize(len(from)) + intSize(sentMs)
	size := head + arrayLenSize(0)
	flush := func() error {
		if len(groups) == 0 {
			return nil
		}
		b, err := w.encode(kind, message{Version: version, From: from, SentMs: sentMs, Groups: groups})
		if err != nil {
			return err
		}
		out = append(out, b)
		for i := range groups {
			clear(groups[i].Keys) // drop key references while the wire waits in the pool
		}
		groups, size = groups[:0], head+arrayLenSize(0)
		return nil
	}
	// grow is what adding e adds to the message: the entry, and either its
	// group's three column headers growing or a new group.
	shared := 0 // what grow measured of the entry's key (version 2)
	grow := func(e *counter.Entry, g *group) int {
		var n int
		if version >= wireVersion {
			// The key after its shared prefix, behind the prefix's byte;
			// the start as its age (appendCodedKey, appendMessage).
			shared = 0
			if g != nil {
				shared = sharedPrefix(g.Keys[len(g.Keys)-1], e.Key)
			}
			n = stringSize(1+len(e.Key)-shared) + intSize(sentMs-e.Start) + uintSize(uint64(e.Count))
		} else {
			n = stringSize(len(e.Key)) + intSize(e.Start) + uintSize(uint64(e.Count))
		}
		if g != nil {
			k := len(g.Keys)
			return n + 3*(arrayLenSize(k+1)-arrayLenSize(k))
		}
		k := len(groups)
		return n + arrayLenSize(k+1) - arrayLenSize(k) + 1 + stringSize(len(e.Limit)) + stringSize(len(e.Origin)) + 3*arrayLenSize(1)
	}
	for i := range entries {
		e := &entries[i]
		var g *group
		if n := len(groups); n > 0 && groups[n-1].Limit == e.Limit && groups[n-1].Origin == e.Origin {
			g = &groups[n-1]
		}
		add := grow(e, g)
		if size+add > maxBytes && len(groups) > 0 {
			if err := flush(); err != nil {
				return nil, err
			}
			g = nil
			add = grow(e, nil)
		}
		if g == nil {
			// Reuse the columns of a group an earlier message left behind.
			n := len(groups)
			if n < cap(groups) {
				groups = groups[:n+1]
			} else {
				groups = append(groups, group{})
			}
			g = &groups[n]
			g.Limit, g.Origin = e.Limit, e.Origin
			g.Keys, g.Starts, g.Counts, g.shared = g.Keys[:0], g.Starts[:0], g.Counts[:0], g.shared[:0]
		}
		if version >= wireVersion {
			g.shared = append(g.shared, uint8(shared))
		}
		g.Keys = append(g.Keys, e.Key)
		g.Starts = append(g.Starts, e.Start)
		g.Counts = append(g.Counts, e.Count)
		size += add
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if kind == kindHello && len(out) == 0 {
		b, err := w.encode(kind, message{Version: version, From: from, SentMs: sentMs})
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// encode returns kind followed by m's encoding, in a slice of its own (the
// transport keeps it until every peer's copy is sent). It cannot fail; the
// error is kept for its callers, written when the codec could.
func (w *wire) encode(kind byte, m message) ([]byte, error) {
	w.body = appendMessage(append(w.body[:0], kind), &m)
	return bytes.Clone(w.body), nil
}

// decode parses and checks one message into w.m, reusing its columns. It
// never panics on any input. It reads exactly the message schema: arrays
// of exactly the fields (a map, a short or a long array is refused; nil
// stands for an empty column or group list, as a nil slice is encoded),
// integers and strings in every msgpack width, nothing after the message.
//
// The strings of w.m (limits, origins, keys) alias b: they are valid while
// b is unchanged and until w's next decode, and whoever keeps one must
// copy it. Receive hands them to counter.Merge, which does not retain
// them (counter.Entry), and w.release drops them before w goes back to
// the pool, so the transport may reuse b once Receive returns
// (TestReceiveKeepsNoBytes). The sender's name is the exception: Receive
// keeps it (the peer table, Outbound.To), so it is a copy, made once per
// name and wire.
func (w *wire) decode(b []byte, lim DecodeLimits) (kind byte, m *message, err error) {
	if len(b) > lim.MaxMessageBytes {
		return 0, nil, fmt.Errorf("%w: %d bytes, more than %d", ErrMalformed, len(b), lim.MaxMessageBytes)
	}
	if len(b) < 2 {
		return 0, nil, fmt.Errorf("%w: %d bytes", ErrMalformed, len(b))
	}
	kind = b[0]
	if kind != kindDelta && kind != kindState && kind != kindHello {
		return 0, nil, fmt.Errorf("%w: unknown kind %q", ErrMalformed, kind)
	}
	r := reader{b: b, off: 1}
	if err := r.tuple(4); err != nil {
		return 0, nil, err
	}
	version, err := r.uint(math.MaxUint8)
	if err != nil {
		return 0, nil, err
	}
	if !knownWireVersion(version) {
		return 0, nil, fmt.Errorf("%w: version %d, want %d or %d", ErrVersion, version, wireVersionPlain, wireVersion)
	}
	coded := version >= wireVersion
	// A coded key is its prefix's byte and the rest: one byte more than
	// the longest key it may stand for.
	maxKey := lim.MaxKeyBytes
	if coded {
		maxKey++
		w.keys, w.keyEnds = w.keys[:0], w.keyEnds[:0]
	}
	from, err := r.str(lim.MaxNameBytes)
	if err != nil {
		return 0, nil, err
	}
	if from == "" {
		return 0, nil, fmt.Errorf("%w: empty sender name", ErrMalformed)
	}
	sentMs, err := r.int()
	if err != nil {
		return 0, nil, err
	}
	ng, err := r.arrayLen()
	if err != nil {
		return 0, nil, err
	}
	m = &w.m
	groups := m.Groups[:0]
	n := 0
	for range ng {
		if len(groups) < cap(groups) {
			groups = groups[:len(groups)+1] // reuse the columns of an earlier message's group
		} else {
			groups = append(groups, group{})
		}
		g := &groups[len(groups)-1]
		if err := r.tuple(5); err != nil {
			return 0, nil, err
		}
		if g.Limit, err = r.str(lim.MaxNameBytes); err != nil {
			return 0, nil, err
		}
		if g.Origin, err = r.str(lim.MaxNameBytes); err != nil {
			return 0, nil, err
		}
		if g.Limit == "" || g.Origin == "" {
			return 0, nil, fmt.Errorf("%w: empty limit or origin name", ErrMalformed)
		}
		nk, err := r.arrayLen()
		if err != nil {
			return 0, nil, err
		}
		nk = max(nk, 0) // nil: no keys
		if n += nk; n > lim.MaxEntries {
			return 0, nil, fmt.Errorf("%w: more than %d entries", ErrMalformed, lim.MaxEntries)
		}
		g.Keys = slices.Grow(g.Keys[:0], nk)[:nk]
		for i := range g.Keys {
			k, err := r.str(maxKey)
			if err != nil {
				return 0, nil, err
			}
			if k == "" {
				return 0, nil, fmt.Errorf("%w: empty key", ErrMalformed)
			}
			if coded {
				if err := w.expandKey(i, k, lim.MaxKeyBytes); err != nil {
					return 0, nil, err
				}
			}
			g.Keys[i] = k
		}
		ns, err := r.arrayLen()
		if err != nil {
			return 0, nil, err
		}
		if ns = max(ns, 0); ns != nk {
			return 0, nil, fmt.Errorf("%w: columns of %d keys and %d starts", ErrMalformed, nk, ns)
		}
		g.Starts = slices.Grow(g.Starts[:0], nk)[:nk]
		for i := range g.Starts {
			if g.Starts[i], err = r.int(); err != nil {
				return 0, nil, err
			}
			if coded {
				g.Starts[i] = sentMs - g.Starts[i] // an age: wraps as the sender's subtraction did
			}
		}
		nc, err := r.arrayLen()
		if err != nil {
			return 0, nil, err
		}
		if nc = max(nc, 0); nc != nk {
			return 0, nil, fmt.Errorf("%w: columns of %d keys and %d counts", ErrMalformed, nk, nc)
		}
		g.Counts = slices.Grow(g.Counts[:0], nk)[:nk]
		for i := range g.Counts {
			c, err := r.uint(math.MaxUint32)
			if err != nil {
				return 0, nil, err
			}
			g.Counts[i] = uint32(c)
		}
	}
	if r.off != len(b) {
		return 0, nil, fmt.Errorf("%w: %d bytes after the message", ErrMalformed, len(b)-r.off)
	}
	if coded {
		w.keyStrings(groups)
	}
	m.Version, m.From, m.SentMs, m.Groups = uint8(version), w.name(from), sentMs, groups
	return kind, m, nil
}

// appendCodedKey appends key as version 2 writes it after a key it
// shares p bytes with (sharedPrefix; 0 for a group's first): one string,
// p as a byte, then the rest of key.
func appendCodedKey(b []byte, p int, key string) []byte {
	b = appendStrLen(b, 1+len(key)-p)
	return append(append(b, byte(p)), key[p:]...)
}

// expandKey rebuilds the i-th key of a group of a version 2 message from
// its coded form k into w.keys, refusing a prefix longer than the
// previous key (or any prefix on a group's first key) and a key empty or
// longer than maxKey. keyStrings makes the strings once the message is
// read, when w.keys no longer moves.
func (w *wire) expandKey(i int, k string, maxKey int) error {
	p, rest := int(k[0]), k[1:]
	prevStart, prevEnd := 0, 0
	if i > 0 {
		prevEnd = w.keyEnds[len(w.keyEnds)-1]
		if len(w.keyEnds) > 1 {
			prevStart = w.keyEnds[len(w.keyEnds)-2]
		}
	}
	if p > prevEnd-prevStart {
		return fmt.Errorf("%w: a key sharing %d bytes with a previous key of %d", ErrMalformed, p, prevEnd-prevStart)
	}
	n := p + len(rest)
	if n == 0 || n > maxKey {
		return fmt.Errorf("%w: a key of %d bytes", ErrMalformed, n)
	}
	start := len(w.keys)
	w.keys = slices.Grow(w.keys, n)[:start+n]
	copy(w.keys[start:], w.keys[prevStart:prevStart+p])
	copy(w.keys[start+p:], rest)
	w.keyEnds = append(w.keyEnds, start+n)
	return nil
}

// keyStrings points the decoded groups' keys at the keys expandKey
// rebuilt, in order. They alias w.keys, as a version 1 message's alias
// its bytes, until w's next decode.
func (w *wire) keyStrings(groups []group) {
	start, j := 0, 0
	for gi := range groups {
		keys := groups[gi].Keys
		for i := range keys {
			end := w.keyEnds[j]
			keys[i] = unsafe.String(&w.keys[start], end-start)
			start, j = end, j+1
		}
	}
}

// name returns a copy of the sender name from, which aliases a message:
// the same copy for the same name, so that a steady sender costs nothing.
func (w *wire) name(from string) string {
	if s, ok := w.names[from]; ok {
		return s
	}
	if w.names == nil || len(w.names) >= maxNames {
		w.names = make(map[string]string, 8)
	}
	s := strings.Clone(from)
	w.names[s] = s
	return s
}

// release drops w's references to the last decoded message's bytes (its
// strings alias them: wire.decode), so that a wire waiting in the pool
// keeps no transport buffer alive and nothing can read it once reused.
// Every group up to the capacity: Receive may have cut some off
// (dropOthers, dropOrigin), and they hold the message's strings too.
//
// What it clears it also cuts to length 0. A pooled wire serves every
// kind, and the release after an ask or an answer must not clear the
// keys and entries of the last sync message the wire decoded again: that
// was some 240 KB for a datagram of 3,000 entries, at every ask a
// coordinator answered (BENCHMARKS.md, "A pooled wire cleared a sync
// message's entries at every ask").
func (w *wire) release() {
	groups := w.m.Groups[:cap(w.m.Groups)]
	for i := range groups {
		g := &groups[i]
		clear(g.Keys)
		g.Keys = g.Keys[:0]
		g.Limit, g.Origin = "", ""
	}
	clear(w.entries)
	w.entries = w.entries[:0]
	w.m.Groups = groups[:0]
	w.coord.release()
	// A version 2 message may rebuild far more key bytes than it holds
	// (a key of 256 bytes from a few, when it shares the rest with the
	// one before it: at most MaxEntries of them, some 25 MB for a
	// member's 1 MiB message of such keys). A pooled wire keeps no more
	// than a large tick's worth.
	if cap(w.keys) > maxKeptKeyBytes {
		w.keys = nil
	}
}

// maxKeptKeyBytes is the most of rebuilt keys a pooled wire keeps.
const maxKeptKeyBytes = 1 << 20

// entries flattens a decoded message's groups.
func (m *message) entries(dst []counter.Entry) []counter.Entry {
	for _, g := range m.Groups {
		for i, k := range g.Keys {
			dst = append(dst, counter.Entry{Limit: g.Limit, Key: k, Origin: g.Origin, Start: g.Starts[i], Count: g.Counts[i]})
		}
	}
	return dst
}

// onlyFrom reports whether every group's origin is a or b.
func (m *message) onlyFrom(a, b string) bool {
	for _, g := range m.Groups {
		if g.Origin != a && g.Origin != b {
			return false
		}
	}
	return true
}

// dropOthers removes the groups whose origin is neither a nor b and
// returns how many entries they held.
func (m *message) dropOthers(a, b string) int {
	n := 0
	m.Groups = slices.DeleteFunc(m.Groups, func(g group) bool {
		if g.Origin != a && g.Origin != b {
			n += len(g.Keys)
			return true
		}
		return false
	})
	return n
}

// putDecoded returns a wire that decoded a message to the pool, without
// its references to the message's bytes. A wire is reused after a decode
// error too: each decode writes every field it returns.
func (e *Engine) putDecoded(w *wire) {
	w.release()
	e.pool.Put(w)
}
