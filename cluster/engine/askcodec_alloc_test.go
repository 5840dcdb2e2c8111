package engine

import (
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestCoordinationAllocs: in steady state, with a wire reused as the
// engine's pool reuses them, encoding allocates the message it returns
// and nothing else, decoding an ask or a release nothing (the strings
// alias the message, the columns are reused, the sender's name is copied
// once), and decoding an answer its Results, which the caller keeps.
func TestCoordinationAllocs(t *testing.T) {
	w := newWire(nil)
	lim := DefaultDecodeLimits()
	sent := time.UnixMilli(1_800_000_000_123)
	res, ask, askV4, askV5 := goldenResults(), goldenAsk(), goldenAskV4(), goldenAskV5()
	askV5.Max = askV4.Max // a lead and a max: every column of version 5
	askMsg, _ := w.encodeAsk("n1", sent, 42, ask)
	askV4Msg, _ := w.encodeAsk("n1", sent, 42, askV4)
	askV5Msg, _ := w.encodeAsk("n1", sent, 42, askV5)
	answerMsg := w.encodeAnswer(coordVersion, "k", sent, 42, answerDecided, true, res)
	releaseMsg := w.encodeRelease("n1", sent, 42, ask.Key, ask.Limits)
	for _, tc := range []struct {
		name string
		want float64
		run  func(t *testing.T)
	}{
		{"encode an ask", 1, func(t *testing.T) {
			if _, err := w.encodeAsk("n1", sent, 42, ask); err != nil {
				t.Fatal(err)
			}
		}},
		{"encode a version 4 ask", 1, func(t *testing.T) {
			if _, err := w.encodeAsk("n1", sent, 42, askV4); err != nil {
				t.Fatal(err)
			}
		}},
		{"encode a version 5 ask", 1, func(t *testing.T) {
			if _, err := w.encodeAsk("n1", sent, 42, askV5); err != nil {
				t.Fatal(err)
			}
		}},
		{"decode an ask", 0, func(t *testing.T) {
			if _, _, _, _, err := w.decodeAsk(askMsg, lim, &w.coord.ask); err != nil {
				t.Fatal(err)
			}
			w.release()
		}},
		{"decode a version 4 ask", 0, func(t *testing.T) {
			if _, _, _, _, err := w.decodeAsk(askV4Msg, lim, &w.coord.ask); err != nil {
				t.Fatal(err)
			}
			w.release()
		}},
		{"decode a version 5 ask", 0, func(t *testing.T) {
			if _, _, _, _, err := w.decodeAsk(askV5Msg, lim, &w.coord.ask); err != nil || w.coord.ask.Lead != askV5.Lead {
				t.Fatalf("lead %v, %v", w.coord.ask.Lead, err)
			}
			w.release()
		}},
		{"encode an answer", 1, func(*testing.T) { w.encodeAnswer(coordVersion, "k", sent, 42, answerDecided, true, res) }},
		{"encode a version 4 answer", 1, func(*testing.T) { w.encodeAnswer(coordVersionMax, "k", sent, 42, answerDecided, true, res) }},
		{"encode a version 2 answer", 1, func(*testing.T) { w.encodeAnswer(coordVersionNoLeases, "k", sent, 42, answerDecided, true, res) }},
		{"decode an answer", 1, func(t *testing.T) {
			if _, err := w.decodeAnswer(answerMsg, lim); err != nil {
				t.Fatal(err)
			}
		}},
		{"encode a release", 1, func(*testing.T) { w.encodeRelease("n1", sent, 42, "api:k", ask.Limits) }},
		{"decode a release", 0, func(t *testing.T) {
			if _, err := w.decodeRelease(releaseMsg, lim); err != nil {
				t.Fatal(err)
			}
			w.release()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if a := testing.AllocsPerRun(50, func() { tc.run(t) }); a != tc.want {
				t.Errorf("%v allocations, want %v", a, tc.want)
			}
		})
	}
}

// BenchmarkCoordinationCodec measures an ask's round trip through the
// codec alone, no counter: the asker encodes the golden ask (two limits,
// two entries), the coordinator decodes it and encodes its answer, the
// asker decodes that. "reflect" is the same through go-msgpack's
// reflective codec, as the engine did before askcodec_decode.go.
//
//	go test ./cluster/engine -run '^$' -bench CoordinationCodec -benchmem
func BenchmarkCoordinationCodec(b *testing.B) {
	lim := DefaultDecodeLimits()
	sent := time.UnixMilli(1_800_000_000_123)
	ask, res := goldenAsk(), goldenResults()
	b.Run("hand", func(b *testing.B) {
		asker, coord := newWire(nil), newWire(nil)
		b.ReportAllocs()
		for b.Loop() {
			q, err := asker.encodeAsk("n1", sent, 42, ask)
			if err != nil {
				b.Fatal(err)
			}
			from, _, id, version, err := coord.decodeAsk(q, lim, &coord.coord.ask)
			if err != nil {
				b.Fatal(err)
			}
			a := coord.encodeAnswer(version, from, sent, id, answerDecided, true, res)
			coord.release()
			if _, err := asker.decodeAnswer(a, lim); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("reflect", func(b *testing.B) {
		h := newHandle(1024)
		b.ReportAllocs()
		for b.Loop() {
			q, err := oracleEncodeAsk(h, "n1", sent, 42, ask)
			if err != nil {
				b.Fatal(err)
			}
			var got counter.Ask
			from, _, id, version, err := oracleDecodeAsk(h, q, lim, &got)
			if err != nil {
				b.Fatal(err)
			}
			a, err := oracleEncodeAnswer(h, version, from, sent, id, answerDecided, true, res)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := oracleDecodeAnswer(h, a, lim); err != nil {
				b.Fatal(err)
			}
		}
	})
}
