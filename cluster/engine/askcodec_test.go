package engine

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// goldenAsk is the ask of the coordination goldens.
func goldenAsk() *counter.Ask {
	return &counter.Ask{
		Key:    "api:k",
		Hits:   2,
		Limits: []string{"api|1000|10", "api|60000|12"},
		Preds:  []counter.Pred{{Start: 1_800_000_000_100, After: 5}, {Start: 1_800_000_000_000, After: 9}},
		Entries: []counter.Entry{
			{Limit: "api|1000|10", Key: "api:k", Origin: "n1", Start: 1_800_000_000_100, Count: 3},
			{Limit: "api|60000|12", Key: "api:k", Origin: "n1", Start: 1_800_000_000_000, Count: 7},
		},
		Want: 40,
		Gen:  3,
	}
}

func goldenResults() []counter.Result {
	return []counter.Result{
		{Allowed: false, Limit: 10, Count: 9, Pending: 2, Remaining: 1, RetryAfter: 400 * time.Millisecond, Reset: time.Second, LeaseGen: 3},
		{Allowed: true, Limit: 600, Count: 120, Remaining: 480, Reset: 55 * time.Second, Lease: 27, LeaseGen: 3},
	}
}

// goldenAskV4 is goldenAsk with a stated max for its first limit (a
// family's, counter.Family): a version 4 ask.
func goldenAskV4() *counter.Ask {
	a := goldenAsk()
	a.Max = []int64{25, 0}
	return a
}

// goldenAskV5 is goldenAsk with a lead (counter.Ask.Lead) and no stated
// max: a version 5 ask, its Max column nil.
func goldenAskV5() *counter.Ask {
	a := goldenAsk()
	a.Lead = 180 * time.Millisecond
	return a
}

// TestCoordinationGoldens pins the bytes of the ask, answer and release
// messages, as TestWireGoldens does for the sync kinds: ask, answer and
// release at version 3 (an ask that states no max and has no lead is
// version 3, byte for byte as before version 4, and so is every release),
// ask_v4 and answer_v4 at coordVersionMax (an ask that states a max and
// has no lead is version 4, byte for byte as before version 5), ask_v5
// (a lead, no max) and answer_v5 at coordVersion.
func TestCoordinationGoldens(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	ask, err := encodeAsk(h, "n1", sent, 42, goldenAsk())
	if err != nil {
		t.Fatal(err)
	}
	ans, err := encodeAnswer(h, coordVersionLeases, "k", sent, 42, answerDecided, false, goldenResults())
	if err != nil {
		t.Fatal(err)
	}
	rel, err := encodeRelease(h, "n1", sent, 42, goldenAskV4())
	if err != nil {
		t.Fatal(err)
	}
	askV4, err := encodeAsk(h, "n1", sent, 42, goldenAskV4())
	if err != nil {
		t.Fatal(err)
	}
	ansV4, err := encodeAnswer(h, coordVersionMax, "k", sent, 42, answerDecided, false, goldenResults())
	if err != nil {
		t.Fatal(err)
	}
	askV5, err := encodeAsk(h, "n1", sent, 42, goldenAskV5())
	if err != nil {
		t.Fatal(err)
	}
	ansV5, err := encodeAnswer(h, coordVersion, "k", sent, 42, answerDecided, false, goldenResults())
	if err != nil {
		t.Fatal(err)
	}
	for name, got := range map[string][]byte{"ask": ask, "answer": ans, "release": rel, "ask_v4": askV4, "answer_v4": ansV4, "ask_v5": askV5, "answer_v5": ansV5} {
		t.Run(name, func(t *testing.T) { checkWireGolden(t, name, got) })
	}
}

