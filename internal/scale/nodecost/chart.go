package nodecost

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"

	"github.com/limiterd/limiterd/internal/svgchart"
)

// ReadJSON reads rows that WriteJSON printed, one JSON object a line.
func ReadJSON(r io.Reader) ([]Row, error) {
	var rows []Row
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var row Row
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			return nil, fmt.Errorf("nodecost: line %d: %w", line, err)
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("nodecost: %w", err)
	}
	return rows, nil
}

// Chart draws what one node costs as the cluster grows, for one
// scenario's rows: sync bytes, engine time per check and heap per node,
// each over the smallest cluster's, against the 1.2 the issue allows, and
// the share of checks that waited on the network. nil when the scenario
// has fewer than two cluster sizes.
func Chart(rows []Row, scenario Scenario) []byte {
	var rs []Row
	for _, r := range rows {
		if r.Scenario == scenario {
			rs = append(rs, r)
		}
	}
	slices.SortFunc(rs, func(a, b Row) int { return a.Nodes - b.Nodes })
	if len(rs) < 2 {
		return nil
	}
	base := rs[0]
	ratio := func(f func(Row) float64) []svgchart.Point {
		ps := make([]svgchart.Point, len(rs))
		for i, r := range rs {
			ps[i] = svgchart.Point{X: float64(r.Nodes), Y: f(r) / f(base)}
		}
		return ps
	}
	wait := make([]svgchart.Point, len(rs))
	top := 1.5
	for i, r := range rs {
		wait[i] = svgchart.Point{X: float64(r.Nodes), Y: r.NetworkWaitShare}
	}
	series := []svgchart.Series{
		{Name: "sync bytes per node", Color: "#0072B2", Width: 2.5, Markers: true, Points: ratio(func(r Row) float64 { return r.SyncBytesPerNodeS })},
		{Name: "engine time per check", Color: "#D55E00", Width: 2.5, Markers: true, Points: ratio(func(r Row) float64 { return r.EngineNsPerCheck })},
		{Name: "heap per node", Color: "#009E73", Width: 2.5, Markers: true, Points: ratio(func(r Row) float64 { return r.HeapBytesPerNode })},
		{Name: "share of checks that waited on the network", Color: "#CC79A7", Width: 2, Dash: "6 4", Markers: true, Points: wait},
	}
	if !slices.ContainsFunc(rs, func(r Row) bool { return r.EngineNsPerCheckAlone <= 0 }) {
		// Measured at every size (Config.Alone): beside the simulation's.
		series = slices.Insert(series, 2, svgchart.Series{Name: "engine time per check, a node alone", Color: "#E69F00", Width: 2.5, Dash: "3 3", Markers: true,
			Points: ratio(func(r Row) float64 { return r.EngineNsPerCheckAlone })})
	}
	for _, s := range series {
		for _, p := range s.Points {
			top = max(top, p.Y)
		}
	}
	var ticks []svgchart.Tick
	for _, r := range rs {
		ticks = append(ticks, svgchart.Tick{V: float64(r.Nodes), Label: strconv.Itoa(r.Nodes)})
	}
	c := svgchart.Chart{
		Title: "A node's cost as the cluster grows (" + string(scenario) + ")",
		Subtitle: fmt.Sprintf("limitsim scale: %d checks/s on each node, Zipf(%g) keys; each cost over the %d-node figure; the issue allows 1.2",
			int64(math.Round(float64(base.Checks)/base.Seconds/float64(base.Nodes))), base.Zipf, base.Nodes),
		X:      svgchart.Axis{Label: "nodes (log scale)", Min: float64(rs[0].Nodes), Max: float64(rs[len(rs)-1].Nodes), Log: true, Ticks: ticks},
		Y:      svgchart.Axis{Label: "over the smallest cluster's figure (share for the dashed line)", Min: 0, Max: math.Ceil(top*2) / 2},
		Series: series,
		HLines: []svgchart.HLine{{Y: 1.2, Label: "1.2: the goal", Color: "#444444", Dash: "2 3"}},
	}
	return c.SVG()
}
