package engine

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// v3Decodes is the version check of a version 3 node's coordination
// decoders, as it was released: versions 2 and 3, nothing else.
func v3Decodes(v uint8) bool { return v == 2 || v == 3 }

// TestCoordinationVersion4 is the mixed-version rule of doc.go ("Wire
// format and versions"): an ask that states no max (and has no lead) is
// version 3, so a version 3 coordinator decides it, and is answered in
// version 3; an ask that states one is version 4 (coordVersionMax), which
// a version 3 node drops as of an unknown version; a release is version 3
// whatever the ask. A version 4 ask round-trips with its maxes, and is
// answered in version 4.
func TestCoordinationVersion4(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	lim := DefaultDecodeLimits()
	for _, tc := range []struct {
		name    string
		ask     *counter.Ask
		version uint8
	}{
		{"no max", goldenAsk(), coordVersionLeases},
		{"zero maxes", func() *counter.Ask { a := goldenAsk(); a.Max = []int64{0, 0}; return a }(), coordVersionLeases},
		{"a max", goldenAskV4(), coordVersionMax},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeAsk(h, "n1", sent, 42, tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			var got counter.Ask
			_, _, _, version, err := decodeAsk(h, b, lim, &got)
			if err != nil || version != tc.version {
				t.Fatalf("decodes as version %d, %v; want version %d", version, err, tc.version)
			}
			if v3 := v3Decodes(version); v3 != (tc.version == coordVersionLeases) {
				t.Fatalf("a version 3 node decodes it: %t", v3)
			}
			want := tc.ask.Max
			if tc.version == coordVersionLeases {
				want = nil // sent as version 3: no maxes on the wire
				if !reflect.DeepEqual(b, readWireGolden(t, "ask")) {
					t.Fatal("an ask that states no max is not the version 3 golden byte for byte")
				}
			}
			if !reflect.DeepEqual(got.Max, want) || got.Key != tc.ask.Key || !reflect.DeepEqual(got.Limits, tc.ask.Limits) {
				t.Fatalf("decoded %+v, want maxes %v", got, want)
			}
			ans, err := encodeAnswer(h, version, "k", sent, 42, answerDecided, true, goldenResults())
			if err != nil {
				t.Fatal(err)
			}
			if a, err := decodeAnswer(h, ans, lim); err != nil || !reflect.DeepEqual(a.Results, goldenResults()) {
				t.Fatalf("answer in version %d: %+v %v", version, a, err)
			}
			var m answerV2
			if err := decodeBody(h, ans, &m); err != nil || m.Version != version {
				t.Fatalf("answer of version %d, want the ask's %d (%v)", m.Version, version, err)
			}
			rel, err := encodeRelease(h, "n1", sent, 42, tc.ask)
			if err != nil {
				t.Fatal(err)
			}
			var r releaseMsg
			if err := decodeBody(h, rel, &r); err != nil || !v3Decodes(r.Version) {
				t.Fatalf("release of version %d: a version 3 node would drop it (%v)", r.Version, err)
			}
		})
	}
	// Malformed version 4 asks (16 fields, as askV4): maxes not parallel
	// to the limits, out of range, or in an older version. Unedited, the
	// ask decodes.
	for name, edit := range map[string]func(m *askMsg){
		"unedited":   func(*askMsg) {},
		"short":      func(m *askMsg) { m.Max = m.Max[:1] },
		"negative":   func(m *askMsg) { m.Max[0] = -1 },
		"too large":  func(m *askMsg) { m.Max[0] = counter.MaxLimit + 1 },
		"version 3":  func(m *askMsg) { m.Version = coordVersionLeases },
		"no columns": func(m *askMsg) { m.Max = nil },
	} {
		m := askMsgOf(t, h, goldenAskV4())
		edit(&m)
		b, err := encodeBody(h, kindAsk, m.v4())
		if err != nil {
			t.Fatal(err)
		}
		var a counter.Ask
		_, _, _, _, err = decodeAsk(h, b, lim, &a)
		if name == "unedited" {
			if err != nil {
				t.Errorf("%s: %v", name, err)
			}
		} else if !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v, want ErrMalformed", name, err)
		}
	}
}

