package decision

import "github.com/limiterd/limiterd/limiter"

// CheckKey returns the *KeyError that Decide returns for a key it refuses
// before asking the Checker, and nil for a key it accepts.
func CheckKey(key string) error {
	if p := limiter.KeyProblem(key); p != "" {
		return &KeyError{Problem: p}
	}
	return nil
}

// BadInput returns the error Decide returns for err, an error of the
// limiter about req, when err means bad input (the same sentinel, the same
// text), and nil when it does not. A frontend that asks the limiter
// directly rather than through Decide, because it decides nothing (the
// admin listener, which reads and resets a key's counts), answers bad
// input with it in the words /check uses. It counts nothing.
func BadInput(err error, req limiter.Request) error {
	return badInput(err, req)
}
