package loadgen

import (
	"bufio"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// TestRawSenderRetriesStaleConnection: a server that closes a keep-alive
// connection after each answer (without saying so) costs a reconnect, not
// an error.
func TestRawSenderRetriesStaleConnection(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var served atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			served.Add(1)
			c.Write([]byte("HTTP/1.1 429 Too Many Requests\r\nContent-Length: 0\r\n\r\n"))
			c.Close()
		}
	}()
	cfg := DefaultConfig()
	s := newRawSender(ln.Addr().String(), checkPathPrefix(""), newKeyNamer(&cfg, "r"), 2*time.Second, nil)
	defer s.close()
	for i := range 5 {
		if i > 0 {
			// Let the server's close reach us before the next request, as
			// an idle keep-alive timeout would: then it is a stale connection.
			for range 100 {
				if served.Load() == int64(i) {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			time.Sleep(20 * time.Millisecond)
		}
		r, err := s.do(0)
		if err != nil || r.status != 429 {
			t.Fatalf("request %d: %+v, %v", i, r, err)
		}
	}
}
