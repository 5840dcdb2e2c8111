package decision

import (
	"testing"

	"github.com/limiterd/limiterd/limiter"
)

func TestOutcomeClassification(t *testing.T) {
	tests := []struct {
		name string
		d    limiter.Decision
		want Outcome
	}{
		{"allowed", allowed(), OutcomeAllowed},
		{"denied", denied(), OutcomeDenied},
		{"two limits, one denies", twoLimits(false, true), OutcomeDenied},
		{"shadow would deny", func() limiter.Decision {
			d := denied()
			d.Rule, d.Shadow, d.Allowed = "trial", true, true
			return d
		}(), OutcomeShadowDenied},
		{"shadow allows", func() limiter.Decision {
			d := allowed()
			d.Rule, d.Shadow = "trial", true
			return d
		}(), OutcomeAllowed},
		{"untracked", func() limiter.Decision {
			d := allowed()
			d.Untracked = true
			return d
		}(), OutcomeUntracked},
		{"untracked wins over shadow", func() limiter.Decision {
			d := allowed()
			d.Shadow, d.WouldAllow, d.Untracked = true, false, true
			return d
		}(), OutcomeUntracked},
		{"no rule", limiter.Decision{Allowed: true, WouldAllow: true}, OutcomeUnlimited},
		{"no rule wins over everything", limiter.Decision{Untracked: true, Shadow: true}, OutcomeUnlimited},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcomeOf(&tc.d); got != tc.want {
				t.Errorf("outcomeOf = %v, want %v", got, tc.want)
			}
			// Decide reports the same outcome and counts it under the rule.
			dec, reg := newTestDecider(t, answer(tc.d, nil), nil)
			var res Result
			if err := dec.Decide(t.Context(), limiter.Request{Key: "k", Hits: 1}, &res); err != nil {
				t.Fatal(err)
			}
			if res.Outcome != tc.want || res.Internal {
				t.Errorf("Decide: outcome %v internal %v, want %v and false", res.Outcome, res.Internal, tc.want)
			}
			if got := decisions(t, reg, tc.d.Rule, tc.want.String()); got != 1 {
				t.Errorf("limiterd_decisions_total{rule=%q,outcome=%q} = %v, want 1", tc.d.Rule, tc.want, got)
			}
		})
	}
}

func TestOutcomeNames(t *testing.T) {
	want := []string{"allowed", "denied", "shadow_denied", "untracked", "unlimited", "error"}
	if int(numOutcomes) != len(want) {
		t.Fatalf("%d outcomes, want %d", numOutcomes, len(want))
	}
	for o := range numOutcomes {
		if got := o.String(); got != want[o] {
			t.Errorf("Outcome(%d) = %q, want %q", o, got, want[o])
		}
	}
	if got := numOutcomes.String(); got != "unknown" {
		t.Errorf("an out-of-range Outcome is %q, want unknown", got)
	}
}
