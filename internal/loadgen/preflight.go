package loadgen

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// ErrPreflight marks a target that is not ready for the run.
var ErrPreflight = errors.New("loadgen: preflight")

// policy is one member of a RateLimit-Policy field: a name, the quota q
// and the window w in seconds.
type policy struct {
	name string
	q, w int64
}

// parsePolicy reads a RateLimit-Policy field value as limiterd writes it
// (draft-ietf-httpapi-ratelimit-headers, an RFC 9651 list): members
// separated by commas, each an sf-string or token followed by ;key=value
// parameters. Parameters other than q and w are ignored; q and w must be
// non-negative integers.
func parsePolicy(s string) ([]policy, error) {
	var out []policy
	for len(s) > 0 && len(out) < 64 {
		s = strings.TrimLeft(s, " \t")
		var p policy
		var err error
		if p.name, s, err = parseItemName(s); err != nil {
			return nil, err
		}
		for len(s) > 0 && s[0] == ';' {
			var key, val string
			key, s, _ = cutAny(s[1:], "=;,")
			key = strings.TrimSpace(key)
			if len(s) > 0 && s[0] == '=' {
				val, s, _ = cutAny(s[1:], ";,")
				val = strings.TrimSpace(val)
			}
			switch key {
			case "q", "w":
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("parameter %s=%q: not a non-negative integer", key, val)
				}
				if key == "q" {
					p.q = n
				} else {
					p.w = n
				}
			}
		}
		s = strings.TrimLeft(s, " \t")
		if len(s) > 0 {
			if s[0] != ',' {
				return nil, fmt.Errorf("unexpected %q after member %q", s[:1], p.name)
			}
			s = s[1:]
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, errors.New("empty")
	}
	return out, nil
}

// parseItemName reads an sf-string ("...", with \" and \\ escapes) or a
// bare token up to ';' or ','.
func parseItemName(s string) (name, rest string, err error) {
	if !strings.HasPrefix(s, `"`) {
		name, rest, _ = cutAny(s, ";,")
		name = strings.TrimSpace(name)
		if name == "" {
			return "", "", errors.New("member without a name")
		}
		return name, rest, nil
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			if i+1 == len(s) {
				return "", "", errors.New("unterminated string")
			}
			i++
			b.WriteByte(s[i])
		case '"':
			return b.String(), s[i+1:], nil
		default:
			b.WriteByte(c)
		}
	}
	return "", "", errors.New("unterminated string")
}

// cutAny cuts s before the first byte in seps; rest starts with it.
func cutAny(s, seps string) (before, rest string, found bool) {
	if i := strings.IndexAny(s, seps); i >= 0 {
		return s[:i], s[i:], true
	}
	return s, "", false
}

// Preflight asks every target once for the probe key of run runID (the
// run's first key with "-preflight" appended), as preflight does.
func Preflight(cfg *Config, runID string) error {
	return preflight(cfg, newKeyNamer(cfg, runID).name(0)+"-preflight")
}

// preflight asks every target once for key and checks that it answers
// /check with 200 or 429 and that the policy of the rule deciding key has
// cfg.Limit per cfg.Window: the analysis would be meaningless against
// another rule. The probe counts one request against key, which is
// therefore not one of the run's.
func preflight(cfg *Config, key string) error {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{Proxy: nil, DialContext: cfg.Dial}}
	defer client.CloseIdleConnections()
	path := checkPathPrefix(cfg.Rule) + url.QueryEscape(key)
	wantW := int64(math.Ceil(cfg.Window.Seconds()))
	for _, addr := range cfg.Targets {
		resp, err := client.Get("http://" + addr + path)
		if err != nil {
			return fmt.Errorf("%w: %s does not answer: %w", ErrPreflight, addr, err)
		}
		io.Copy(io.Discard, io.LimitReader(resp.Body, maxBodyBytes))
		resp.Body.Close()
		if resp.StatusCode != 200 && resp.StatusCode != 429 {
			return fmt.Errorf("%w: %s answered GET %s with %s, want 200 or 429 (is it limiterd?)", ErrPreflight, addr, path, resp.Status)
		}
		field := resp.Header.Get("RateLimit-Policy")
		if field == "" {
			return fmt.Errorf("%w: %s: no RateLimit-Policy in the answer to %s: no rule limits the key (or its rule is in shadow mode), so nothing would be rejected", ErrPreflight, addr, path)
		}
		pols, err := parsePolicy(field)
		if err != nil {
			return fmt.Errorf("%w: %s: RateLimit-Policy %q: %w", ErrPreflight, addr, field, err)
		}
		match := false
		for _, p := range pols {
			match = match || (p.q == int64(cfg.Limit) && p.w == wantW)
		}
		if !match {
			return fmt.Errorf("%w: %s decides the key by RateLimit-Policy %s, but --limit %d --window %v (q=%d;w=%d) was given: pass the server's rule",
				ErrPreflight, addr, field, cfg.Limit, cfg.Window, cfg.Limit, wantW)
		}
	}
	return nil
}
