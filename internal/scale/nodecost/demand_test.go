package nodecost

import "testing"

// TestDemandClasses: each key falls in the class of its checks per
// limit's worth, a demand at an edge in the class above it; keys with no
// check are in none; a check waited when the asks grew across it.
func TestDemandClasses(t *testing.T) {
	const worth = 100 // checks per limit's worth of the run
	for _, tc := range []struct {
		name   string
		checks int // of the key, each asking when ask is set
		ask    bool
		class  int
	}{
		{"one check", 1, false, 0},
		{"just within", 89, true, 0},
		{"at 0.9", 90, false, 1},
		{"at the limit", 100, true, 1},
		{"at 1.1", 110, false, 2},
		{"below twice", 199, false, 2},
		{"twice", 200, true, 3},
		{"below ten times", 999, false, 3},
		{"ten times", 1000, true, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dt := newDemandTally(3, 7)
			asks := 7
			for range tc.checks {
				if tc.ask {
					asks++
				}
				dt.record(1, asks)
			}
			cs := dt.classes(worth)
			for i, d := range cs {
				want := DemandWait{Min: demandEdges()[i], Max: d.Max}
				if i == tc.class {
					want.Keys, want.Checks = 1, int64(tc.checks)
					if tc.ask {
						want.Waited = int64(tc.checks)
					}
				}
				if d != want {
					t.Errorf("class %s: %+v, want %+v", d.label(), d, want)
				}
			}
		})
	}
}

// TestDemandLabels: the table's column names.
func TestDemandLabels(t *testing.T) {
	var got []string
	for _, d := range newDemandTally(0, 0).classes(1) {
		got = append(got, d.label())
	}
	want := []string{"<0.9x", "0.9-1.1x", "1.1-2x", "2-10x", ">=10x"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("labels %q, want %q", got, want)
		}
	}
}
