package cluster

import (
	"bytes"
	"fmt"
	"log"
	"net"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

func newTestTransport(t *testing.T) *transport {
	t.Helper()
	tr, err := newTransport("127.0.0.1", 0, log.New(testWriter{t}, "", 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tr.Shutdown() })
	return tr
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) { w.t.Log(string(b)); return len(b), nil }

// TestTransportDatagrams checks that datagrams arrive whole, from the
// sender's address, each in a buffer of its own: the reader reuses one
// buffer, so a packet still held must not change when the next is read.
func TestTransportDatagrams(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	to := fmt.Sprintf("127.0.0.1:%d", b.Port())
	first, second := bytes.Repeat([]byte{'x'}, 1200), []byte("second datagram")
	for _, m := range [][]byte{first, second} {
		if _, err := a.WriteTo(m, to); err != nil {
			t.Fatal(err)
		}
	}
	var got [][]byte
	for range 2 {
		select {
		case p := <-b.PacketCh():
			if p.From.String() != fmt.Sprintf("127.0.0.1:%d", a.Port()) {
				t.Errorf("from %v, want a's port %d", p.From, a.Port())
			}
			if p.Timestamp.IsZero() {
				t.Error("no timestamp")
			}
			got = append(got, p.Buf)
		case <-time.After(5 * time.Second):
			t.Fatal("datagram not received")
		}
	}
	if !bytes.Equal(got[0], first) || !bytes.Equal(got[1], second) {
		t.Fatalf("received %q / %q", got[0][:min(len(got[0]), 20)], got[1])
	}
	if cap(got[1]) > 64 {
		t.Errorf("a %d-byte datagram holds a %d-byte buffer", len(got[1]), cap(got[1]))
	}
}

func TestTransportStreams(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	conn, err := a.DialTimeout(fmt.Sprintf("127.0.0.1:%d", b.Port()), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case in := <-b.StreamCh():
		defer in.Close()
		buf := make([]byte, 5)
		if _, err := in.Read(buf); err != nil || string(buf) != "hello" {
			t.Fatalf("read %q, %v", buf, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("stream not accepted")
	}
}

func TestTransportAdvertise(t *testing.T) {
	tr := newTestTransport(t)
	for _, tc := range []struct {
		ip       string
		port     int
		wantIP   string
		wantPort int
		wantErr  bool
	}{
		{ip: "", port: 7946, wantIP: "127.0.0.1", wantPort: tr.Port()}, // bound address and port
		{ip: "10.1.2.3", port: 9000, wantIP: "10.1.2.3", wantPort: 9000},
		{ip: "::1", port: 9000, wantIP: "::1", wantPort: 9000},
		{ip: "not-an-ip", port: 9000, wantErr: true},
	} {
		ip, port, err := tr.FinalAdvertiseAddr(tc.ip, tc.port)
		if tc.wantErr {
			if err == nil {
				t.Errorf("FinalAdvertiseAddr(%q): no error", tc.ip)
			}
			continue
		}
		if err != nil || !ip.Equal(net.ParseIP(tc.wantIP)) || port != tc.wantPort {
			t.Errorf("FinalAdvertiseAddr(%q, %d) = %v, %d, %v; want %s, %d", tc.ip, tc.port, ip, port, err, tc.wantIP, tc.wantPort)
		}
	}
}

// TestTransportShutdownWithUnreadPacket: a datagram nobody reads (memberlist
// already stopped listening) must not keep Shutdown waiting.
func TestTransportShutdownWithUnreadPacket(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	if _, err := a.WriteTo([]byte("unread"), fmt.Sprintf("127.0.0.1:%d", b.Port())); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // let the reader block on the channel
	done := make(chan error, 1)
	go func() { done <- b.Shutdown() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown hangs on a packet nobody reads")
	}
	if err := b.Shutdown(); err != nil {
		t.Errorf("second Shutdown: %v", err)
	}
}

// TestTransportDropsWritesAfterShutdown: memberlist shuts its transport
// down before its gossip and probe timers stop, so a send may come after
// Shutdown; it is dropped, not an error that memberlist logs at every
// clean stop. Before Shutdown a failed write is still an error.
func TestTransportDropsWritesAfterShutdown(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	to := fmt.Sprintf("127.0.0.1:%d", b.Port())
	if _, err := a.WriteTo([]byte("x"), "127.0.0.1:no-port"); err == nil {
		t.Error("WriteTo a malformed address before Shutdown: no error")
	}
	if err := a.Shutdown(); err != nil {
		t.Fatal(err)
	}
	for _, send := range []func() (time.Time, error){
		func() (time.Time, error) { return a.WriteTo([]byte("late"), to) },
		func() (time.Time, error) { return a.WriteToAddress([]byte("late"), memberlist.Address{Addr: to}) },
	} {
		if at, err := send(); err != nil || at.IsZero() {
			t.Errorf("a send after Shutdown = %v, %v; want a send time and no error", at, err)
		}
	}
	select {
	case p := <-b.PacketCh():
		t.Errorf("a datagram sent after Shutdown arrived: %q", p.Buf)
	case <-time.After(100 * time.Millisecond):
	}
}

func TestTransportBindErrors(t *testing.T) {
	tr := newTestTransport(t)
	if _, err := newTransport("127.0.0.1", tr.Port(), log.New(testWriter{t}, "", 0)); err == nil {
		t.Error("binding a taken port: no error")
	}
	if _, err := newTransport("localhost", 0, log.New(testWriter{t}, "", 0)); err == nil {
		t.Error("binding a host name: no error")
	}
}
