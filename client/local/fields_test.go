package local

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter"
)

// TestFields checks the fields on what the daemon comparison
// (TestHeadersMatchDaemon) cannot produce from a valid rule file: names
// needing escapes, negative remaining, zero durations.
func TestFields(t *testing.T) {
	tests := []struct {
		name           string
		ls             []limiter.LimitResult
		policy, limits string
	}{
		{
			name:   "one limit",
			ls:     []limiter.LimitResult{{Policy: "default", Limit: 600, Window: time.Minute, Remaining: 599, Reset: 54*time.Second + time.Nanosecond}},
			policy: `"default";q=600;w=60`, limits: `"default";r=599;t=55`,
		},
		{
			name: "two limits, rounding up",
			ls: []limiter.LimitResult{
				{Policy: "api/500ms", Limit: 10, Window: 500 * time.Millisecond, Remaining: 0, Reset: 0},
				{Policy: "api/90s", Limit: 600, Window: 90 * time.Second, Remaining: -3, Reset: -time.Second},
			},
			policy: `"api/500ms";q=10;w=1, "api/90s";q=600;w=90`, limits: `"api/500ms";r=0;t=0, "api/90s";r=0;t=0`,
		},
		{
			name:   "escapes",
			ls:     []limiter.LimitResult{{Policy: "a\"b\\c\x01é", Limit: 1, Window: time.Second, Remaining: 1, Reset: time.Second}},
			policy: `"a\"b\\c???";q=1;w=1`, limits: `"a\"b\\c???";r=1;t=1`,
		},
	}
	for _, tt := range tests {
		p, l := fields(tt.ls)
		if p != tt.policy || l != tt.limits {
			t.Errorf("%s: got\n %s\n %s\nwant\n %s\n %s", tt.name, p, l, tt.policy, tt.limits)
		}
	}
}
