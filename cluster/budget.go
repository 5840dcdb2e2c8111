package cluster

import (
	"net"
	"runtime"
)

// The IP and UDP headers a datagram carries besides its payload.
const (
	udp4Headers = 20 + 8
	udp6Headers = 40 + 8
)

// otherLoopbackBudget caps the loopback budget on systems other than
// Linux: macOS refuses UDP datagrams over net.inet.udp.maxdgram (9,216
// bytes by default) whatever lo0's MTU.
const otherLoopbackBudget = 9216 - udp6Headers

// datagramBudget is the budget a node bound to host uses when its
// Config.DatagramBudget is 0: DefaultDatagramBudget, or, on a loopback
// address, what the loopback interface carries (loopbackMTU, 0 when
// unknown) less the headers, at most MaxDatagramBudget (60,000 bytes on
// Linux, whose loopback MTU is 64 KiB). A socket bound to a loopback
// address reaches only processes on its own host (the kernel does not
// route from it), so no path between two such nodes has a smaller MTU
// than that interface and nothing is ever fragmented on a wire. Every
// other address keeps 1,400: an interface's MTU says nothing of the path
// to a peer (an AWS VPC's 9,001-byte frames cross a peering at 1,500),
// so a larger budget there is the operator's to set.
func datagramBudget(host string, loopbackMTU int, goos string) int {
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return DefaultDatagramBudget
	}
	headers := udp4Headers
	if ip.To4() == nil {
		headers = udp6Headers
	}
	b := min(loopbackMTU-headers, MaxDatagramBudget)
	if goos != "linux" {
		b = min(b, otherLoopbackBudget)
	}
	if b < DefaultDatagramBudget {
		return DefaultDatagramBudget
	}
	return b
}

// loopbackMTU is the MTU of this host's loopback interface, 0 if none is
// up or the interfaces cannot be listed.
func loopbackMTU() int {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 && i.Flags&net.FlagUp != 0 {
			return i.MTU
		}
	}
	return 0
}

// resolveBudget sets c.DatagramBudget when it is 0 (datagramBudget, on
// this host) and reports whether it did.
func (c *Config) resolveBudget() bool {
	if c.DatagramBudget != 0 {
		return false
	}
	host, _, _ := splitHostPort(c.BindAddr) // checked by Validate
	c.DatagramBudget = datagramBudget(host, loopbackMTU(), runtime.GOOS)
	return true
}
