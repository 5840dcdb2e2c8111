package loadgen

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// The raw client speaks just enough HTTP/1.1 to send "GET /check?..." on a
// keep-alive connection and read the answer: the status, whether the
// server asked to close, whether it failed open (X-RateLimit-Error), and the
// body skipped by Content-Length or chunked framing. It exists because the
// load generator shares two cores with eight nodes, and every cycle it
// spends is taken from them: measured against one limiterd at 15,000
// checks/s over 200,000 keys, net/http's client used 40 µs of CPU per
// request and fell behind schedule (p99 0.5 s late), this one 17 µs (most of
// it the write and read syscalls) and kept up. --client http remains as the
// reference it is checked against (FuzzReadResponse compares the two
// parsers).

// Bounds on what readResponse accepts from a server.
const (
	maxHeaderLines = 128
	maxBodyBytes   = 1 << 20
)

var errMalformed = errors.New("loadgen: malformed HTTP response")

// rawResponse is what the load driver needs of an answer.
type rawResponse struct {
	status   int
	close    bool // the connection cannot carry another request
	failOpen bool // X-RateLimit-Error was present: allowed because of an internal error
}

// readResponse reads one HTTP/1.x response from br and discards its body.
// An error leaves the connection unusable. br's buffer must hold a whole
// line (a header line longer than the buffer is an error).
func readResponse(br *bufio.Reader) (rawResponse, error) {
	var r rawResponse
	// io.EOF before the first byte (not io.ErrUnexpectedEOF) tells the
	// caller the server had closed the idle connection: safe to retry.
	if _, err := br.Peek(1); err != nil {
		return r, err
	}
	line, err := readLine(br)
	if err != nil {
		return r, err
	}
	// "HTTP/1.1 200 OK": version, a space, three digits, then a space or the end.
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' ||
		(len(line) > 12 && line[12] != ' ') {
		return r, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
	}
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return r, fmt.Errorf("%w: status line %q", errMalformed, clip(line))
		}
		r.status = r.status*10 + int(c-'0')
	}
	if r.status < 100 {
		return r, fmt.Errorf("%w: status %d", errMalformed, r.status)
	}
	if line[7] != '1' {
		r.close = true // HTTP/1.0: no persistent connection unless negotiated; do not bother
	}

	length, chunked := int64(-1), false
	for n := 0; ; n++ {
		if n == maxHeaderLines {
			return r, fmt.Errorf("%w: more than %d header lines", errMalformed, maxHeaderLines)
		}
		line, err := readLine(br)
		if err != nil {
			return r, err
		}
		if len(line) == 0 {
			break
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			return r, fmt.Errorf("%w: header line %q", errMalformed, clip(line))
		}
		value = bytes.TrimSpace(value)
		switch {
		case asciiEqualFold(name, "content-length"):
			v, err := strconv.ParseInt(string(value), 10, 64)
			if err != nil || v < 0 || (length >= 0 && v != length) {
				return r, fmt.Errorf("%w: Content-Length %q", errMalformed, clip(value))
			}
			length = v
		case asciiEqualFold(name, "transfer-encoding"):
			if !asciiEqualFold(value, "chunked") {
				return r, fmt.Errorf("%w: Transfer-Encoding %q", errMalformed, clip(value))
			}
			chunked = true
		case asciiEqualFold(name, "connection"):
			if asciiEqualFold(value, "close") {
				r.close = true
			}
		case asciiEqualFold(name, "x-ratelimit-error"):
			r.failOpen = true
		}
	}

	switch {
	case r.status < 200 || r.status == 204 || r.status == 304:
		if r.status < 200 {
			// limiterd never sends 1xx to a GET without Expect; a 1xx here
			// would need the final response read too, which we do not do.
			return r, fmt.Errorf("%w: informational status %d", errMalformed, r.status)
		}
		return r, nil
	case chunked:
		return r, skipChunked(br)
	case length >= 0:
		if length > maxBodyBytes {
			return r, fmt.Errorf("%w: body of %d bytes", errMalformed, length)
		}
		_, err := br.Discard(int(length))
		return r, unexpectedEOF(err)
	default:
		// No framing: the body runs to the end of the connection.
		r.close = true
		n, err := io.Copy(io.Discard, io.LimitReader(br, maxBodyBytes+1))
		if err == nil && n > maxBodyBytes {
			err = fmt.Errorf("%w: unframed body over %d bytes", errMalformed, maxBodyBytes)
		}
		return r, err
	}
}

// skipChunked discards a chunked body and its trailer.
func skipChunked(br *bufio.Reader) error {
	total := int64(0)
	for range maxBodyBytes {
		line, err := readLine(br)
		if err != nil {
			return err
		}
		size, _, _ := bytes.Cut(line, []byte(";")) // chunk extensions are ignored
		n, err := strconv.ParseInt(string(bytes.TrimSpace(size)), 16, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%w: chunk size %q", errMalformed, clip(line))
		}
		if n == 0 {
			for range maxHeaderLines { // trailer, up to the empty line
				line, err := readLine(br)
				if err != nil {
					return err
				}
				if len(line) == 0 {
					return nil
				}
			}
			return fmt.Errorf("%w: more than %d trailer lines", errMalformed, maxHeaderLines)
		}
		if total += n; total > maxBodyBytes {
			return fmt.Errorf("%w: chunked body over %d bytes", errMalformed, maxBodyBytes)
		}
		if _, err := br.Discard(int(n)); err != nil {
			return unexpectedEOF(err)
		}
		crlf, err := readLine(br)
		if err != nil {
			return err
		}
		if len(crlf) != 0 {
			return fmt.Errorf("%w: chunk not followed by CRLF", errMalformed)
		}
	}
	return fmt.Errorf("%w: too many chunks", errMalformed)
}

// readLine returns the next line without its CRLF (or bare LF). The slice
// points into br's buffer and is valid until the next read.
func readLine(br *bufio.Reader) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return nil, fmt.Errorf("%w: line longer than %d bytes", errMalformed, br.Size())
	case err != nil:
		return nil, unexpectedEOF(err)
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// unexpectedEOF turns an io.EOF in the middle of a response into
// io.ErrUnexpectedEOF; readResponse's caller tells the two apart (EOF
// before the first byte is a connection the server had closed).
func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

func asciiEqualFold(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := range len(b) {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// clip shortens what an error message quotes from a server.
func clip(b []byte) []byte {
	if len(b) > 64 {
		return b[:64]
	}
	return b
}
