package seedplot_test

import (
	"fmt"
	"log"

	"github.com/limiterd/limiterd/internal/seedplot"
)

// The charts of a small plan: the names of the files they go to.
func ExampleBuild() {
	p := seedplot.DefaultPlan()
	p.SyncIntervals, p.SyncRate = []float64{1}, 10
	p.ClientRates, p.ClientDurationMs = []float64{10}, 1000
	files, err := seedplot.Build(p)
	if err != nil {
		log.Fatal(err)
	}
	for _, f := range files {
		fmt.Println(f.Name)
	}
	// Output:
	// window-steady-2x.svg
	// window-edge-burst.svg
	// window-intermittent.svg
	// window-slice-end.svg
	// cluster-sync-interval.svg
	// cluster-client-rate.svg
}
