package engine

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/limiterd/limiterd/counter"
)

// TestSizesMatchAppends: the sizes the encoder plans with are the lengths
// the writers append, at every width's edges.
func TestSizesMatchAppends(t *testing.T) {
	ints := []int64{0, 1, -1, -32, -33, 127, 128, -128, -129, math.MaxInt16, math.MaxInt16 + 1,
		math.MinInt16, math.MinInt16 - 1, math.MaxInt32, math.MaxInt32 + 1, math.MinInt32, math.MinInt32 - 1,
		math.MaxInt64, math.MinInt64, 1_800_000_000_000}
	for _, i := range ints {
		if got, want := intSize(i), len(appendInt(nil, i)); got != want {
			t.Errorf("intSize(%d) = %d, appendInt writes %d", i, got, want)
		}
	}
	for _, u := range []uint64{0, 127, 128, 255, 256, math.MaxUint16, math.MaxUint16 + 1, math.MaxUint32, math.MaxUint32 + 1, math.MaxUint64} {
		if got, want := uintSize(u), len(appendUint(nil, u)); got != want {
			t.Errorf("uintSize(%d) = %d, appendUint writes %d", u, got, want)
		}
	}
	for _, n := range []int{0, 15, 16, 31, 32, 1<<16 - 1, 1 << 16} {
		if got, want := arrayLenSize(n), len(appendArrayLen(nil, n)); got != want {
			t.Errorf("arrayLenSize(%d) = %d, appendArrayLen writes %d", n, got, want)
		}
		if got, want := stringSize(n), len(appendString(nil, strings.Repeat("k", n))); got != want {
			t.Errorf("stringSize(%d) = %d, appendString writes %d", n, got, want)
		}
	}
}

// TestEncodeFillsMessages: every message is at most maxBytes (but one of a
// single entry too large for any), carries its entries, and is full: with
// the next message's first entry added it would be longer than maxBytes.
func TestEncodeFillsMessages(t *testing.T) {
	type gen func(rng *rand.Rand, i int) counter.Entry
	shortKeys := func(rng *rand.Rand, i int) counter.Entry {
		return counter.Entry{Limit: "default|60000|12", Origin: "n2", Key: fmt.Sprint("client-", 100000+rng.IntN(200_000)),
			Start: 1_800_000_000_000 + int64(rng.IntN(60_000)), Count: uint32(1 + rng.IntN(3))}
	}
	mixed := func(rng *rand.Rand, i int) counter.Entry {
		return counter.Entry{Limit: fmt.Sprint("limit-", i/50), Origin: fmt.Sprint("node-", i/7%3),
			Key: strings.Repeat("k", 1+rng.IntN(300)), Start: rng.Int64N(1 << 40), Count: uint32(rng.Int64N(1 << 33))}
	}
	cases := []struct {
		name     string
		n        int
		maxBytes int
		gen      gen
	}{
		{"a tick of short keys", 1000, DefaultDatagramBytes, shortKeys},
		{"groups and widths", 2000, DefaultDatagramBytes, mixed},
		{"small datagrams", 500, 200, mixed},
		{"columns past 15 and past 65535", 70_000, 1 << 21, shortKeys},
	}
	for _, version := range []uint8{wireVersionPlain, wireVersion} {
		for _, tc := range cases {
			t.Run(fmt.Sprintf("v%d/%s", version, tc.name), func(t *testing.T) { checkEncodeFills(t, version, tc.n, tc.maxBytes, tc.gen) })
		}
	}
}

// checkEncodeFills encodes n entries of gen at version into messages of
// at most maxBytes and checks them as TestEncodeFillsMessages says.
func checkEncodeFills(t *testing.T, version uint8, n, maxBytes int, gen func(rng *rand.Rand, i int) counter.Entry) {
	rng := rand.New(rand.NewPCG(5, uint64(n)))
	es := make([]counter.Entry, n)
	for i := range es {
		es[i] = gen(rng, i)
	}
	w := newWire(nil)
	msgs, err := w.encodeEntries(kindDelta, version, "n2", 1_800_000_000_123, es, maxBytes)
	if err != nil {
		t.Fatal(err)
	}
	lim := DefaultDecodeLimits()
	lim.MaxMessageBytes, lim.MaxEntries = 1<<22, 1<<20
	var got [][]counter.Entry
	total := 0
	for _, b := range msgs {
		_, m, err := newWire(nil).decode(b, lim)
		if err != nil {
			t.Fatal(err)
		}
		if m.Version != version {
			t.Fatalf("a message of version %d, want %d", m.Version, version)
		}
		ents := m.entries(nil)
		if len(b) > maxBytes && len(ents) > 1 {
			t.Errorf("a message of %d entries is %d bytes, more than %d", len(ents), len(b), maxBytes)
		}
		got = append(got, ents)
		total += len(ents)
	}
	if total != len(es) {
		t.Fatalf("%d entries in %d messages, want %d", total, len(msgs), len(es))
	}
	for i := 0; i+1 < len(got); i++ {
		more := append(append([]counter.Entry(nil), got[i]...), got[i+1][0])
		one, err := newWire(nil).encodeEntries(kindDelta, version, "n2", 1_800_000_000_123, more, 1<<30)
		if err != nil || len(one) != 1 {
			t.Fatalf("%d messages, %v", len(one), err)
		}
		if len(one[0]) <= maxBytes {
			t.Fatalf("message %d of %d is %d bytes: the next entry would have fit (%d bytes with it, at most %d)",
				i, len(msgs), len(msgs[i]), len(one[0]), maxBytes)
		}
	}
}

// TestSharedPrefix: the word-at-a-time sharedPrefix agrees with a byte
// loop, at every length around the word size and past the cap.
func TestSharedPrefix(t *testing.T) {
	naive := func(a, b string) int {
		i := 0
		for i < min(len(a), len(b), maxSharedPrefix) && a[i] == b[i] {
			i++
		}
		return i
	}
	rng := rand.New(rand.NewPCG(9, 10))
	long := strings.Repeat("client-", 50)
	for range 20_000 {
		n := rng.IntN(len(long) + 1)
		a := long[:n] + strings.Repeat("x", rng.IntN(20))
		b := long[:rng.IntN(n+1)] + strings.Repeat("y", rng.IntN(20))
		if rng.IntN(4) == 0 {
			b = a[:rng.IntN(len(a)+1)]
		}
		if got, want := sharedPrefix(a, b), naive(a, b); got != want {
			t.Fatalf("sharedPrefix(%q, %q) = %d, want %d", a, b, got, want)
		}
	}
}
