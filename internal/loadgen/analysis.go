package loadgen

import (
	"github.com/limiterd/limiterd/internal/oracle"

	"cmp"
	"slices"
	"time"
)

// The accuracy analysis reads limitload's own log: for every answered
// request its key, its send instant (when it was written to the
// connection) and its status. It knows nothing of the server's internals,
// so what it reports is what a client observes:
//
//   - max_in_window: the most requests of one key answered 200 whose send
//     instants lie in one half-open interval [t, t+window). NFR1 says at
//     most 1.1 x limit.
//   - false rejection: a 429 sent at r while fewer than limit requests of
//     its key answered 200 were sent in (r-window, r]. NFR2 says none.
//
// Send instants are not arrival instants: a request reaches the server a
// loopback round trip later (tens of microseconds, more under load), and
// requests sent close together may arrive in another order. So counts near
// the ends of an interval can be off by the requests in flight; the report
// of a 9x client can show one request more or less than the server counted.

// KeyStats is the accuracy of one key.
type KeyStats struct {
	Key             string  `json:"key"`
	Requests        int     `json:"requests"`
	Accepted        int     `json:"accepted"`
	Rejected        int     `json:"rejected"`
	Other           int     `json:"other"`
	MaxInWindow     int     `json:"max_in_window"`
	MaxWindowAtMs   float64 `json:"max_window_at_ms"`
	Ratio           float64 `json:"ratio"`
	FalseRejections int     `json:"false_rejections"`
}

// Accuracy sums the analysis over all keys.
type Accuracy struct {
	Keys                    int        `json:"keys"`
	MaxInWindow             int        `json:"max_in_window"`
	MaxRatio                float64    `json:"max_ratio"`
	MaxKey                  string     `json:"max_key"`
	KeysOverLimit           int        `json:"keys_over_limit"`
	KeysOver1_1             int        `json:"keys_over_1_1"`
	FalseRejections         int        `json:"false_rejections"`
	KeysWithFalseRejections int        `json:"keys_with_false_rejections"`
	Worst                   []KeyStats `json:"worst"`
	MostFalseRejections     []KeyStats `json:"most_false_rejections"`
}

// nfr1 is NFR1's allowance: 1.1 x the limit in any window-long interval.
const nfr1 = 1.1

// event is the part of a record the analysis sorts.
type event struct {
	at     time.Duration
	key    int32
	status int16
}

// analyse computes the accuracy of recs (StatusNotSent records are
// skipped) against limit per window. name turns a key index into its name;
// worst bounds the two key lists.
func analyse(recs []record, window time.Duration, limit, worst int, name func(int32) string) Accuracy {
	evs := make([]event, 0, len(recs))
	for _, r := range recs {
		if r.status != StatusNotSent {
			evs = append(evs, event{at: r.sent, key: r.key, status: r.status})
		}
	}
	slices.SortFunc(evs, func(a, b event) int {
		return cmp.Or(cmp.Compare(a.key, b.key), cmp.Compare(a.at, b.at))
	})

	var (
		all      []KeyStats
		acc, rej []time.Duration
	)
	for i := 0; i < len(evs); {
		j := i
		acc, rej = acc[:0], rej[:0]
		ks := KeyStats{Key: name(evs[i].key)}
		for ; j < len(evs) && evs[j].key == evs[i].key; j++ {
			ks.Requests++
			switch evs[j].status {
			case 200:
				acc = append(acc, evs[j].at)
			case 429:
				rej = append(rej, evs[j].at)
			default:
				ks.Other++
			}
		}
		ks.Accepted, ks.Rejected = len(acc), len(rej)
		var at time.Duration
		var most int64
		most, at = oracle.MaxInWindow(acc, nil, window)
		ks.MaxInWindow = int(most)
		ks.MaxWindowAtMs = ms(at)
		ks.Ratio = float64(ks.MaxInWindow) / float64(limit)
		ks.FalseRejections = oracle.FalseRejections(acc, rej, window, int64(limit))
		all = append(all, ks)
		i = j
	}
	return summarise(all, limit, worst)
}

// summarise totals the keys and picks the worst of them.
func summarise(all []KeyStats, limit, worst int) Accuracy {
	a := Accuracy{Keys: len(all), Worst: []KeyStats{}, MostFalseRejections: []KeyStats{}}
	for _, k := range all {
		if k.MaxInWindow > a.MaxInWindow || (k.MaxInWindow == a.MaxInWindow && a.MaxKey == "") {
			a.MaxInWindow, a.MaxKey = k.MaxInWindow, k.Key
		}
		if k.MaxInWindow > limit {
			a.KeysOverLimit++
		}
		if k.Ratio > nfr1 {
			a.KeysOver1_1++
		}
		if k.FalseRejections > 0 {
			a.FalseRejections += k.FalseRejections
			a.KeysWithFalseRejections++
		}
	}
	a.MaxRatio = float64(a.MaxInWindow) / float64(limit)
	// Worst first: the highest ratio, then the most false rejections, then
	// the busiest key, then by name so that the order is stable.
	slices.SortFunc(all, func(x, y KeyStats) int {
		return cmp.Or(cmp.Compare(y.MaxInWindow, x.MaxInWindow), cmp.Compare(y.FalseRejections, x.FalseRejections),
			cmp.Compare(y.Requests, x.Requests), cmp.Compare(x.Key, y.Key))
	})
	a.Worst = append(a.Worst, all[:min(worst, len(all))]...)
	slices.SortStableFunc(all, func(x, y KeyStats) int { return cmp.Compare(y.FalseRejections, x.FalseRejections) })
	for _, k := range all[:min(worst, len(all))] {
		if k.FalseRejections > 0 {
			a.MostFalseRejections = append(a.MostFalseRejections, k)
		}
	}
	return a
}

// ms is d in milliseconds, to the microsecond.
func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
