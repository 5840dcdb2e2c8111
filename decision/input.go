package decision

import (
	"errors"
	"strconv"

	"github.com/limiterd/limiterd/counter"
	"github.com/limiterd/limiterd/limiter"
)

// KeyError is the error Decide returns for a key it refuses before asking
// the Checker: empty, longer than limiter.MaxKeyBytes or not valid UTF-8.
// The limiter would refuse such a key too, by the same check
// (limiter.KeyProblem); Decide checks first so that every frontend gives the
// same precise message and such keys never reach the limiter at all. It
// matches limiter.ErrInvalidKey (errors.Is).
//
// Problem is a field of its own so that a frontend can say where the key came
// from: httpapi writes "key from the X-Forwarded-For header is not valid
// UTF-8" for a key it took from a header.
type KeyError struct {
	// Problem says what is wrong with the key, as limiter.KeyProblem does:
	// "is empty", "is longer than 1024 bytes" or "is not valid UTF-8".
	Problem string
}

// Error returns "key " followed by Problem.
func (e *KeyError) Error() string { return "key " + e.Problem }

// Unwrap returns limiter.ErrInvalidKey.
func (e *KeyError) Unwrap() error { return limiter.ErrInvalidKey }

// inputError is a Checker error that is the client's fault. Its text is the
// message for the client; it matches both the limiter sentinel it was
// classified as and the Checker's own error.
type inputError struct {
	msg  string
	kind error // limiter.ErrInvalidKey, ErrInvalidHits, ErrUnknownRule or ErrInvalidLimit
	err  error // what the Checker returned
}

func (e *inputError) Error() string   { return e.msg }
func (e *inputError) Unwrap() []error { return []error{e.kind, e.err} }

// badInput classifies a Checker error: the error Decide returns when err
// means bad input, nil when it is internal (and the request is allowed).
// counter.ErrInvalidHits counts as limiter.ErrInvalidHits, so a frontend
// needs to know only the limiter's sentinels.
func badInput(err error, req limiter.Request) error {
	switch {
	case errors.Is(err, limiter.ErrUnknownRule):
		return &inputError{msg: "unknown rule " + quoteForMessage(req.Rule), kind: limiter.ErrUnknownRule, err: err}
	case errors.Is(err, limiter.ErrInvalidKey):
		return &inputError{msg: err.Error(), kind: limiter.ErrInvalidKey, err: err}
	case errors.Is(err, limiter.ErrInvalidHits), errors.Is(err, counter.ErrInvalidHits):
		return &inputError{msg: err.Error(), kind: limiter.ErrInvalidHits, err: err}
	case errors.Is(err, limiter.ErrInvalidLimit):
		return &inputError{msg: err.Error(), kind: limiter.ErrInvalidLimit, err: err}
	}
	return nil
}

// quoteForMessage quotes client input for an error message, cut short so a
// message stays small whatever was sent.
func quoteForMessage(s string) string {
	const maxQuoted = 64
	if len(s) > maxQuoted {
		return strconv.Quote(s[:maxQuoted]) + "..."
	}
	return strconv.Quote(s)
}
