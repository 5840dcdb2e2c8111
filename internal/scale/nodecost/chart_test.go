package nodecost

import (
	"bytes"
	"strings"
	"testing"
)

// TestChartFromJSON: rows printed by WriteJSON read back the same, and
// the chart of a scenario draws each cost over the smallest cluster's:
// the 8-node figure is 1, and a cost twice as high at 64 nodes is 2.
func TestChartFromJSON(t *testing.T) {
	rows := []Row{
		{Scenario: Healthy, Nodes: 8, Seconds: 1, Checks: 40_000, Zipf: 1.2, SyncBytesPerNodeS: 1000, EngineNsPerCheck: 3000, HeapBytesPerNode: 5e6, NetworkWaitShare: 0.01},
		{Scenario: Healthy, Nodes: 64, Seconds: 1, Checks: 320_000, Zipf: 1.2, SyncBytesPerNodeS: 500, EngineNsPerCheck: 6000, HeapBytesPerNode: 4e6, NetworkWaitShare: 0.3},
		{Scenario: Fallback, Nodes: 8, Seconds: 1, Checks: 40_000, Zipf: 1.2},
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, rows); err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(&b)
	if err != nil {
		t.Fatal(err)
	}
	if len(back) != len(rows) || back[1] != rows[1] {
		t.Fatalf("read back %+v, want %+v", back, rows)
	}
	svg := string(Chart(back, Healthy))
	for _, want := range []string{"sync bytes per node", "engine time per check", "heap per node", "1.2: the goal", "5000 checks/s on each node"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart has no %q", want)
		}
	}
	// Each point's tooltip says its value: the engine's 1 at 8 nodes and
	// 2 at 64, the bytes' 0.5 at 64.
	for _, want := range []string{"engine time per check: 8, 1<", "engine time per check: 64, 2<", "sync bytes per node: 64, 0.5<"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the chart has no point %q", want)
		}
	}
	if strings.Contains(svg, "a node alone") {
		t.Error("the chart draws a node alone, which no row measured")
	}
	// Measured at every size, a node alone is drawn beside them.
	back[0].EngineNsPerCheckAlone, back[1].EngineNsPerCheckAlone = 2000, 2400
	if svg := string(Chart(back, Healthy)); !strings.Contains(svg, "engine time per check, a node alone: 64, 1.2<") {
		t.Error("the chart has no point for a node alone at 64 nodes, 1.2")
	}
	if Chart(back, Fallback) != nil {
		t.Error("a chart of one cluster size, want none")
	}
	if _, err := ReadJSON(strings.NewReader("{\"nodes\": 8}\nnot json\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("a bad line: %v, want an error naming line 2", err)
	}
}
