package burst

import (
	"fmt"

	"github.com/limiterd/limiterd/internal/clustersim"
)

// Setting is one setting of the cluster: the budget alone (off, or on with
// a floor, and with limiterd's delivery grace unless NoGrace), or
// coordinated, limiterd's default.
type Setting struct {
	Name    string
	Budget  bool
	Floor   float64
	NoGrace bool // DeliveryGrace 0: what the grace costs, at no latency
	// Coordinated: the key's coordinator decides past a node's blind
	// share, the budget (Floor) only when no answer comes in time.
	Coordinated bool
}

// NoBudget is the cluster without the budget and without the coordinator.
func NoBudget() Setting { return Setting{Name: "no budget"} }

// Floor1 is the budget alone at the default floor, 1.
func Floor1() Setting { return Setting{Name: "floor 1", Budget: true, Floor: 1} }

// Coordinated is limiterd's default: coordinated at the margin, with the
// default budget (floor 1) as the fallback.
func Coordinated() Setting {
	return Setting{Name: "coordinated", Budget: true, Floor: 1, Coordinated: true}
}

// AtFloor is the budget alone at floor f.
func AtFloor(f float64) Setting {
	return Setting{Name: fmt.Sprintf("floor %g", f), Budget: true, Floor: f}
}

// VariedSettings are the rows of each varied dimension, in order.
func VariedSettings() []Setting {
	return []Setting{NoBudget(), Floor1(), Coordinated()}
}

// Sim returns the base cluster (clustersim.DefaultConfig) with this
// setting.
func (bs Setting) Sim() clustersim.Config {
	sc := clustersim.DefaultConfig()
	sc.Budget, sc.Floor, sc.Uncoordinated = bs.Budget, bs.Floor, !bs.Coordinated
	if bs.NoGrace {
		sc.Grace = 0
	}
	return sc
}