// TestCoordinationRoundTrip: what is encoded decodes to the same ask (in
// each version an encoder sends: no max nor lead, a max, a lead, both),
// answer and release.
func TestCoordinationRoundTrip(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	want := goldenAsk()
	leadAndMax := goldenAskV4()
	leadAndMax.Lead = 7 * time.Millisecond
	for _, tc := range []struct {
		ask     *counter.Ask
		version uint8
	}{
		{want, coordVersionLeases},
		{goldenAskV4(), coordVersionMax},
		{goldenAskV5(), coordVersion},
		{leadAndMax, coordVersion},
	} {
		b, err := encodeAsk(h, "n1", sent, 42, tc.ask)
		if err != nil {
			t.Fatal(err)
		}
		var got counter.Ask
		from, sentMs, id, version, err := decodeAsk(h, b, DefaultDecodeLimits(), &got)
		if err != nil || from != "n1" || sentMs != sent.UnixMilli() || id != 42 || version != tc.version {
			t.Fatalf("decodeAsk: %q %d %d version %d (want %d) %v", from, sentMs, id, version, tc.version, err)
		}
		if len(got.Max) == 0 && tc.ask.Max == nil {
			got.Max = nil // decoded as empty
		}
		if !reflect.DeepEqual(&got, tc.ask) {
			t.Fatalf("ask\n got %+v\nwant %+v", got, *tc.ask)
		}
	}
	b, err := encodeAnswer(h, coordVersion, "k", sent, 42, answerDecided, false, goldenResults())
	if err != nil {
		t.Fatal(err)
	}
	a, err := decodeAnswer(h, b, DefaultDecodeLimits())
	if err != nil || a.From != "k" || a.ID != 42 || !a.Decided || a.Allowed || !reflect.DeepEqual(a.Results, goldenResults()) {
		t.Fatalf("answer %+v, %v", a, err)
	}
	b, err = encodeRelease(h, "n1", sent, 42, want)
	if err != nil {
		t.Fatal(err)
	}
	r, err := decodeRelease(h, b, DefaultDecodeLimits())
	if err != nil || r.From != "n1" || r.ID != 42 || r.Key != want.Key || !reflect.DeepEqual(r.Limits, want.Limits) {
		t.Fatalf("release %+v, %v", r, err)
	}
}

// TestCoordinationDecodeRejects: asks and answers beyond the bounds are
// dropped whole, as ErrMalformed.
func TestCoordinationDecodeRejects(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	bad := map[string]func(a *counter.Ask){
		"empty key":      func(a *counter.Ask) { a.Key = "" },
		"key too long":   func(a *counter.Ask) { a.Key = strings.Repeat("k", 1025) },
		"zero hits":      func(a *counter.Ask) { a.Hits = 0 },
		"no limits":      func(a *counter.Ask) { a.Limits, a.Preds = nil, nil },
		"too many":       func(a *counter.Ask) { a.Limits = make([]string, 9); a.Preds = make([]counter.Pred, 9) },
		"missing preds":  func(a *counter.Ask) { a.Preds = a.Preds[:1] },
		"limit too long": func(a *counter.Ask) { a.Limits[0] = strings.Repeat("l", 513) },
	}
	for name, mutate := range bad {
		a := goldenAsk()
		mutate(a)
		b, err := encodeAsk(h, "n1", sent, 1, a)
		if err != nil {
			t.Fatal(err)
		}
		var got counter.Ask
		if _, _, _, _, err := decodeAsk(h, b, DefaultDecodeLimits(), &got); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
	b, _ := encodeAnswer(h, coordVersion, "k", sent, 1, 7, true, goldenResults())
	if _, err := decodeAnswer(h, b, DefaultDecodeLimits()); !errors.Is(err, ErrMalformed) {
		t.Errorf("answer of status 7: %v, want ErrMalformed", err)
	}
	neg := goldenResults()
	neg[0].Remaining = -1
	b, _ = encodeAnswer(h, coordVersion, "k", sent, 1, answerDecided, true, neg)
	if _, err := decodeAnswer(h, b, DefaultDecodeLimits()); !errors.Is(err, ErrMalformed) {
		t.Errorf("answer with a negative figure: %v, want ErrMalformed", err)
	}
}

// FuzzDecodeCoordination feeds any bytes to the three decoders: none
// panics, and what decodes re-encodes to a message that decodes the same.
func FuzzDecodeCoordination(f *testing.F) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	ask, _ := encodeAsk(h, "n1", sent, 42, goldenAsk())
	ans, _ := encodeAnswer(h, coordVersion, "k", sent, 42, answerDecided, true, goldenResults())
	rel, _ := encodeRelease(h, "n1", sent, 42, goldenAsk())
	askV4, _ := encodeAsk(h, "n1", sent, 42, goldenAskV4())
	askV5, _ := encodeAsk(h, "n1", sent, 42, goldenAskV5())
	leadAndMax := goldenAskV4()
	leadAndMax.Lead = 7 * time.Millisecond
	askV5Max, _ := encodeAsk(h, "n1", sent, 42, leadAndMax)
	f.Add(ask)
	f.Add(ans)
	f.Add(rel)
	f.Add(askV4)
	f.Add(askV5)
	f.Add(askV5Max)
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 {
			return
		}
		lim := DefaultDecodeLimits()
		var a counter.Ask
		if from, sentMs, id, _, err := decodeAsk(h, b, lim, &a); err == nil {
			re, err := encodeAsk(h, from, time.UnixMilli(sentMs), id, &a)
			if err != nil {
				t.Fatal(err)
			}
			var back counter.Ask
			if _, _, _, _, err := decodeAsk(h, re, lim, &back); err != nil || !reflect.DeepEqual(back.Limits, a.Limits) || back.Key != a.Key || len(back.Entries) != len(a.Entries) || back.Lead != a.Lead {
				t.Fatalf("ask round trip: %+v vs %+v, %v", back, a, err)
			}
		}
		if an, err := decodeAnswer(h, b, lim); err == nil {
			status := answerDecided
			if !an.Decided {
				status = answerUnable
			}
			re, err := encodeAnswer(h, coordVersion, an.From, sent, an.ID, status, an.Allowed, an.Results)
			if err != nil {
				t.Fatal(err)
			}
			if back, err := decodeAnswer(h, re, lim); err != nil || !reflect.DeepEqual(back.Results, an.Results) {
				t.Fatalf("answer round trip: %+v vs %+v, %v", back, an, err)
			}
		}
		_, _ = decodeRelease(h, b, lim)
	})
}

