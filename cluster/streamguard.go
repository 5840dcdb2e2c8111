package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// memberlist's stream framing (net.go of memberlist v0.7.0): an optional
// label header (hasLabelMsg, a length byte, the label), then a message
// type byte. An unencrypted user message or push/pull follows with a
// msgpack header whose lengths memberlist allocates before it reads a
// byte of what they claim: a stream that claims 20 MiB and sends 10 bytes
// costs 20 MiB. An encrypted stream carries a 4-byte length that memberlist
// reads into a growing buffer, so it needs no guard. A datagram's user
// message may follow a checksum header (hasCrcMsg: transport.go's
// userPayload). The values are memberlist's wire protocol, whose list its
// source says is only ever appended to.
const (
	mlPushPullMsg = 6
	mlUserMsg     = 8
	mlHasCrcMsg   = 12
	mlHasLabelMsg = 244
)

// streamGuardConfig bounds inbound streams before memberlist reads them.
type streamGuardConfig struct {
	maxMessageBytes int           // the most a user message may claim
	maxNodes        int           // the most node states a push/pull may claim
	timeout         time.Duration // to read the header; a stream that sends less in that time is closed
}

// errStreamRefused wraps the reason a stream was closed unread.
var errStreamRefused = errors.New("cluster: inbound stream refused")

// guardStream reads the header of an inbound stream and returns a
// connection that replays it to memberlist, or an error wrapping
// errStreamRefused when the header claims more than the limits allow. A
// header it cannot parse is left to memberlist, which then refuses it.
// The returned connection calls done once when it is closed.
func guardStream(conn net.Conn, cfg streamGuardConfig, done func()) (net.Conn, error) {
	if err := conn.SetReadDeadline(time.Now().Add(cfg.timeout)); err != nil {
		return nil, err
	}
	br := bufio.NewReaderSize(conn, 4096)
	off := 0
	b, err := br.Peek(1)
	if err != nil {
		return nil, fmt.Errorf("%w: no header within %v: %v", errStreamRefused, cfg.timeout, err)
	}
	if b[0] == mlHasLabelMsg {
		if b, err = br.Peek(2); err != nil {
			return nil, fmt.Errorf("%w: a cut label header: %v", errStreamRefused, err)
		}
		off = 2 + int(b[1])
	}
	if b, err = br.Peek(off + 1); err != nil {
		return nil, fmt.Errorf("%w: a cut header: %v", errStreamRefused, err)
	}
	// The msgpack headers are short: userMsgHeader is a one-field map (at
	// most 21 bytes), pushPullHeader a three-field one (at most 44).
	switch b[off] {
	case mlUserMsg:
		var h struct{ UserMsgLen int }
		if decodeHeader(br, off+1, 21, &h) && (h.UserMsgLen < 0 || h.UserMsgLen > cfg.maxMessageBytes) {
			return nil, fmt.Errorf("%w: a user message claiming %d bytes (at most %d)", errStreamRefused, h.UserMsgLen, cfg.maxMessageBytes)
		}
	case mlPushPullMsg:
		var h struct {
			Nodes        int
			UserStateLen int
			Join         bool
		}
		if decodeHeader(br, off+1, 44, &h) && (h.Nodes < 0 || h.Nodes > cfg.maxNodes || h.UserStateLen < 0 || h.UserStateLen > cfg.maxMessageBytes) {
			return nil, fmt.Errorf("%w: a push/pull claiming %d nodes and %d bytes of state", errStreamRefused, h.Nodes, h.UserStateLen)
		}
	}
	// memberlist sets deadlines of its own; a connection the peer closed
	// already may refuse this one, and then fails memberlist's reads.
	_ = conn.SetReadDeadline(time.Time{})
	return &guardedConn{Conn: conn, r: br, done: done}, nil
}

// decodeHeader decodes a msgpack header from the up to n bytes after off
// that have arrived (fewer when the stream is shorter), reporting whether
// it could.
func decodeHeader(br *bufio.Reader, off, n int, v any) bool {
	b, _ := br.Peek(off + n) // a short stream ends early: decode what came
	if len(b) <= off {
		return false
	}
	return codec.NewDecoderBytes(b[off:], &codec.MsgpackHandle{}).Decode(v) == nil
}

// guardedConn is a connection whose first bytes were read by guardStream:
// reads go through its buffer.
type guardedConn struct {
	net.Conn
	r    *bufio.Reader
	done func() // called once, at the first Close
	once sync.Once
}

func (c *guardedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// Close closes the connection and, the first time, calls done.
func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	if c.done != nil {
		c.once.Do(c.done)
	}
	return err
}
