package engine

import (
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// A node that fails a coordinator over by its own misses (Failover) tells
// every up peer so in a silence notice ('F'), and a peer that has not
// heard from that coordinator since the notice was sent fails it over too,
// as if it had missed its asks itself, until it hears from it again.
//
// Why: each node otherwise finds a silent coordinator out by its own
// asks. On N nodes a node asks a given coordinator about 1/N of its asks,
// so at 1,000 nodes it takes each node a second or more, and until then
// every check of the silent node's keys at that node waits a deadline
// and is decided by the budget, which admits a routed key's check on a
// node that admitted none of it lately (counter.ClusterConfig.Budget):
// about one check per node, so a hot key of the silent node could be
// admitted some hundred times over its limit (limitsim scale, 1,000
// nodes falling back: 1.178 × the limit). With the notice the first miss
// anywhere fails the coordinator over everywhere within a sync interval,
// and every node sends its counts of the moved keys to the runner-up at
// its next tick (route.go), so the runner-up grants on the whole count.
//
// A notice is sent once per coordinator and silence (peer.told, cleared
// when the coordinator is heard from), and about one coordinator at most
// once per RejoinInterval, by Tick: one datagram per up peer per failover,
// at most one per node per sync interval. A node told does not tell
// again. A coordinator that is only slow, or cut off from one node alone,
// is asked again by each node as soon as that node hears from it (any
// message: a heartbeat comes every AntiEntropyInterval); meanwhile two
// nodes may grant its keys, which the bound of two coordinators covers
// (package counter). The RejoinInterval keeps a node that keeps losing a
// live coordinator's answers (a one-way loss) from failing it over
// everywhere more often than that.
//
// Mixed versions: a node of an earlier release drops the notice as an
// unknown kind (a decode error) and fails the coordinator over by its own
// misses, as before.
const kindSilent byte = 'F'

// silentVersion is the version of the notice this node sends and the only
// one it decodes.
const silentVersion = 1

// maxSilent bounds the names one notice lists.
const maxSilent = 256

// silentMsg is the body of a silence notice.
type silentMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Version uint8
	From    string
	SentMs  int64
	Silent  []string // the nodes the sender failed over by its own misses
}

func encodeSilent(h *codec.MsgpackHandle, from string, now time.Time, silent []string) ([]byte, error) {
	return encodeBody(h, kindSilent, &silentMsg{Version: silentVersion, From: from, SentMs: now.UnixMilli(), Silent: silent})
}

// decodeSilent decodes and checks a silence notice.
func decodeSilent(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (m silentMsg, err error) {
	if err := decodeBody(h, b, &m); err != nil {
		return m, err
	}
	switch {
	case m.Version != silentVersion:
		return m, fmt.Errorf("%w: silence notice version %d, want %d", ErrVersion, m.Version, silentVersion)
	case m.From == "" || len(m.From) > lim.MaxNameBytes:
		return m, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	case len(m.Silent) == 0 || len(m.Silent) > maxSilent:
		return m, fmt.Errorf("%w: %d names in a silence notice", ErrMalformed, len(m.Silent))
	}
	for _, n := range m.Silent {
		if n == "" || len(n) > lim.MaxNameBytes {
			return m, fmt.Errorf("%w: name of %d bytes", ErrMalformed, len(n))
		}
	}
	return m, nil
}

// silenceNotice appends to out, for every up peer, a notice of the peers
// this node failed over by its own misses and has not told of yet. Tick
// calls it. peers are the up peers.
func (e *Engine) silenceNotice(out []Outbound, now time.Time, peers []string) ([]Outbound, error) {
	var silent []string
	e.mu.Lock()
	for _, name := range peers {
		p := e.peers[name]
		if p == nil || p.told || p.misses == 0 || !e.failedOver(p, now) || !p.toldAt.IsZero() && now.Sub(p.toldAt) < e.cfg.RejoinInterval {
			continue
		}
		p.told, p.toldAt = true, now
		silent = append(silent, name)
	}
	e.mu.Unlock()
	if len(silent) == 0 {
		return out, nil
	}
	silent = silent[:min(len(silent), maxSilent)]
	msg, err := encodeSilent(e.h, e.cfg.Self, now, silent)
	if err != nil {
		return out, err
	}
	e.Stats.SilenceNoticesSent.Add(1)
	msgs := [][]byte{msg}
	for _, name := range peers {
		if !slices.Contains(silent, name) {
			out = append(out, Outbound{To: name, Purpose: PurposeSilence, Msgs: msgs, Reliable: e.cfg.StreamOnly})
		}
	}
	return out, nil
}

// receiveSilent takes a peer's silence notice: each node it names that
// this node has not heard from since the notice was sent (on the sender's
// clock, which MaxClockOffset keeps near ours) is failed over here too.
func (e *Engine) receiveSilent(now time.Time, b []byte) (Received, error) {
	m, err := decodeSilent(e.h, b, e.cfg.Limits)
	if err != nil {
		e.countDecodeError(err)
		return Received{}, err
	}
	if m.From == e.cfg.Self {
		return Received{From: m.From}, nil
	}
	if err := e.heard(now, kindSilent, m.From, m.SentMs); err != nil {
		return Received{From: m.From}, err
	}
	e.Stats.SilenceNoticesReceived.Add(1)
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, name := range m.Silent {
		p := e.peers[name]
		if name == e.cfg.Self || p == nil || !p.Up || p.LastMessage.UnixMilli() > m.SentMs {
			continue
		}
		if !e.failedOver(p, now) {
			e.Stats.FailoversTold.Add(1)
		}
		p.misses = max(p.misses, e.cfg.FailoverMisses)
		p.told = true
		e.moved.Store(true)
	}
	return Received{From: m.From}, nil
}
