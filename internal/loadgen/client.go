package loadgen

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"syscall"
	"time"
)

// keyNamer names and URL-encodes the keys of a run. Keys are numbered
// over the whole run: each of its groups (the pattern's keys, or a
// stream's) holds the keys [base, base+n), one named key or prefix+index.
type keyNamer struct {
	groups []keyGroup
}

type keyGroup struct {
	base, n int32
	name    string // the key, or the prefix of the keys
	esc     []byte // name URL-encoded
	many    bool   // keys are name + index in the group
}

func newKeyNamer(cfg *Config, runID string) *keyNamer {
	k := &keyNamer{}
	switch cfg.Pattern {
	case PatternKeys:
		k.add(cfg.KeyPrefix+runID+"-k", int32(cfg.Keys), true)
	case PatternStreams:
		for _, s := range cfg.Streams {
			k.add(s.Key, int32(max(s.Keys, 1)), s.Keys > 1)
		}
	default:
		single := cfg.Key
		if single == "" {
			single = cfg.KeyPrefix + cfg.Pattern + "-" + runID
		}
		k.add(single, 1, false)
	}
	return k
}

func (k *keyNamer) add(name string, n int32, many bool) {
	base := int32(0)
	if len(k.groups) > 0 {
		last := k.groups[len(k.groups)-1]
		base = last.base + last.n
	}
	k.groups = append(k.groups, keyGroup{base: base, n: n, name: name, esc: []byte(url.QueryEscape(name)), many: many})
}

// total is the number of the run's keys.
func (k *keyNamer) total() int {
	last := k.groups[len(k.groups)-1]
	return int(last.base + last.n)
}

// group returns the index of key i's group and i's index in it.
func (k *keyNamer) group(i int32) (int, int32) {
	g := sort.Search(len(k.groups), func(g int) bool { return k.groups[g].base+k.groups[g].n > i })
	g = min(g, len(k.groups)-1)
	return g, i - k.groups[g].base
}

func (k *keyNamer) name(i int32) string {
	g, j := k.group(i)
	if !k.groups[g].many {
		return k.groups[g].name
	}
	return k.groups[g].name + strconv.Itoa(int(j))
}

func (k *keyNamer) appendEscaped(b []byte, i int32) []byte {
	g, j := k.group(i)
	b = append(b, k.groups[g].esc...)
	if !k.groups[g].many {
		return b
	}
	return strconv.AppendInt(b, int64(j), 10) // digits need no escaping
}

// checkPathPrefix is "/check?" with the rule parameter, up to "key=".
func checkPathPrefix(rule string) string {
	if rule == "" {
		return "/check?key="
	}
	return "/check?rule=" + url.QueryEscape(rule) + "&key="
}

// A sender sends checks to one target, one at a time. Each worker owns one.
type sender interface {
	do(key int32) (rawResponse, error)
	close()
}

// rawSender is one keep-alive connection driven by readResponse.
type rawSender struct {
	addr    string
	path    string // checkPathPrefix
	keys    *keyNamer
	timeout time.Duration
	dial    dialFunc

	conn   net.Conn
	br     *bufio.Reader
	buf    []byte
	reused bool // conn carried a request before
}

// dialFunc opens a connection (Config.Dial).
type dialFunc = func(ctx context.Context, network, addr string) (net.Conn, error)

// newRawSender sends to addr, dialling with dial (nil: net.Dialer's).
func newRawSender(addr, path string, keys *keyNamer, timeout time.Duration, dial dialFunc) *rawSender {
	if dial == nil {
		dial = (&net.Dialer{Timeout: timeout}).DialContext
	}
	return &rawSender{addr: addr, path: path, keys: keys, timeout: timeout, dial: dial}
}

// do sends one check. A request written on a reused connection that the
// server had already closed (EOF or reset before any byte of an answer)
// is sent once more on a new connection: the server never read it, so it
// counted nothing. That is what net/http does for idempotent requests.
func (s *rawSender) do(key int32) (rawResponse, error) {
	r, err := s.try(key)
	if err != nil && s.reused && staleConn(err) {
		s.close()
		r, err = s.try(key)
	}
	return r, err
}

func (s *rawSender) try(key int32) (rawResponse, error) {
	if s.conn == nil {
		ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
		c, err := s.dial(ctx, "tcp", s.addr)
		cancel()
		if err != nil {
			return rawResponse{}, err
		}
		s.conn, s.reused = c, false
		if s.br == nil {
			s.br = bufio.NewReaderSize(c, 4096)
		} else {
			s.br.Reset(c)
		}
	}
	s.buf = append(s.buf[:0], "GET "...)
	s.buf = append(s.buf, s.path...)
	s.buf = s.keys.appendEscaped(s.buf, key)
	s.buf = append(s.buf, " HTTP/1.1\r\nHost: "...)
	s.buf = append(s.buf, s.addr...)
	s.buf = append(s.buf, "\r\nUser-Agent: limitload\r\n\r\n"...)
	if err := s.conn.SetDeadline(time.Now().Add(s.timeout)); err != nil {
		s.close()
		return rawResponse{}, err
	}
	if _, err := s.conn.Write(s.buf); err != nil {
		s.close()
		return rawResponse{}, err
	}
	r, err := readResponse(s.br)
	if err != nil || r.close {
		s.close()
	} else {
		s.reused = true
	}
	return r, err
}

func staleConn(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

func (s *rawSender) close() {
	if s.conn != nil {
		s.conn.Close()
		s.conn = nil
	}
}

// httpSender sends through net/http; all of a target's workers share one
// Client whose Transport keeps up to Conns connections to each target.
type httpSender struct {
	client *http.Client
	base   string // "http://" + addr + path
	keys   *keyNamer
	buf    []byte
}

// newHTTPClient is net/http tuned for many small requests in flight to a
// few hosts: a keep-alive connection per worker, no compression, no
// HTTP/2, no proxy from the environment. dial opens the connections (nil:
// net.Dialer's).
func newHTTPClient(conns int, timeout time.Duration, dial dialFunc) *http.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	}
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         dial,
			MaxIdleConns:        0, // no global cap; the per-host caps apply
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
			ForceAttemptHTTP2:   false,
		},
	}
}

func (s *httpSender) do(key int32) (rawResponse, error) {
	s.buf = append(s.buf[:0], s.base...)
	s.buf = s.keys.appendEscaped(s.buf, key)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, string(s.buf), nil)
	if err != nil {
		return rawResponse{}, err
	}
	req.Header.Set("User-Agent", "limitload")
	resp, err := s.client.Do(req)
	if err != nil {
		return rawResponse{}, err
	}
	_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
	resp.Body.Close()
	return rawResponse{status: resp.StatusCode, failOpen: resp.Header.Get("X-RateLimit-Error") != ""}, err
}

func (s *httpSender) close() {}
