package seedstudy_test

import (
	"fmt"
	"log"

	"github.com/limiterd/limiterd/internal/clustersim"
	"github.com/limiterd/limiterd/internal/seedstudy"
)

// The slice-end pattern against the seed's 12-slice window and against
// limiterd's counter: the most either lets into any 60 s.
func Example() {
	at := seedstudy.SliceEnd()
	for _, a := range seedstudy.Algorithms() {
		if a.Name != "12-slice sliding" && a.Name != "limiterd" {
			continue
		}
		m, err := a.Build()
		if err != nil {
			log.Fatal(err)
		}
		acc, err := seedstudy.RunModel(m, at)
		if err != nil {
			log.Fatal(err)
		}
		most := clustersim.MaxInWindow(acc, seedstudy.WindowMs)
		fmt.Printf("%s: %d of %d accepted, at most %d in 60 s (%.1fx)\n", a.Name, len(acc), len(at), most, seedstudy.Ratio(most, seedstudy.Limit))
	}
	// Output:
	// 12-slice sliding: 1800 of 1800 accepted, at most 1200 in 60 s (2.0x)
	// limiterd: 1200 of 1800 accepted, at most 600 in 60 s (1.0x)
}
