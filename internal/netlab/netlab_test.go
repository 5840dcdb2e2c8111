package netlab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"testing"
	"time"
)

// newLab makes a lab of n nodes or skips, saying why, when the machine
// refuses namespaces or has no nft (the e2e tests install it; this
// package's tests do not reach for apt).
func newLab(t *testing.T, n int) *Lab {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Nodes = n
	cfg.Prefix = netip.MustParsePrefix("10.214.0.0/24")
	if _, err := exec.LookPath(cfg.NFT); err != nil {
		cfg.NFT = ""
	}
	l, err := New(cfg)
	if errors.Is(err, ErrUnavailable) {
		t.Skipf("this machine refuses network namespaces: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// echo serves, on every node at :7000, the node's index.
func echo(t *testing.T, l *Lab) {
	t.Helper()
	for i := range l.Nodes() {
		ln, err := l.Listen(i, "tcp", fmt.Sprintf("%s:7000", l.Addr(i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprint(c, i)
				c.Close()
			}
		}()
	}
}

// reach reports whether a connection from node from (or the hub, -1) to
// node to gets to's answer within 300 ms.
func reach(l *Lab, from, to int) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	addr := fmt.Sprintf("%s:7000", l.Addr(to))
	var c net.Conn
	var err error
	if from < 0 {
		c, err = l.DialContext(ctx, "tcp", addr)
	} else {
		c, err = l.DialFrom(ctx, from, "tcp", addr)
	}
	if err != nil {
		return false
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(300 * time.Millisecond))
	b, err := io.ReadAll(c)
	return err == nil && string(b) == fmt.Sprint(to)
}

func TestLabReachAndFaults(t *testing.T) {
	l := newLab(t, 4)
	echo(t, l)
	for to := range 4 {
		if !reach(l, -1, to) {
			t.Fatalf("the hub does not reach node %d", to)
		}
		for from := range 4 {
			if !reach(l, from, to) {
				t.Fatalf("node %d does not reach node %d", from, to)
			}
		}
	}
	if l.cfg.NFT == "" {
		t.Skip("no nft on this machine: the faults are tested by e2e, which installs it")
	}

	if err := l.Partition([]int{0, 1}, []int{2, 3}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		from, to int
		want     bool
	}{{0, 1, true}, {2, 3, true}, {0, 2, false}, {3, 1, false}, {-1, 2, true}, {-1, 0, true}} {
		if got := reach(l, tc.from, tc.to); got != tc.want {
			t.Errorf("partitioned: %d reaches %d: %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
	if n, err := l.Drops(2); err != nil || n == 0 {
		t.Errorf("node 2 dropped %d packets (%v), want some", n, err)
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}
	if !reach(l, 0, 2) || !reach(l, 3, 1) {
		t.Fatal("healed, yet the halves do not reach each other")
	}

	// One way: 1 hears 0's packets no more; a TCP handshake needs both
	// ways, so neither connects, but a datagram from 1 reaches 0.
	if err := l.DropOneWay(0, 1); err != nil {
		t.Fatal(err)
	}
	if reach(l, 0, 1) {
		t.Error("0 reaches 1 though 1 drops what 0 sends")
	}
	if !oneDatagram(t, l, 1, 0) {
		t.Error("a datagram from 1 did not reach 0: the drop is not one way")
	}
	if oneDatagram(t, l, 0, 1) {
		t.Error("a datagram from 0 reached 1")
	}
	if err := l.Heal(); err != nil {
		t.Fatal(err)
	}

	// 100 % loss between nodes drops all of it, and never the hub's.
	if err := l.Loss(100); err != nil {
		t.Fatal(err)
	}
	if reach(l, 0, 1) || !reach(l, -1, 1) {
		t.Error("100 % loss: nodes still talk, or the hub is cut off")
	}
	if err := l.Loss(101); err == nil {
		t.Error("a loss of 101 % was accepted")
	}
}

// oneDatagram sends a UDP datagram from node from to node to and reports
// whether it arrived within 300 ms.
func oneDatagram(t *testing.T, l *Lab, from, to int) bool {
	t.Helper()
	var pc net.PacketConn
	err := inNamespace("/run/netns/"+l.Namespace(to), func() (err error) {
		pc, err = net.ListenPacket("udp", l.Addr(to).String()+":7001")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	c, err := l.DialFrom(context.Background(), from, "udp", l.Addr(to).String()+":7001")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("x"))
	pc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	_, _, err = pc.ReadFrom(make([]byte, 8))
	return err == nil
}

func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		ok   bool
	}{
		{"default", func(*Config) {}, true},
		{"no nodes", func(c *Config) { c.Nodes = 0 }, false},
		{"too many", func(c *Config) { c.Nodes = 201 }, false},
		{"a /16", func(c *Config) { c.Prefix = netip.MustParsePrefix("10.0.0.0/16") }, false},
		{"not masked", func(c *Config) { c.Prefix = netip.MustParsePrefix("10.0.0.5/24") }, false},
		{"IPv6", func(c *Config) { c.Prefix = netip.MustParsePrefix("fd00::/120") }, false},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		if err := c.Validate(); (err == nil) != tc.ok {
			t.Errorf("%s: Validate() = %v", tc.name, err)
		}
	}
}
