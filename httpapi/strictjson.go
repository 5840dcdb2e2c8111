package httpapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
)

// strictJSON rejects what encoding/json accepts but a GET could not say,
// so that a POST body means exactly one thing: a field given twice (the
// decoder keeps the last: {"hits":1,"hits":600} would count 600), a field
// name in another case (the decoder matches "Key" and "HITS"), and a lone
// UTF-16 surrogate escape (the decoder turns \ud800 and \udc00 into
// U+FFFD, so different keys would share one counter). It runs before the
// decoder; a body that is not a well-formed object is left to the decoder's
// messages. It returns problem{} when the body is fine.
func strictJSON(body []byte) problem {
	if p := loneSurrogate(body); p.status != 0 {
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return problem{}
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return problem{}
		}
		name, ok := tok.(string)
		if !ok {
			return problem{}
		}
		switch lower := strings.ToLower(name); {
		case isField(name):
		case isField(lower):
			return badRequest(reasonUnknownField, "unknown field "+quoteForMessage(name)+"; the fields are "+paramNames+", in lower case")
		default:
			return badRequest(reasonUnknownField, "unknown field "+quoteForMessage(name)+"; the fields are "+paramNames)
		}
		if seen[name] {
			return badRequest(reasonMalformedJSON, "malformed JSON: field "+strconv.Quote(name)+" is given more than once")
		}
		seen[name] = true
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return problem{}
		}
	}
	return problem{}
}

// loneSurrogate finds a \uD800-\uDFFF escape that is not half of a pair
// (a high one followed at once by a low one).
func loneSurrogate(b []byte) problem {
	for i := 0; i+1 < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		if b[i+1] != 'u' {
			i++ // an escape of two bytes, \\ included
			continue
		}
		r, ok := hex4(b, i+2)
		if !ok {
			return problem{} // the decoder says what is wrong
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			if lo, ok := hex4(b, i+8); ok && i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' && lo >= 0xDC00 && lo <= 0xDFFF {
				i += 11
				continue
			}
			return badRequest(reasonMalformedJSON, `malformed JSON: \u`+string(b[i+2:i+6])+` is a lone surrogate, not a character`)
		case r >= 0xDC00 && r <= 0xDFFF:
			return badRequest(reasonMalformedJSON, `malformed JSON: \u`+string(b[i+2:i+6])+` is a lone surrogate, not a character`)
		}
		i += 5
	}
	return problem{}
}

// hex4 reads four hex digits at b[i:].
func hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(b[i:i+4]), 16, 16)
	return rune(n), err == nil
}

// isField reports whether name is a field of the /check body (checkBody).
func isField(name string) bool {
	switch name {
	case "key", "rule", "hits", "limit", "window":
		return true
	}
	return false
}
