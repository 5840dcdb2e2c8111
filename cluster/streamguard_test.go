package cluster

import (
	"bytes"
	"errors"
	"io"
	"log"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
)

// userMsgStream is memberlist's framing of an unencrypted user message that
// claims n bytes, followed by body.
func userMsgStream(t testing.TB, label string, n int, body []byte) []byte {
	t.Helper()
	var b []byte
	if label != "" {
		b = append(b, mlHasLabelMsg, byte(len(label)))
		b = append(b, label...)
	}
	b = append(b, mlUserMsg)
	var h []byte
	if err := codec.NewEncoderBytes(&h, &codec.MsgpackHandle{}).Encode(struct{ UserMsgLen int }{n}); err != nil {
		t.Fatal(err)
	}
	return append(append(b, h...), body...)
}

// guardPipe runs guardStream on one end of a pipe fed with in.
func guardPipe(in []byte) (net.Conn, error) {
	a, b := net.Pipe()
	go func() {
		_, _ = a.Write(in)
		_ = a.Close()
	}()
	return guardStream(b, streamGuardConfig{maxMessageBytes: 1 << 20, maxNodes: 4096, timeout: time.Second}, nil)
}

// TestGuardStream: a user message or push/pull whose header claims more
// than the limits is refused before memberlist reads it (issue 9, finding
// 3: 20 MiB allocated for a 10-byte stream); one within them reaches
// memberlist byte for byte, label included.
func TestGuardStream(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []byte
		ok   bool
	}{
		{"20 MiB claimed, 10 bytes sent", userMsgStream(t, "", 20<<20, make([]byte, 10)), false},
		{"20 MiB claimed behind a label", userMsgStream(t, "prod", 20<<20, make([]byte, 10)), false},
		{"a small user message", userMsgStream(t, "", 5, []byte("hello")), true},
		{"a small one behind a label", userMsgStream(t, "prod", 5, []byte("hello")), true},
		{"a ping-sized other type", []byte{0, 1, 2, 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := guardPipe(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("guard: %v, want ok %v", err, tc.ok)
			}
			if err != nil {
				if !errors.Is(err, errStreamRefused) {
					t.Fatalf("%v, want errStreamRefused", err)
				}
				return
			}
			got, err := io.ReadAll(c)
			if err != nil || !bytes.Equal(got, tc.in) {
				t.Fatalf("memberlist reads %q, %v; want %q", got, err, tc.in)
			}
		})
	}
}

// TestTransportRefusesOversizedStream: through the real listener, the
// stream is closed unread and counted, and never reaches memberlist.
func TestTransportRefusesOversizedStream(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.Port())))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(userMsgStream(t, "", 20<<20, make([]byte, 10))); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Fatal("the stream was not closed")
	}
	select {
	case <-tr.StreamCh():
		t.Fatal("the stream reached memberlist")
	default:
	}
	if n := tr.refused.Load(); n != 1 {
		t.Fatalf("%d streams refused, want 1", n)
	}
}

// FuzzGuardStream: any bytes are either refused or replayed to memberlist
// exactly.
func FuzzGuardStream(f *testing.F) {
	f.Add(userMsgStream(f, "", 20<<20, nil))
	f.Add(userMsgStream(f, "x", 3, []byte("abc")))
	f.Add([]byte{mlPushPullMsg, 0x83})
	f.Fuzz(func(t *testing.T, in []byte) {
		c, err := guardPipe(in)
		if err != nil {
			return
		}
		got, _ := io.ReadAll(c)
		if !bytes.Equal(got, in) {
			t.Fatalf("replayed %q, want %q", got, in)
		}
	})
}

// TestTransportCapsOpenStreams: at most maxInboundStreams inbound streams
// are open at once; past that a new one is closed unread, and a stream
// memberlist closes makes room again. So a flood of connections holds a
// bounded number of goroutines and descriptors.
func TestTransportCapsOpenStreams(t *testing.T) {
	tr, err := newTransport("127.0.0.1", 0, log.New(io.Discard, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Shutdown()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tr.Port()))
	open := func() net.Conn {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Write([]byte{0}); err != nil { // a ping's type byte: a header the guard lets through
			t.Fatal(err)
		}
		return c
	}
	accepted := func() net.Conn {
		select {
		case s := <-tr.StreamCh():
			return s
		case <-time.After(5 * time.Second):
			return nil
		}
	}
	var held []net.Conn
	for i := range maxInboundStreams {
		open()
		s := accepted()
		if s == nil {
			t.Fatalf("stream %d not accepted", i)
		}
		held = append(held, s)
	}
	over := open()
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("stream %d: read %v, want it closed unread", maxInboundStreams+1, err)
	}
	if n := tr.refused.Load(); n != 1 {
		t.Fatalf("%d streams refused, want 1", n)
	}
	// memberlist is done with one: room for the next.
	_ = held[0].Close()
	_ = held[0].Close() // closing twice frees one place, not two
	open()
	if accepted() == nil {
		t.Fatal("no stream accepted after one closed")
	}
	over = open()
	_ = over.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := over.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read %v, want the stream past the cap closed", err)
	}
	for _, s := range held[1:] {
		_ = s.Close()
	}
}
