package engine

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"

	"github.com/limiterd/limiterd/counter"
)

// TestCoordinationVersion5 is the rule of version 5 (askcodec.go): an ask
// with a lead (counter.Ask.Lead) of a millisecond or more is version 5,
// its lead in whole milliseconds and its Max as stated (nil when it states
// none); one with a shorter lead is version 3 or 4 as before, byte for
// byte, its lead dropped. Each decodes back with the lead sent.
func TestCoordinationVersion5(t *testing.T) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	lim := DefaultDecodeLimits()
	for _, tc := range []struct {
		name     string
		lead     time.Duration
		max      bool // states goldenAskV4's max
		version  uint8
		wantLead time.Duration // as decoded
		golden   string        // the golden it is byte for byte, if any
	}{
		{"no lead", 0, false, coordVersionLeases, 0, "ask"},
		{"half a millisecond", 500 * time.Microsecond, false, coordVersionLeases, 0, "ask"},
		{"a negative lead", -time.Second, false, coordVersionLeases, 0, "ask"},
		{"a millisecond", time.Millisecond, false, coordVersion, time.Millisecond, ""},
		{"180 ms", 180 * time.Millisecond, false, coordVersion, 180 * time.Millisecond, "ask_v5"},
		{"180.9 ms: whole ms", 180*time.Millisecond + 900*time.Microsecond, false, coordVersion, 180 * time.Millisecond, "ask_v5"},
		{"an hour, the most", time.Duration(maxLeadMs) * time.Millisecond, false, coordVersion, time.Hour, ""},
		{"a max, no lead", 0, true, coordVersionMax, 0, "ask_v4"},
		{"a max, half a millisecond", 500 * time.Microsecond, true, coordVersionMax, 0, "ask_v4"},
		{"a max, a millisecond", time.Millisecond, true, coordVersion, time.Millisecond, ""},
		{"a max, 180 ms", 180 * time.Millisecond, true, coordVersion, 180 * time.Millisecond, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ask := goldenAsk()
			if tc.max {
				ask = goldenAskV4()
			}
			ask.Lead = tc.lead
			b, err := encodeAsk(h, "n1", sent, 42, ask)
			if err != nil {
				t.Fatal(err)
			}
			if tc.golden != "" && !reflect.DeepEqual(b, readWireGolden(t, tc.golden)) {
				t.Fatalf("not the %s golden byte for byte: %x", tc.golden, b)
			}
			var m askMsg
			if err := decodeBody(h, b, &m); err != nil || m.Version != tc.version || m.LeadMs != tc.wantLead.Milliseconds() {
				t.Fatalf("encoded as version %d, lead %d ms (%v); want version %d, %v", m.Version, m.LeadMs, err, tc.version, tc.wantLead)
			}
			if fields := map[uint8]int{coordVersionLeases: askFieldsV3, coordVersionMax: askFieldsV4, coordVersion: askFieldsV5}[tc.version]; arrayFields(b) != fields {
				t.Fatalf("an ask of %d fields, want %d", arrayFields(b), fields)
			}
			var got counter.Ask
			_, _, _, version, err := decodeAsk(h, b, lim, &got)
			if err != nil || version != tc.version || got.Lead != tc.wantLead {
				t.Fatalf("decodes as version %d, lead %v (%v); want version %d, lead %v", version, got.Lead, err, tc.version, tc.wantLead)
			}
			wantMax := []int64(nil)
			if tc.max {
				wantMax = ask.Max
			}
			if !reflect.DeepEqual(got.Max, wantMax) && (len(got.Max) != 0 || wantMax != nil) {
				t.Fatalf("decodes with maxes %v, want %v", got.Max, wantMax)
			}
			// And the answer is in the ask's version, version 3's layout.
			ans, err := encodeAnswer(h, version, "k", sent, 42, answerDecided, true, goldenResults())
			if err != nil {
				t.Fatal(err)
			}
			var am answerMsg
			if err := decodeBody(h, ans, &am); err != nil || am.Version != version || arrayFields(ans) != answerFields {
				t.Fatalf("answer of version %d and %d fields (%v), want version %d and %d", am.Version, arrayFields(ans), err, version, answerFields)
			}
			if a, err := decodeAnswer(h, ans, lim); err != nil || !reflect.DeepEqual(a.Results, goldenResults()) {
				t.Fatalf("answer: %+v %v", a, err)
			}
		})
	}

	// Malformed: the version and the field count disagree, a lead out of
	// range, maxes not parallel to the limits. The oracle refuses each
	// too. An ask of a lead beyond the most is encoded (the engine bounds
	// the lead it states, MaxClockOffset) but refused.
	v5 := func(withMax bool) askMsg {
		a := goldenAskV5()
		if withMax {
			a.Max = goldenAskV4().Max
		}
		return askMsgOf(t, h, a)
	}
	beyond, err := encodeAsk(h, "n1", sent, 42, func() *counter.Ask {
		a := goldenAskV5()
		a.Lead = time.Duration(maxLeadMs+1) * time.Millisecond
		return a
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		msg  func() any // the body to encode
		b    []byte     // or the message
	}{
		{name: "version 5 of 16 fields", msg: func() any { m := v5(true); return m.v4() }},
		{name: "version 5 of 16 fields, no max", msg: func() any { m := v5(false); return m.v4() }},
		{name: "version 5 of 15 fields", msg: func() any { m := v5(false); return &m.askV3 }},
		{name: "version 4 of 17 fields", msg: func() any { m := v5(true); m.Version = coordVersionMax; return &m }},
		{name: "version 4 of 17 fields, lead 0", msg: func() any { m := v5(true); m.Version, m.LeadMs = coordVersionMax, 0; return &m }},
		{name: "version 3 of 17 fields", msg: func() any { m := v5(false); m.Version = coordVersionLeases; return &m }},
		{name: "version 2 of 17 fields", msg: func() any { m := v5(false); m.Version, m.Want, m.Gen = coordVersionNoLeases, 0, 0; return &m }},
		{name: "lead 0", msg: func() any { m := v5(false); m.LeadMs = 0; return &m }},
		{name: "lead -1", msg: func() any { m := v5(false); m.LeadMs = -1; return &m }},
		{name: "lead maxLeadMs+1", msg: func() any { m := v5(false); m.LeadMs = maxLeadMs + 1; return &m }},
		{name: "encoded with a lead beyond the most", b: beyond},
		{name: "version 5, one max for two limits", msg: func() any { m := v5(true); m.Max = m.Max[:1]; return &m }},
		{name: "version 5, three maxes for two limits", msg: func() any { m := v5(true); m.Max = append(m.Max, 5); return &m }},
		{name: "version 5, a negative max", msg: func() any { m := v5(true); m.Max[1] = -1; return &m }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.b
			if b == nil {
				var err error
				if b, err = encodeBody(h, kindAsk, tc.msg()); err != nil {
					t.Fatal(err)
				}
			}
			var a counter.Ask
			if _, _, _, _, err := decodeAsk(h, b, lim, &a); !errors.Is(err, ErrMalformed) {
				t.Errorf("decoded: %v, want ErrMalformed: %x", err, b)
			}
			if _, _, _, _, err := oracleDecodeAsk(h, b, lim, &a); !errors.Is(err, ErrMalformed) {
				t.Errorf("the oracle: %v, want ErrMalformed: %x", err, b)
			}
		})
	}
	// The bodies above, unedited, decode: with the lead and the maxes.
	for _, withMax := range []bool{false, true} {
		m := v5(withMax)
		b, err := encodeBody(h, kindAsk, &m)
		if err != nil {
			t.Fatal(err)
		}
		var a counter.Ask
		if _, _, _, version, err := decodeAsk(h, b, lim, &a); err != nil || version != coordVersion || a.Lead != 180*time.Millisecond || len(a.Max) != len(m.Max) {
			t.Fatalf("an unedited version 5 ask (max %t): version %d, %+v, %v", withMax, version, a, err)
		}
	}
}

