package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"syscall"
	"time"
)

// keyNamer names and URL-encodes the keys of a run: the single key of the
// single-key patterns, or prefix + index for the keys pattern.
type keyNamer struct {
	single    string // single-key patterns: the key
	prefix    string // keys pattern: what precedes the index
	escSingle []byte
	escPrefix []byte
	many      bool
}

func newKeyNamer(cfg *Config, runID string) *keyNamer {
	k := &keyNamer{many: !cfg.singleKey()}
	if k.many {
		k.prefix = cfg.KeyPrefix + runID + "-k"
		k.escPrefix = []byte(url.QueryEscape(k.prefix))
		return k
	}
	k.single = cfg.Key
	if k.single == "" {
		k.single = cfg.KeyPrefix + cfg.Pattern + "-" + runID
	}
	k.escSingle = []byte(url.QueryEscape(k.single))
	return k
}

func (k *keyNamer) name(i int32) string {
	if !k.many {
		return k.single
	}
	return k.prefix + strconv.Itoa(int(i))
}

func (k *keyNamer) appendEscaped(b []byte, i int32) []byte {
	if !k.many {
		return append(b, k.escSingle...)
	}
	b = append(b, k.escPrefix...)
	return strconv.AppendInt(b, int64(i), 10) // digits need no escaping
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
	dialer  net.Dialer

	conn   net.Conn
	br     *bufio.Reader
	buf    []byte
	reused bool // conn carried a request before
}

func newRawSender(addr, path string, keys *keyNamer, timeout time.Duration) *rawSender {
	return &rawSender{addr: addr, path: path, keys: keys, timeout: timeout, dialer: net.Dialer{Timeout: timeout}}
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
		c, err := s.dialer.Dial("tcp", s.addr)
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
// HTTP/2, no proxy from the environment.
func newHTTPClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext,
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
