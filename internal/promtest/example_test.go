package promtest_test

import (
	"fmt"
	"strings"

	"github.com/limiterd/limiterd/internal/promtest"
)

// Reading a /metrics body: a series by its labels, a sum over a label
// value's prefix, and a family's type.
func ExampleParse() {
	m, err := promtest.Parse(strings.NewReader(`# TYPE limiterd_coordinated_checks_total counter
limiterd_coordinated_checks_total{result="granted"} 12
limiterd_coordinated_checks_total{result="fallback_timeout"} 3
limiterd_coordinated_checks_total{result="fallback_unavailable"} 1
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	granted, ok := m.Value("limiterd_coordinated_checks_total", "result", "granted")
	fmt.Println(granted, ok)
	fmt.Println(m.Sum("limiterd_coordinated_checks_total", "result", "fallback*"))
	fmt.Println(m.Types()["limiterd_coordinated_checks_total"])
	// Output:
	// 12 true
	// 4
	// counter
}