// TestCoordinationVersionGrid holds the ask decoder to its oracle on
// every combination of a version (2 to 6), a field count (13 to 18), a
// Max column (nil, empty, parallel to the limits, short) and a lead (0,
// 1, -1, the most and past it), each as go-msgpack writes it and in wide
// encodings: the decoders agree on each (checkCoordAgainstOracle), and
// accept exactly what version 5's rule allows.
func TestCoordinationVersionGrid(t *testing.T) {
	h := newHandle(1024)
	rng := rand.New(rand.NewPCG(11, 12))
	w := newWire(nil)
	golden, ok := schemaless(readWireGolden(t, "ask_v5"))
	if !ok || len(golden) != askFieldsV5 {
		t.Fatalf("the ask_v5 golden is not an ask of %d fields", askFieldsV5)
	}
	maxes := map[string]any{"nil": nil, "empty": []int64{}, "parallel": []int64{25, 0}, "short": []int64{25}}
	for version := uint8(2); version <= coordVersion+1; version++ {
		for fields := askFieldsV2; fields <= askFieldsV5+1; fields++ {
			for maxName, mx := range maxes {
				for _, lead := range []int64{0, 1, -1, maxLeadMs, maxLeadMs + 1} {
					f := append(slices.Clone(golden), 0)
					f[0], f[15], f[16] = version, mx, lead
					if version == coordVersionNoLeases {
						f[13], f[14] = 0, 0 // no want nor generation
					}
					var b []byte
					if err := codec.NewEncoderBytes(&b, h).Encode(f[:fields]); err != nil {
						t.Fatal(err)
					}
					b = append([]byte{kindAsk}, b...)
					nm := 0
					if m, _ := mx.([]int64); fields > 15 {
						nm = len(m)
					}
					want := knownCoordVersion(version) &&
						(fields == askFieldsV5) == (version == coordVersion) &&
						(fields != askFieldsV5 || lead >= 1 && lead <= maxLeadMs) &&
						(version < coordVersionMax && nm == 0 || version == coordVersionMax && nm == 2 || version == coordVersion && (nm == 0 || nm == 2)) &&
						fields != askFieldsV5+1 && fields != askFieldsV2+1
					var a counter.Ask
					_, _, _, _, err := decodeAsk(h, b, DefaultDecodeLimits(), &a)
					if (err == nil) != want {
						t.Errorf("version %d, %d fields, max %s, lead %d: %v, want accepted %t", version, fields, maxName, lead, err, want)
					}
					checkCoordAgainstOracle(t, w, b, DefaultDecodeLimits())
					for range 2 {
						checkCoordAgainstOracle(t, w, wideCoord(rng, b), DefaultDecodeLimits())
					}
				}
			}
		}
	}
}
