package limiter

import (
	"errors"
	"strings"
	"testing"
)

// TestKeyLimits: the rule and limits of a key are Check's, and bad input
// is refused as Check refuses it.
func TestKeyLimits(t *testing.T) {
	l := newLimiter(t, `
rules:
  - name: api
    match: "api:*"
    limits:
      - {limit: 10, window: 1s}
      - {limit: 600, window: 60s}
  - name: default
    limit: 100
    window: 60s
`)
	for _, tc := range []struct {
		key, rule string
		want      string   // rule name
		policies  []string // of the limits
		err       error
	}{
		{key: "api:k", want: "api", policies: []string{"api/1s", "api/60s"}},
		{key: "client-1", want: "default", policies: []string{"default"}},
		{key: "api:k", rule: "default", want: "default", policies: []string{"default"}},
		{key: "client-1", rule: "nope", err: ErrUnknownRule},
		{key: "", err: ErrInvalidKey},
		{key: strings.Repeat("k", MaxKeyBytes+1), err: ErrInvalidKey},
		{key: "\xff", err: ErrInvalidKey},
	} {
		kl, err := l.KeyLimits(tc.key, tc.rule)
		if tc.err != nil {
			if !errors.Is(err, tc.err) {
				t.Errorf("KeyLimits(%.20q, %q): %v, want %v", tc.key, tc.rule, err, tc.err)
			}
			continue
		}
		if err != nil || kl.Rule != tc.want || len(kl.Specs) != len(tc.policies) || len(kl.Limits) != len(kl.Specs) {
			t.Fatalf("KeyLimits(%q, %q) = %+v, %v; want rule %s", tc.key, tc.rule, kl, err, tc.want)
		}
		for i, p := range tc.policies {
			if kl.Specs[i].Policy != p || kl.Limits[i].Max() != kl.Specs[i].Limit || kl.Limits[i].Window() != kl.Specs[i].Window {
				t.Errorf("KeyLimits(%q): limit %d is %+v / %s, want policy %s", tc.key, i, kl.Specs[i], kl.Limits[i].ID(), p)
			}
		}
	}

	none := newLimiter(t, "rules:\n  - {name: api, match: \"api:*\", limit: 1, window: 1s}\n")
	if kl, err := none.KeyLimits("client-1", ""); err != nil || kl.Rule != "" || len(kl.Limits) != 0 {
		t.Errorf("KeyLimits of a key no rule governs = %+v, %v; want no rule", kl, err)
	}
}
