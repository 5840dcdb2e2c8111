package engine

import (
	"fmt"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// Reset message kinds. A reset of a key goes from the node asked (the
// asker) to the key's coordinator ('X'), which applies it and sends it on
// to every up peer ('Z', over a stream) and answers the asker ('Y'); every
// node that receives the reset acknowledges it to the asker ('K'). They
// carry resetVersion, a version of their own: the sync kinds keep theirs.
//
// A node of an earlier release drops all four as an unknown kind (counted
// as a decode error, and logged as a malformed message), never
// half-applied: a reset it coordinates is never answered, so the asker
// reports it as failed, and a reset sent to it is never acknowledged, so
// the asker reports that node as not confirming. During a rolling upgrade
// a reset reaches only the nodes of this release and later, and says
// which those were (doc.go, "Wire format and versions").
const (
	kindResetAsk   byte = 'X'
	kindResetApply byte = 'Z'
	kindResetDone  byte = 'Y'
	kindResetAck   byte = 'K'
)

// resetVersion is the version of the reset messages this node sends and
// the only one it decodes.
const resetVersion = 1

// isResetKind reports whether a message is one of the reset kinds.
func isResetKind(b []byte) bool {
	return len(b) > 0 && (b[0] == kindResetAsk || b[0] == kindResetApply || b[0] == kindResetDone || b[0] == kindResetAck)
}

// Reset status values, in 'Y' and 'K'.
const (
	resetApplied  uint8 = 0 // the sender applied the reset
	resetUnknown  uint8 = 1 // it knows none of the reset's limits: its rules differ
	resetTooMany  uint8 = 2 // it holds too many resets in force (counter.ErrTooManyResets)
	resetSkewed   uint8 = 3 // the coordinator's clock is beyond MaxClockOffset ahead of the sender's
	resetNoStatus uint8 = 4 // the first value that is none
)

// resetReason is what a status says, for a ResetReply.
func resetReason(status uint8) string {
	switch status {
	case resetApplied:
		return ""
	case resetUnknown:
		return "its rules have none of the key's limits"
	case resetTooMany:
		return "it holds too many resets in force"
	case resetSkewed:
		return "the coordinator's clock is beyond its maximum clock offset"
	}
	return fmt.Sprintf("status %d", status)
}

// maxResetTold bounds the names an answer lists: the coordinator's up
// peers. memberlist clusters of limiterd are far smaller.
const maxResetTold = 4096

// resetMsg is the body of a reset asked ('X') or applied ('Z').
type resetMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Version uint8
	From    string
	SentMs  int64
	ID      uint64 // the asker's reset id
	Asker   string // who asked: the acknowledgements go there ('X': From)
	Key     string
	Limits  []string // counter.LimitID of each limit reset
	At      int64    // 'Z': the reset instant R, unix ms on the coordinator's clock; 'X': 0
}

// resetReplyMsg is the body of the coordinator's answer ('Y') and of an
// acknowledgement ('K').
type resetReplyMsg struct {
	_struct struct{} `codec:",toarray"` //nolint:unused
	Version uint8
	From    string
	SentMs  int64
	ID      uint64
	Status  uint8
	At      int64    // 'Y', applied: R
	Told    []string // 'Y', applied: the peers the coordinator sent the reset to
}

func encodeReset(h *codec.MsgpackHandle, kind byte, from string, now time.Time, id uint64, asker string, r *counter.Reset) ([]byte, error) {
	m := resetMsg{Version: resetVersion, From: from, SentMs: now.UnixMilli(), ID: id, Asker: asker, Key: r.Key, Limits: r.Limits}
	if kind == kindResetApply {
		m.At = r.At
	}
	return encodeBody(h, kind, &m)
}

// decodeReset decodes and checks a reset asked or applied (b[0] says
// which), filling r (At is 0 in an ask).
func decodeReset(h *codec.MsgpackHandle, b []byte, lim DecodeLimits, r *counter.Reset) (m resetMsg, err error) {
	if err := decodeBody(h, b, &m); err != nil {
		return m, err
	}
	switch {
	case m.Version != resetVersion:
		return m, fmt.Errorf("%w: reset version %d, want %d", ErrVersion, m.Version, resetVersion)
	case m.From == "" || len(m.From) > lim.MaxNameBytes || m.Asker == "" || len(m.Asker) > lim.MaxNameBytes:
		return m, fmt.Errorf("%w: reset names of %d and %d bytes", ErrMalformed, len(m.From), len(m.Asker))
	case b[0] == kindResetAsk && m.Asker != m.From:
		return m, fmt.Errorf("%w: a reset asked by %.64q for %.64q", ErrMalformed, m.From, m.Asker)
	case m.Key == "" || len(m.Key) > lim.MaxKeyBytes:
		return m, fmt.Errorf("%w: key of %d bytes", ErrMalformed, len(m.Key))
	case len(m.Limits) == 0 || len(m.Limits) > counter.MaxLimitsPerCall:
		return m, fmt.Errorf("%w: %d limits", ErrMalformed, len(m.Limits))
	case b[0] == kindResetApply && m.At <= 0, b[0] == kindResetAsk && m.At != 0:
		return m, fmt.Errorf("%w: reset instant %d in a %q", ErrMalformed, m.At, b[0])
	}
	for _, l := range m.Limits {
		if l == "" || len(l) > lim.MaxNameBytes {
			return m, fmt.Errorf("%w: limit name of %d bytes", ErrMalformed, len(l))
		}
	}
	*r = counter.Reset{Key: m.Key, Limits: m.Limits, At: m.At}
	return m, nil
}

func encodeResetReply(h *codec.MsgpackHandle, kind byte, from string, now time.Time, id uint64, status uint8, at int64, told []string) ([]byte, error) {
	m := resetReplyMsg{Version: resetVersion, From: from, SentMs: now.UnixMilli(), ID: id, Status: status}
	if kind == kindResetDone && status == resetApplied {
		m.At, m.Told = at, told
	}
	return encodeBody(h, kind, &m)
}

// decodeResetReply decodes and checks an answer or an acknowledgement (b[0]
// says which).
func decodeResetReply(h *codec.MsgpackHandle, b []byte, lim DecodeLimits) (m resetReplyMsg, err error) {
	if err := decodeBody(h, b, &m); err != nil {
		return m, err
	}
	answer := b[0] == kindResetDone
	switch {
	case m.Version != resetVersion:
		return m, fmt.Errorf("%w: reset reply version %d, want %d", ErrVersion, m.Version, resetVersion)
	case m.From == "" || len(m.From) > lim.MaxNameBytes:
		return m, fmt.Errorf("%w: sender name of %d bytes", ErrMalformed, len(m.From))
	case m.Status >= resetNoStatus:
		return m, fmt.Errorf("%w: reset status %d", ErrMalformed, m.Status)
	case answer && m.Status == resetApplied && m.At <= 0:
		return m, fmt.Errorf("%w: reset instant %d in an answer", ErrMalformed, m.At)
	case (!answer || m.Status != resetApplied) && (m.At != 0 || len(m.Told) != 0):
		return m, fmt.Errorf("%w: a reset instant or names in a %q of status %d", ErrMalformed, b[0], m.Status)
	case len(m.Told) > maxResetTold:
		return m, fmt.Errorf("%w: %d names", ErrMalformed, len(m.Told))
	}
	for _, n := range m.Told {
		if n == "" || len(n) > lim.MaxNameBytes {
			return m, fmt.Errorf("%w: name of %d bytes", ErrMalformed, len(n))
		}
	}
	return m, nil
}
