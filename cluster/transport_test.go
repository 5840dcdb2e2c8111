package cluster

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"log"
	"net"
	"slices"
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

// withCRC frames msg as memberlist does for a peer of protocol 5 and up.
func withCRC(msg []byte) []byte {
	h := make([]byte, 5, 5+len(msg))
	h[0] = mlHasCrcMsg
	binary.BigEndian.PutUint32(h[1:], crc32.ChecksumIEEE(msg))
	return append(h, msg...)
}

func TestUserPayload(t *testing.T) {
	user := append([]byte{mlUserMsg}, "payload"...)
	badCRC := withCRC(user)
	badCRC[1] ^= 1
	for _, tc := range []struct {
		name string
		in   []byte
		want string // "" with ok false: memberlist's to handle
		ok   bool
	}{
		{"user message", user, "payload", true},
		{"behind a checksum", withCRC(user), "payload", true},
		{"empty user message", []byte{mlUserMsg}, "", true},
		{"checksum mismatch", badCRC, "", false},
		{"checksum of a ping", withCRC([]byte{0, 1, 2}), "", false},
		{"a ping", []byte{0, mlUserMsg}, "", false},
		{"compound", []byte{7, 1, 0, 2, mlUserMsg, 'x'}, "", false},
		{"labelled", append([]byte{mlHasLabelMsg, 1, 'l'}, user...), "", false},
		{"checksum header alone", withCRC(nil), "", false},
		{"empty", nil, "", false},
	} {
		got, ok := userPayload(tc.in)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("%s: userPayload(% x) = %q, %v; want %q, %v", tc.name, tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzUserPayload: whatever the datagram, userPayload does not panic, and
// a payload it returns is the datagram's tail after a user message's type
// byte, at offset 1 or, behind a checksum that matches, 6.
func FuzzUserPayload(f *testing.F) {
	f.Add([]byte{mlUserMsg, 'x'})
	f.Add(withCRC([]byte{mlUserMsg, 'x'}))
	f.Add([]byte{mlHasCrcMsg, 0, 0, 0, 0, mlUserMsg})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, ok := userPayload(b)
		if !ok {
			return
		}
		switch off := len(b) - len(p); {
		case off == 1 && b[0] == mlUserMsg:
		case off == 6 && b[0] == mlHasCrcMsg && b[5] == mlUserMsg && crc32.ChecksumIEEE(b[5:]) == binary.BigEndian.Uint32(b[1:5]):
		default:
			t.Fatalf("userPayload(% x) = % x", b, p)
		}
		if !bytes.Equal(p, b[len(b)-len(p):]) {
			t.Fatalf("payload % x is not the tail of % x", p, b)
		}
	})
}

// TestTransportDeliversUserMessages: once deliverUsers is set, a plain user
// message (with or without a checksum) goes to it, in a buffer of its own,
// and every other datagram to memberlist as before.
func TestTransportDeliversUserMessages(t *testing.T) {
	a, b := newTestTransport(t), newTestTransport(t)
	got := make(chan []byte, 4)
	b.deliverUsers(func(p []byte) { got <- p })
	to := fmt.Sprintf("127.0.0.1:%d", b.Port())
	ping := []byte{0, 1, 2, 3}
	// The ping last: memberlist's channel takes it only when read below.
	for _, m := range [][]byte{append([]byte{mlUserMsg}, "first"...), withCRC(append([]byte{mlUserMsg}, "second"...)), ping} {
		if _, err := a.WriteTo(m, to); err != nil {
			t.Fatal(err)
		}
	}
	var users []string
	var held []byte
	for range 2 {
		select {
		case p := <-got:
			if held == nil {
				held = p
			}
			users = append(users, string(p))
		case <-time.After(5 * time.Second):
			t.Fatalf("user messages delivered: %q, want 2", users)
		}
	}
	if want := []string{"first", "second"}; !slices.Equal(users, want) {
		t.Errorf("delivered %q, want %q", users, want)
	}
	if string(held) != "first" {
		t.Errorf("a payload held changed to %q when the next was read", held)
	}
	select {
	case p := <-b.PacketCh():
		if !bytes.Equal(p.Buf, ping) {
			t.Errorf("memberlist got % x, want the ping % x", p.Buf, ping)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the ping did not reach memberlist")
	}
	if n := b.users.Load(); n != 2 {
		t.Errorf("users = %d, want 2", n)
	}
}
