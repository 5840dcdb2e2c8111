package counter

import "testing"

// FuzzAgainstOracle decodes an arbitrary byte string into a limit and an
// arrival pattern and checks NFR1, NFR2 and exact RetryAfter against the
// oracle. Run with: go test ./counter -fuzz FuzzAgainstOracle
func FuzzAgainstOracle(f *testing.F) {
	f.Add([]byte{10, 10, 4, 10, 0, 1, 0, 1, 200, 1, 0, 5, 3, 1})
	f.Add([]byte{60, 60, 12, 10, 49, 1, 0, 60, 0, 1, 1, 1, 255, 7})
	f.Add([]byte{1, 1, 1, 0, 0, 1, 0, 1, 1, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) < 4 {
			return
		}
		p := params{
			limit:    1 + int64(data[0]%100),
			windowMs: 10 * (1 + int64(data[1])),
			slices:   1 + int(data[2]%16),
			tol:      float64(data[3]%51) / 100,
		}
		if p.windowMs < int64(p.slices) {
			return
		}
		// Each pair of bytes is (gap in ms, hits).
		var arr []arrival
		var now int64
		for i := 4; i+1 < len(data); i += 2 {
			now += int64(data[i])
			arr = append(arr, arrival{now, 1 + int64(data[i+1])%min(p.limit, 4)})
		}
		runAgainstOracle(t, p, arr, true)
	})
}
