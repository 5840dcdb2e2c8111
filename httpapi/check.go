package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/limiterd/limiterd/decision"
	"github.com/limiterd/limiterd/limiter"
)

// checkState is the scratch space of one /check, pooled so that the hot path
// allocates neither a Result (about 700 bytes) nor its buffers.
type checkState struct {
	res  decision.Result
	body []byte // JSON response body
	hdr  []byte // values of the dynamic headers, back to back
}

// problem is a rejected request; status 0 means there is none.
type problem struct {
	status int
	reason reason
	msg    string
}

func badRequest(r reason, msg string) problem {
	return problem{status: http.StatusBadRequest, reason: r, msg: msg}
}

// params are the check parameters as sent, from the query or the JSON body.
type params struct {
	key, rule, hits, limit, window                string
	hasKey, hasRule, hasHits, hasLimit, hasWindow bool
}

func (a *API) serveCheck(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		w.Header().Set("Allow", "GET, POST")
		a.reject(w, problem{http.StatusMethodNotAllowed, reasonMethodNotAllowed,
			"method " + methodForMessage(r.Method) + " not allowed; use GET or POST"})
		return
	}
	req, keyFromHeader, p := a.parseCheckRequest(w, r)
	if p.status != 0 {
		a.reject(w, p)
		return
	}
	st := a.states.Get().(*checkState)
	switch err := a.dec.Decide(r.Context(), req, &st.res); {
	case err != nil:
		a.rejectDecision(w, err, keyFromHeader)
	case st.res.Internal:
		writeInternalError(w)
	default:
		a.writeDecision(w, st)
	}
	a.states.Put(st)
}

// rejectDecision answers a request the Decider refused as bad input. The
// Decider's message is the client's, except that a key taken from the key
// header is named as such, since the client may not know it sent one.
func (a *API) rejectDecision(w http.ResponseWriter, err error, keyFromHeader bool) {
	var ke *decision.KeyError
	switch {
	case keyFromHeader && errors.As(err, &ke):
		a.reject(w, badRequest(reasonInvalidKey, "key from the "+a.keyHeader+" header "+ke.Problem))
	case errors.Is(err, limiter.ErrUnknownRule):
		a.reject(w, badRequest(reasonUnknownRule, err.Error()))
	case errors.Is(err, limiter.ErrInvalidKey):
		a.reject(w, badRequest(reasonInvalidKey, err.Error()))
	case errors.Is(err, limiter.ErrInvalidHits):
		a.reject(w, badRequest(reasonInvalidHits, err.Error()))
	case errors.Is(err, limiter.ErrInvalidLimit):
		a.reject(w, badRequest(reasonInvalidLimit, err.Error()))
	default:
		// Decide returns no other error. Were it to, failing open is the
		// answer that cannot cause an outage.
		a.log.Error("unexpected error from Decide; request allowed", "err", err)
		writeInternalError(w)
	}
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

// reject answers a bad request. It is logged at debug level only: clients
// decide how many there are.
func (a *API) reject(w http.ResponseWriter, p problem) {
	a.m.bad(p.reason)
	a.log.Debug("bad check request", "reason", p.reason.String(), "error", p.msg)
	writeError(w, p.status, p.msg)
}

// parseCheckRequest reads the check parameters of a GET or POST /check and
// reports whether the key came from the key header. The key's content is
// the Decider's to validate.
func (a *API) parseCheckRequest(w http.ResponseWriter, r *http.Request) (limiter.Request, bool, problem) {
	var ps params
	var p problem
	if r.Method == http.MethodPost {
		var body []byte
		if body, p = a.readBody(w, r); p.status != 0 {
			return limiter.Request{}, false, p
		}
		if len(bytes.TrimSpace(body)) > 0 {
			if r.URL.RawQuery != "" {
				return limiter.Request{}, false, badRequest(reasonInvalidQuery,
					"query parameters are not accepted with a JSON body; put them in the body")
			}
			if p = checkContentType(r.Header.Get("Content-Type")); p.status != 0 {
				return limiter.Request{}, false, p
			}
			if ps, p = parseJSON(body); p.status != 0 {
				return limiter.Request{}, false, p
			}
			return a.request(r, ps)
		}
		// An empty POST is a GET: see the package documentation.
	}
	if ps, p = parseQuery(r.URL.RawQuery); p.status != 0 {
		return limiter.Request{}, false, p
	}
	return a.request(r, ps)
}

// request validates the hits of ps, fills defaults and takes the key from
// the header when ps has none, reporting whether it did. An empty key
// parameter is passed on as it is: the Decider rejects it ("key is empty"),
// where falling back to the header would quietly limit the wrong client.
func (a *API) request(r *http.Request, ps params) (limiter.Request, bool, problem) {
	req := limiter.Request{Rule: ps.rule, Hits: 1}
	if ps.hasHits {
		n, err := strconv.ParseInt(ps.hits, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange):
			return req, false, badRequest(reasonInvalidHits, "hits is out of range")
		case err != nil:
			return req, false, badRequest(reasonInvalidHits, "hits is not an integer")
		case n < 1:
			return req, false, badRequest(reasonInvalidHits, "hits must be at least 1")
		}
		req.Hits = n
	}
	if ps.hasLimit || ps.hasWindow {
		spec, p := statedLimit(ps)
		if p.status != 0 {
			return req, false, p
		}
		req.Limit = spec
	}
	if ps.hasKey {
		req.Key = ps.key
		return req, false, problem{}
	}
	req.Key = a.headerKey(r)
	if req.Key == "" {
		return req, true, badRequest(reasonMissingKey,
			"missing key: no key parameter and no address in the "+a.keyHeader+" header")
	}
	return req, true, problem{}
}

