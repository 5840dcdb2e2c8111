package limiter_test

import (
	"fmt"
	"path/filepath"

	"github.com/limiterd/limiterd/limiter"
)

// Load reads limiterd's rule files and envoyproxy/ratelimit files side by
// side, as one rule set.
func ExampleLoad() {
	rs, err := limiter.Load(filepath.Join("..", "testdata", "rules.yaml"), filepath.Join("envoyrules", "testdata", "readme", "example1.yaml"))
	if err != nil {
		panic(err)
	}
	for _, r := range rs.Rules {
		fmt.Println(r.Name)
	}
	// Output:
	// default
	// premium
	// api
	// envoy:mongo_cps:mongo_cps.database_users
	// envoy:mongo_cps:mongo_cps.database_default
}
