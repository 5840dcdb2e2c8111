package middleware

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// ClientIP returns a KeyFunc that keys a request by the address of the
// client that sent it, without the port.
//
// With no trusted proxies the key is the address of the peer of the
// connection (http.Request.RemoteAddr) and X-Forwarded-For is ignored: any
// client can write that header, and one that could pick its own key would
// escape its limit by sending a new address with every request, or exhaust
// another client's limit by sending its address.
//
// With trusted proxies (the reverse proxies and load balancers in front of
// the service, as CIDR prefixes), the header is believed only as far as
// trusted proxies wrote it: when the peer is a trusted proxy, the
// addresses of X-Forwarded-For (all its header lines, as one list) are
// walked from the right, the end each proxy appends to, and the key is the
// first address that is not a trusted proxy: the client as the outermost
// trusted proxy saw it. Whatever a client put further left is never read,
// so it cannot spoof its address. If every address is a trusted proxy the
// key is the leftmost one; if an entry is not an address ("unknown", an
// obfuscated name) the walk stops at the trusted proxy that wrote it, whose
// address is the key. Entries may carry a port ("192.0.2.1:4711",
// "[2001:db8::1]:4711"), which is dropped. The Forwarded header (RFC 7239)
// is not read.
//
// IPv4-mapped IPv6 addresses count as IPv4, for the peer, the header and
// the prefixes alike. Note that a client with an IPv6 prefix of its own
// has many addresses: key by a coarser unit in a KeyFunc of your own if that
// matters.
//
// The KeyFunc fails, with an error wrapping ErrNoKey, when RemoteAddr is
// not an address (a Unix socket listener): ClientIP needs TCP. ClientIP
// panics for an invalid prefix (the zero netip.Prefix), a mistake found at
// start-up.
func ClientIP(trustedProxies ...netip.Prefix) KeyFunc {
	trusted := make([]netip.Prefix, 0, len(trustedProxies))
	for _, p := range trustedProxies {
		if !p.IsValid() {
			panic(fmt.Sprintf("middleware: ClientIP: invalid trusted proxy prefix %v", p))
		}
		if a := p.Addr(); a.Is4In6() {
			p = netip.PrefixFrom(a.Unmap(), max(p.Bits()-96, 0))
		}
		trusted = append(trusted, p.Masked())
	}
	return func(r *http.Request) (string, error) {
		peer, ok := remoteIP(r.RemoteAddr)
		if !ok {
			return "", fmt.Errorf("%w: RemoteAddr %q is not an IP address and port", ErrNoKey, r.RemoteAddr)
		}
		if len(trusted) == 0 || !isTrusted(trusted, peer) {
			return peer.String(), nil
		}
		return forwardedClient(r.Header["X-Forwarded-For"], peer, trusted).String(), nil
	}
}

// remoteIP parses a RemoteAddr, "192.0.2.1:4711" or "[2001:db8::1]:4711".
func remoteIP(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	// Go's servers always write host:port; a wrapper that sets a bare
	// address is forgiven.
	if host, _, err := net.SplitHostPort(s); err == nil {
		s = host
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return normalize(a), true
}

// forwardedClient walks the X-Forwarded-For lines vals from the right, as
// ClientIP documents, and returns the client's address. peer is trusted.
func forwardedClient(vals []string, peer netip.Addr, trusted []netip.Prefix) netip.Addr {
	client := peer
	for i := len(vals) - 1; i >= 0; i-- {
		v := vals[i]
		for v != "" {
			part := v
			v = ""
			if j := strings.LastIndexByte(part, ','); j >= 0 {
				part, v = part[j+1:], part[:j]
			}
			part = strings.Trim(part, " \t")
			if part == "" {
				continue // an empty list element, "a,,b"
			}
			a, ok := forwardedAddr(part)
			if !ok {
				return client // the trusted hop that wrote it is the key
			}
			client = a
			if !isTrusted(trusted, a) {
				return a
			}
		}
	}
	return client
}

// forwardedAddr parses one X-Forwarded-For entry: an address, possibly
// with a port, an IPv6 one possibly in brackets.
func forwardedAddr(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if len(s) > 2 && s[0] == '[' && s[len(s)-1] == ']' {
		if a, err := netip.ParseAddr(s[1 : len(s)-1]); err == nil {
			return normalize(a), true
		}
	}
	return netip.Addr{}, false
}

// normalize makes one client one key: IPv4-mapped addresses as IPv4, no
// zone.
func normalize(a netip.Addr) netip.Addr { return a.Unmap().WithZone("") }

func isTrusted(trusted []netip.Prefix, a netip.Addr) bool {
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Header returns a KeyFunc that keys a request by the first value of the
// header name, spaces and tabs trimmed; a request without it, or with an
// empty one, fails with an error wrapping ErrNoKey. A header is what the
// client says it is: key by one only once it is authenticated (a checked
// API key), or set by a proxy you trust that overwrites what the client
// sent, since a client free to pick its key escapes its limit.
func Header(name string) KeyFunc {
	canon := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		if vs := r.Header[canon]; len(vs) > 0 {
			if v := strings.Trim(vs[0], " \t"); v != "" {
				return v, nil
			}
		}
		return "", fmt.Errorf("%w: no %s header", ErrNoKey, canon)
	}
}

// Route keys a request by its method and route, "GET /items/{id}": one
// limit shared by all clients of a route. The route is the pattern of the
// http.ServeMux (Go 1.22+) that matched the request, when there is one, so
// that /items/1 and /items/2 share a key; a pattern that names a method is
// the key as it is ("GET /items/{id}" also for a HEAD it matched). A
// request that no ServeMux matched, which is the case when the middleware
// wraps the mux rather than the handlers registered on it, is keyed by its
// path, one key per distinct path: wrap each route's handler to get
// pattern keys.
func Route(r *http.Request) (string, error) {
	if p := r.Pattern; p != "" {
		if strings.ContainsAny(p, " \t") {
			return p, nil // "METHOD [HOST]/PATH"
		}
		return r.Method + " " + p, nil
	}
	return r.Method + " " + r.URL.Path, nil
}
