package counter

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// Validate reports every invalid field at once, each wrapping
// ErrInvalidConfig.
func TestValidateReportsEveryProblem(t *testing.T) {
	cc := DefaultClusterConfig("")
	cc.Nodes, cc.SyncInterval, cc.LeaseTime, cc.RoutedLeaseTime = 0, 0, -time.Second, 0
	for _, tc := range []struct {
		name string
		err  error
		want []string
	}{
		{"Config", Config{Shards: 3, MaxKeys: 0, Tolerance: 2}.Validate(), []string{"Shards", "MaxKeys", "Tolerance"}},
		{"ClusterConfig", cc.Validate(), []string{"cluster Self", "cluster Nodes", "cluster SyncInterval", "cluster LeaseTime", "cluster RoutedLeaseTime"}},
	} {
		var joined interface{ Unwrap() []error }
		if !errors.As(tc.err, &joined) || len(joined.Unwrap()) != len(tc.want) {
			t.Errorf("%s: %v, want %d problems", tc.name, tc.err, len(tc.want))
			continue
		}
		for i, e := range joined.Unwrap() {
			if !errors.Is(e, ErrInvalidConfig) || !strings.Contains(e.Error(), tc.want[i]) {
				t.Errorf("%s: problem %d: %v, want ErrInvalidConfig about %s", tc.name, i, e, tc.want[i])
			}
		}
	}
	if err := DefaultConfig().Validate(); err != nil {
		t.Errorf("DefaultConfig: %v", err)
	}
	if err := DefaultClusterConfig("a").Validate(); err != nil {
		t.Errorf("DefaultClusterConfig: %v", err)
	}
}
