package loadgen

import (
	"bufio"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestReadResponse(t *testing.T) {
	const body = `{"allowed":true}`
	tests := []struct {
		name string
		in   string
		want rawResponse
		err  bool
		rest string // what must be left unread: the next response
	}{
		{name: "limiterd 200", in: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 16\r\n\r\n" + body + "NEXT",
			want: rawResponse{status: 200}, rest: "NEXT"},
		{name: "429 without a reason", in: "HTTP/1.1 429\r\ncontent-length: 2\r\n\r\n{}NEXT", want: rawResponse{status: 429}, rest: "NEXT"},
		{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 0\n\nNEXT", want: rawResponse{status: 200}, rest: "NEXT"},
		{name: "fail open", in: "HTTP/1.1 200 OK\r\nX-RateLimit-Error: internal\r\nContent-Length: 0\r\n\r\n", want: rawResponse{status: 200, failOpen: true}},
		{name: "connection close", in: "HTTP/1.1 400 Bad Request\r\nConnection: Close\r\nContent-Length: 0\r\n\r\n", want: rawResponse{status: 400, close: true}},
		{name: "HTTP/1.0", in: "HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", want: rawResponse{status: 200, close: true}},
		{name: "chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nabcd\r\n10\r\n0123456789abcdef\r\n0\r\nTrailer: x\r\n\r\nNEXT",
			want: rawResponse{status: 200}, rest: "NEXT"},
		{name: "no framing", in: "HTTP/1.1 200 OK\r\n\r\nto the end", want: rawResponse{status: 200, close: true}},
		{name: "204 has no body", in: "HTTP/1.1 204 No Content\r\n\r\nNEXT", want: rawResponse{status: 204}, rest: "NEXT"},
		{name: "empty", in: "", err: true},
		{name: "cut in the headers", in: "HTTP/1.1 200 OK\r\nContent-Le", err: true},
		{name: "cut in the body", in: "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", err: true},
		{name: "not HTTP", in: "SSH-2.0-OpenSSH\r\n\r\n", err: true},
		{name: "letters in status", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: true},
		{name: "four-digit status", in: "HTTP/1.1 2000 OK\r\n\r\n", err: true},
		{name: "status 099", in: "HTTP/1.1 099 OK\r\n\r\n", err: true},
		{name: "1xx", in: "HTTP/1.1 100 Continue\r\n\r\n", err: true},
		{name: "bad length", in: "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", err: true},
		{name: "two lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab", err: true},
		{name: "huge length", in: "HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n", err: true},
		{name: "other coding", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", err: true},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: true},
		{name: "chunk without CRLF", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabX\r\n0\r\n\r\n", err: true},
		{name: "header without colon", in: "HTTP/1.1 200 OK\r\nnonsense\r\n\r\n", err: true},
		{name: "line over the buffer", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("a", 5000) + "\r\n\r\n", err: true},
		{name: "too many headers", in: "HTTP/1.1 200 OK\r\n" + strings.Repeat("X: y\r\n", 200) + "\r\n", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			br := bufio.NewReaderSize(strings.NewReader(tt.in), 4096)
			got, err := readResponse(br)
			if tt.err {
				if err == nil {
					t.Fatalf("accepted as %+v", got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("%+v, %v; want %+v", got, err, tt.want)
			}
			rest, _ := io.ReadAll(br)
			if !got.close && string(rest) != tt.rest {
				t.Errorf("left %q unread, want %q", rest, tt.rest)
			}
		})
	}
}

// TestReadResponseEOF: a connection closed before the first byte is io.EOF
// (the stale keep-alive case the sender retries); cut later, it is not.
func TestReadResponseEOF(t *testing.T) {
	if _, err := readResponse(bufio.NewReader(strings.NewReader(""))); err != io.EOF {
		t.Errorf("empty: %v, want io.EOF", err)
	}
	if _, err := readResponse(bufio.NewReader(strings.NewReader("HTTP/1.1 2"))); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("cut: %v, want io.ErrUnexpectedEOF", err)
	}
}

// FuzzReadResponse: whatever a server sends, readResponse returns (no
// panic, no endless loop), accepts only statuses 200..999, and agrees with
// net/http on the status of every response both accept.
func FuzzReadResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}",
		"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 1\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nbody",
		"HTTP/1.1 200 OK\r\nConnection: close\r\nX-RateLimit-Error: internal\r\n\r\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := readResponse(bufio.NewReaderSize(strings.NewReader(string(data)), 4096))
		if err != nil {
			return
		}
		if got.status < 200 || got.status > 999 {
			t.Fatalf("accepted status %d", got.status)
		}
		req, _ := http.NewRequest("GET", "http://127.0.0.1/check?key=k", nil)
		resp, herr := http.ReadResponse(bufio.NewReader(strings.NewReader(string(data))), req)
		if herr == nil {
			_, berr := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if berr == nil && resp.StatusCode != got.status {
				t.Fatalf("status %d, net/http reads %d", got.status, resp.StatusCode)
			}
		}
	})
}