// TestCoordinationVersion2: a node of version 2 (before leases) still
// gets its asks answered: its ask, as pinned before version 3, decodes
// with no lease wanted, the answer to it is a version 2 answer byte for
// byte (no leases), and a version 2 answer decodes with none.
func TestCoordinationVersion2(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	var a counter.Ask
	from, _, id, version, err := decodeAsk(h, readWireGolden(t, "ask_v2"), DefaultDecodeLimits(), &a)
	want := goldenAsk()
	if err != nil || version != coordVersionNoLeases || from != "n1" || id != 42 || a.Want != 0 || a.Key != want.Key || !reflect.DeepEqual(a.Limits, want.Limits) {
		t.Fatalf("version 2 ask: %+v from %q id %d version %d, %v", a, from, id, version, err)
	}
	ans, err := encodeAnswer(h, version, "k", sent, id, answerDecided, false, goldenResults())
	if err != nil {
		t.Fatal(err)
	}
	checkWireGolden(t, "answer_v2", ans)
	got, err := decodeAnswer(h, ans, DefaultDecodeLimits())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Results {
		if r.Lease != 0 || r.Count != goldenResults()[i].Count {
			t.Errorf("version 2 answer, limit %d: %+v", i, r)
		}
	}
	// And a version 3 answer carries the leases.
	ans, _ = encodeAnswer(h, coordVersionLeases, "k", sent, id, answerDecided, true, goldenResults())
	if got, err := decodeAnswer(h, ans, DefaultDecodeLimits()); err != nil || got.Results[1].Lease != 27 {
		t.Fatalf("version 3 answer: %+v %v", got, err)
	}
}

// readWireGolden reads back the bytes of a golden hex dump.
func readWireGolden(t *testing.T, name string) []byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("testdata", "wire", name+".hex"))
	if err != nil {
		t.Fatal(err)
	}
	var b []byte
	for _, line := range strings.Split(string(text), "\n") {
		if len(line) < 10 {
			continue
		}
		hexPart, _, _ := strings.Cut(line[10:], "|")
		for _, f := range strings.Fields(hexPart) {
			v, err := strconv.ParseUint(f, 16, 8)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			b = append(b, byte(v))
		}
	}
	return b
}
