package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// dnsServer answers A queries for one name with the given addresses, on
// 127.0.0.1: what a Kubernetes headless Service's name resolves to.
func dnsServer(t *testing.T, name string, ips ...string) *net.Resolver {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	mux := dns.NewServeMux()
	mux.HandleFunc(".", func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		for _, qq := range q.Question {
			if qq.Name == dns.Fqdn(name) && qq.Qtype == dns.TypeA {
				for _, ip := range ips {
					m.Answer = append(m.Answer, &dns.A{Hdr: dns.RR_Header{Name: qq.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 5}, A: net.ParseIP(ip)})
				}
			} else if qq.Name != dns.Fqdn(name) {
				m.Rcode = dns.RcodeNameError
			}
		}
		_ = w.WriteMsg(m)
	})
	srv := &dns.Server{PacketConn: pc, Handler: mux}
	go srv.ActivateAndServe()
	t.Cleanup(func() { _ = srv.Shutdown() })
	addr := pc.LocalAddr().String()
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "udp", addr)
	}}
}

// samePort returns a port free on every one of ips, TCP and UDP.
func samePort(t *testing.T, ips ...string) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", ips[0]+":0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		ok := true
		for _, ip := range ips {
			if tl, err := net.Listen("tcp", fmt.Sprintf("%s:%d", ip, port)); err == nil {
				tl.Close()
			} else {
				ok = false
			}
			if ul, err := net.ListenPacket("udp", fmt.Sprintf("%s:%d", ip, port)); err == nil {
				ul.Close()
			} else {
				ok = false
			}
		}
		if ok {
			return port
		}
	}
	t.Fatal("no port free on every address")
	return 0
}

// TestJoinByNameJoinsEveryAddress: three nodes that do not know each
// other (three clusters of one) listen on one port of three loopback
// addresses, which a name resolves to, as a headless Service's pods do. A
// fourth node given only the name joins every address, so the four are one
// cluster; joining any one of them would have left the other two apart.
func TestJoinByNameJoinsEveryAddress(t *testing.T) {
	ips := []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}
	port := samePort(t, ips...)
	var nodes []*tnode
	for i, ip := range ips {
		nodes = append(nodes, startNode(t, fmt.Sprint("pod-", i), nodeOpts{config: func(c *Config) {
			c.BindAddr = fmt.Sprintf("%s:%d", ip, port)
		}}))
	}
	for _, n := range nodes {
		if n.alive() != 1 {
			t.Fatalf("%s sees %d members before the join, want only itself", n.name, n.alive())
		}
	}
	r := dnsServer(t, "limiterd.cluster.test", ips...)
	joiner := startNode(t, "joiner", nodeOpts{config: func(c *Config) {
		c.Join = []string{fmt.Sprintf("limiterd.cluster.test:%d", port)}
		c.Resolver = r
		c.CatchUpWait = time.Hour // ready by hearing from the three, not by waiting
	}})
	if got := joiner.n.seedAddrs(context.Background()); len(got) != 3 {
		t.Fatalf("the name resolved to %v, want the 3 addresses", got)
	}
	for _, n := range append(nodes, joiner) {
		waitFor(t, n.name+" to see all four", func() bool { return n.alive() == 4 })
	}
	// Ready once it has heard from the three (their hellos to a member
	// new to them).
	waitFor(t, "the joiner to be ready", func() bool { return joiner.n.Ready() == nil })
	// Counts flow between the pods that only the name brought together.
	nodes[0].hit(t, "k", 3)
	waitCounts(t, "k", 3, nodes[1], nodes[2], joiner)
}