// statedLimit reads the limit a request states, limit and window (see
// the package documentation): their syntax here, their range in the
// limiter, which validates them as Envoy's overrides (limiter.Request.Limit).
func statedLimit(ps params) (*limiter.LimitSpec, problem) {
	switch {
	case !ps.hasLimit:
		return nil, badRequest(reasonInvalidLimit, "window needs limit: a stated limit is limit and window together")
	case !ps.hasWindow:
		return nil, badRequest(reasonInvalidLimit, "limit needs window: a stated limit is limit and window together")
	case ps.hasRule:
		return nil, badRequest(reasonInvalidLimit, "rule must be absent with limit and window: the request states its own limit")
	}
	n, err := strconv.ParseInt(ps.limit, 10, 64)
	switch {
	case errors.Is(err, strconv.ErrRange):
		return nil, badRequest(reasonInvalidLimit, "limit is out of range")
	case err != nil:
		return nil, badRequest(reasonInvalidLimit, "limit is not an integer")
	}
	d, err := time.ParseDuration(ps.window)
	if err != nil {
		return nil, badRequest(reasonInvalidLimit, "window must be a duration such as \"60s\" or \"500ms\", got "+quoteForMessage(ps.window))
	}
	return &limiter.LimitSpec{Limit: n, Window: d}, problem{}
}

// headerKey returns the key carried by the configured header, "" if none.
func (a *API) headerKey(r *http.Request) string {
	vs := r.Header[a.keyHeader]
	if len(vs) == 0 {
		return ""
	}
	v := vs[0]
	if a.xff {
		// "client, proxy1, proxy2": the first address is the client.
		if i := strings.IndexByte(v, ','); i >= 0 {
			v = v[:i]
		}
	}
	return strings.Trim(v, " \t")
}

// parseQuery parses key, rule, hits, limit and window from a raw query. It is strict: an
// unknown or repeated parameter is an error rather than silently ignored, as
// a typo ("hit=5") would otherwise count the wrong amount.
// It does not use url.ParseQuery, which allocates a map per request.
func parseQuery(q string) (params, problem) {
	var ps params
	for q != "" {
		var part string
		part, q, _ = strings.Cut(q, "&")
		if part == "" {
			continue
		}
		if strings.IndexByte(part, ';') >= 0 {
			// Go's url.ParseQuery rejects ';' too: some servers split on it
			// and some do not, which makes it a request-smuggling hazard.
			return ps, badRequest(reasonInvalidQuery, "invalid query: ';' is not a parameter separator; use '&'")
		}
		rawName, rawValue, _ := strings.Cut(part, "=")
		name, err1 := queryUnescape(rawName)
		value, err2 := queryUnescape(rawValue)
		if err1 != nil || err2 != nil {
			return ps, badRequest(reasonInvalidQuery, "invalid query: bad percent-encoding in "+quoteForMessage(part))
		}
		var dup bool
		switch name {
		case "key":
			dup, ps.key, ps.hasKey = ps.hasKey, value, true
		case "rule":
			dup, ps.rule, ps.hasRule = ps.hasRule, value, true
		case "hits":
			dup, ps.hits, ps.hasHits = ps.hasHits, value, true
		case "limit":
			dup, ps.limit, ps.hasLimit = ps.hasLimit, value, true
		case "window":
			dup, ps.window, ps.hasWindow = ps.hasWindow, value, true
		default:
			return ps, badRequest(reasonInvalidQuery,
				"unknown query parameter "+quoteForMessage(name)+"; the parameters are "+paramNames)
		}
		if dup {
			return ps, badRequest(reasonInvalidQuery, "query parameter "+name+" is given more than once")
		}
	}
	return ps, problem{}
}