// askMsgOf decodes the message of an encoded ask, to edit it (encode
// m.v4() for a body of 16 fields, m for 17).
func askMsgOf(t *testing.T, h *codec.MsgpackHandle, a *counter.Ask) askMsg {
	t.Helper()
	b, err := encodeAsk(h, "n1", time.UnixMilli(1_800_000_000_123), 42, a)
	if err != nil {
		t.Fatal(err)
	}
	var m askMsg
	if err := decodeBody(h, b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestNewerAskIsAVersionMismatch: an ask of a version this node does not
// know (what a version 4 ask is to a version 3 node) is dropped whole,
// unanswered, and counted as a version mismatch, not as corruption; the
// asker decides alone after its deadline.
func TestNewerAskIsAVersionMismatch(t *testing.T) {
	k := newCoordNode(t, "k", 2)
	h := newHandle(1024)
	m := askMsgOf(t, h, goldenAskV4())
	m.Version = coordVersion + 1
	b, err := encodeBody(h, kindAsk, &m)
	if err != nil {
		t.Fatal(err)
	}
	r, err := k.receive(t, at(0), b)
	if !errors.Is(err, ErrVersion) || len(r.Out) != 0 {
		t.Fatalf("Receive: %+v %v, want ErrVersion and no answer", r, err)
	}
	if got := k.e.Stats.VersionMismatches.Load(); got != 1 {
		t.Fatalf("VersionMismatches %d, want 1", got)
	}
}

// TestEngineCoordinatesStatedLimit: a check of a family's limit (a limit
// the caller stated, counter.Family) goes to the key's coordinator, which
// never checked that (window, slices) pair itself: the version 4 ask
// (coordVersionMax: the nodes share a clock, so it has no lead) carries
// the max, the coordinator registers the pair on first sight and
// decides with the asker's max, and denies past it.
func TestEngineCoordinatesStatedLimit(t *testing.T) {
	a, k := newCoordNode(t, "a", 2), newCoordNode(t, "k", 2)
	for _, n := range []*coordNode{a, k} {
		if err := n.c.Family("stated", 4); err != nil {
			t.Fatal(err)
		}
	}
	up(t, 0, a.testNode, k.testNode)
	key := a.keyFor(at(0), "k")
	lim, err := a.c.Limit("stated", 1000, 2*time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	lims := []counter.Limit{lim.WithMax(3)}
	// askFromA puts a's check of one hit to k and returns k's answer.
	askFromA := func(now time.Time) Answer {
		t.Helper()
		var res [1]counter.Result
		d, err := a.c.Allow(now, key, 1, lims, res[:])
		if err != nil || !d.Coordinate {
			t.Fatalf("Allow %+v %v, want Coordinate (3 on 2 nodes has no blind share)", d, err)
		}
		ask := new(counter.Ask)
		a.c.PrepareAsk(now, key, 1, lims, ask)
		if !reflect.DeepEqual(ask.Max, []int64{3}) {
			t.Fatalf("ask states %v, want [3]", ask.Max)
		}
		asked, err := a.e.Ask(now, ask, res[:])
		if err != nil || asked.Local || len(asked.Out.Msgs) != 1 {
			t.Fatalf("Ask: %+v %v", asked, err)
		}
		var m askV3
		if err := decodeBody(a.e.h, asked.Out.Msgs[0], &m); err != nil || m.Version != coordVersionMax {
			t.Fatalf("ask of version %d, want %d (%v)", m.Version, coordVersionMax, err)
		}
		rcv, err := k.receive(t, now, asked.Out.Msgs[0])
		if err != nil || len(rcv.Out) != 1 {
			t.Fatalf("coordinator's Receive: %+v %v", rcv, err)
		}
		before := len(a.answers)
		if _, err := a.receive(t, now, rcv.Out[0].Msgs[0]); err != nil || len(a.answers) != before+1 {
			t.Fatalf("asker's Receive: %v, %d answers", err, len(a.answers))
		}
		ans := a.answers[len(a.answers)-1]
		if ans.Allowed {
			copy(res[:], ans.Results)
			if _, err := a.c.Grant(now, key, 1, lims, res[:]); err != nil {
				t.Fatal(err)
			}
		}
		return ans
	}
	if ans := askFromA(at(10)); !ans.Decided || !ans.Allowed || ans.Results[0].Limit != 3 || ans.Results[0].Remaining != 2 {
		t.Fatalf("first ask: %+v, want allowed with limit 3, 2 remaining", ans)
	}
	// k checks the key twice itself, with the same stated limit: its own
	// checks, decided and counted there.
	klim, err := k.c.Limit("stated", 1000, 2*time.Second, 4)
	if err != nil {
		t.Fatal(err)
	}
	for i := range int64(2) {
		ask := new(counter.Ask)
		k.c.PrepareAsk(at(20+i), key, 1, []counter.Limit{klim.WithMax(3)}, ask)
		var res [1]counter.Result
		if asked, err := k.e.Ask(at(20+i), ask, res[:]); err != nil || !asked.Local || !asked.Decision.Allowed {
			t.Fatalf("k's own check %d: %+v %v", i, asked, err)
		}
	}
	// a knows of one; k of three: a's next ask is denied by k, with 3.
	if ans := askFromA(at(30)); !ans.Decided || ans.Allowed || ans.Results[0].Limit != 3 || ans.Results[0].Count != 3 {
		t.Fatalf("second ask: %+v, want denied with limit 3 on a count of 3", ans)
	}
}
