package envoyrules_test

import (
	"fmt"

	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// Parse an envoyproxy/ratelimit file (README Example 2) and find the limit
// that governs each descriptor of a request.
func ExampleParse() {
	cfg, err := envoyrules.Parse("messaging.yaml", []byte(`
domain: messaging
descriptors:
  # Only allow 5 marketing messages a day
  - key: message_type
    value: marketing
    descriptors:
      - key: to_number
        rate_limit:
          unit: day
          requests_per_unit: 5

  # Only allow 100 messages a day to any unique phone number
  - key: to_number
    rate_limit:
      unit: day
      requests_per_unit: 100
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	request := [][]envoyrules.Entry{
		{{Key: "message_type", Value: "marketing"}, {Key: "to_number", Value: "2061111111"}},
		{{Key: "to_number", Value: "2061111111"}},
		{{Key: "message_type", Value: "marketing"}},
	}
	for _, entries := range request {
		d := cfg.Match(entries)
		if d == nil {
			fmt.Println("no limit")
			continue
		}
		fmt.Printf("%s: %d per %v, rule %s, key %s\n", d.Path, d.Limit.RequestsPerUnit, d.Limit.Window,
			d.RuleName(), envoyrules.CountKey(cfg.Domain, entries))
	}

	_, err = envoyrules.Parse("bad.yaml", []byte("domain: messaging\ndescriptors:\n  - key: to_number\n    rate_limit:\n      unit: fortnight\n      requests_per_unit: 5\n"))
	fmt.Println(err)
	// Output:
	// messaging.message_type_marketing.to_number: 5 per 24h0m0s, rule messaging.message_type_marketing.to_number, key messaging|message_type=marketing|to_number=2061111111
	// messaging.to_number: 100 per 24h0m0s, rule messaging.to_number, key messaging|to_number=2061111111
	// no limit
	// envoyrules: invalid config: bad.yaml:5: descriptor "messaging.to_number": field "rate_limit.unit": invalid rate limit unit "fortnight": must be one of second, minute, hour, day, week or month
}