// queryUnescape decodes a query component, without allocating when there is
// nothing to decode (the common case for keys such as IP addresses).
func queryUnescape(s string) (string, error) {
	if strings.IndexByte(s, '%') < 0 && strings.IndexByte(s, '+') < 0 {
		return s, nil
	}
	return url.QueryUnescape(s)
}

// readBody reads a POST body of at most MaxBodyBytes.
func (a *API) readBody(w http.ResponseWriter, r *http.Request) ([]byte, problem) {
	tooLarge := problem{http.StatusRequestEntityTooLarge, reasonBodyTooLarge,
		"request body is larger than " + strconv.FormatInt(a.cfg.MaxBodyBytes, 10) + " bytes"}
	if r.ContentLength > a.cfg.MaxBodyBytes {
		return nil, tooLarge
	}
	if r.Body == nil || r.ContentLength == 0 {
		return nil, problem{}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, tooLarge
	case err != nil:
		return nil, badRequest(reasonMalformedJSON, "reading the request body failed: "+err.Error())
	}
	return body, problem{}
}

// checkContentType accepts a missing Content-Type (curl -d sends
// application/x-www-form-urlencoded, but hand-written clients often send
// none) and any JSON media type; anything else is a 415, because a body in
// another format is not something the parser can read.
func checkContentType(ct string) problem {
	if ct == "" {
		return problem{}
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err == nil && (mt == "application/json" || strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		return problem{}
	}
	return problem{http.StatusUnsupportedMediaType, reasonUnsupportedMediaType,
		"Content-Type must be application/json, got " + quoteForMessage(ct)}
}

// paramNames lists the parameters of /check, for messages.
const paramNames = "key, rule, hits, limit and window"

// checkBody is the POST /check body. Pointers tell an absent field from an
// empty one; hits and limit stay raw so that 1.5, "5" and 1e3 get a
// precise message instead of a decoder error.
type checkBody struct {
	Key    *string         `json:"key"`
	Rule   *string         `json:"rule"`
	Hits   json.RawMessage `json:"hits"`
	Limit  json.RawMessage `json:"limit"`
	Window *string         `json:"window"`
}

// parseJSON parses a non-empty POST /check body.
func parseJSON(body []byte) (params, problem) {
	var ps params
	if !utf8.Valid(body) {
		// encoding/json would silently turn invalid bytes into U+FFFD and so
		// count a different key than the one sent.
		return ps, badRequest(reasonMalformedJSON, "malformed JSON: body is not valid UTF-8")
	}
	if p := strictJSON(body); p.status != 0 {
		return ps, p
	}
	var cb checkBody
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cb); err != nil {
		return ps, jsonProblem(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return ps, badRequest(reasonMalformedJSON, "malformed JSON: data after the object")
	}
	if cb.Key != nil {
		ps.key, ps.hasKey = *cb.Key, true
	}
	if cb.Rule != nil {
		ps.rule, ps.hasRule = *cb.Rule, true
	}
	if len(cb.Hits) > 0 && string(cb.Hits) != "null" {
		ps.hits, ps.hasHits = string(cb.Hits), true
	}
	if len(cb.Limit) > 0 && string(cb.Limit) != "null" {
		ps.limit, ps.hasLimit = string(cb.Limit), true
	}
	if cb.Window != nil {
		ps.window, ps.hasWindow = *cb.Window, true
	}
	return ps, problem{}
}

// jsonProblem turns a decoder error into a message about the request.
func jsonProblem(err error) problem {
	var typeErr *json.UnmarshalTypeError
	switch msg := err.Error(); {
	case errors.As(err, &typeErr) && typeErr.Field != "":
		return badRequest(reasonMalformedJSON, "malformed JSON: field "+quoteForMessage(typeErr.Field)+" must be a string")
	case errors.As(err, &typeErr):
		return badRequest(reasonMalformedJSON, "malformed JSON: the body must be an object")
	case strings.Contains(msg, "unknown field"):
		return badRequest(reasonUnknownField,
			strings.TrimPrefix(msg, "json: ")+"; the fields are "+paramNames)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(reasonMalformedJSON, "malformed JSON: unexpected end of the body")
	default:
		return badRequest(reasonMalformedJSON, "malformed JSON: "+strings.TrimPrefix(msg, "json: "))
	}
}
