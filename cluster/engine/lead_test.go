package engine

import (
	"fmt"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// TestCoordinatorAheadTakesItsAskersLead: an asker states in its ask how
// far the coordinator's clock runs ahead of its own, at least (the
// largest offset of the coordinator's recent messages: leadOf), and the
// coordinator's next Tick sets its counter's clock lead to the least its
// askers reported (clockLead), so that it judges its windows on their
// time. A coordinator behind or on the same clock gets 0 (an ask without a
// lead: version 3), as does one that does not decode version 5 asks. One
// further ahead than MaxClockOffset is not asked (failedOver).
func TestCoordinatorAheadTakesItsAskersLead(t *testing.T) {
	for _, tc := range []struct {
		name     string
		off      time.Duration // the coordinator's clock minus the asker's
		coordV   uint8         // the coordinator's stated coordination version; 0: not told
		lead     time.Duration // stated in the ask
		version  uint8         // of the ask
		clockSet time.Duration // the coordinator's counter's lead after its tick
	}{
		{"ahead", 300 * time.Millisecond, 0, 300 * time.Millisecond, coordVersion, 300 * time.Millisecond},
		{"one clock", 0, 0, 0, coordVersionLeases, 0},
		{"behind", -300 * time.Millisecond, 0, 0, coordVersionLeases, 0},
		{"ahead, version 4", 300 * time.Millisecond, coordVersionMax, 0, coordVersionLeases, 0},
		{"ahead, states version 5", 300 * time.Millisecond, coordVersion, 300 * time.Millisecond, coordVersion, 300 * time.Millisecond},
		// Past MaxClockOffset the asker refuses the coordinator's counts
		// and passes it over: it asks no more (TestSkewedCoordinatorIsPassedOver).
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, k := newCoordinatedSkewNode(t, "a", 0), newCoordinatedSkewNode(t, "k", tc.off)
			if tc.coordV != 0 {
				a.e.SetPeerCoordVersion("k", tc.coordV)
			}
			skewUp(t, 0, a, k)
			exchange(t, 200, a, k)
			key := "x"
			for i := 0; a.e.Coordinator(a.now(0), key) != "k"; i++ {
				key = string(rune('a'+i%26)) + key
			}
			var ask counter.Ask
			var res [1]counter.Result
			a.c.PrepareAsk(a.now(300), key, 1, []counter.Limit{a.lim}, &ask)
			asked, err := a.e.Ask(a.now(300), &ask, res[:])
			if err != nil || asked.Local {
				t.Fatal(asked, err)
			}
			var got counter.Ask
			_, _, _, version, err := decodeAsk(newHandle(1024), asked.Out.Msgs[0], DefaultDecodeLimits(), &got)
			if err != nil || version != tc.version || got.Lead != tc.lead {
				t.Fatalf("ask of version %d with lead %v (%v), want version %d, lead %v", version, got.Lead, err, tc.version, tc.lead)
			}
			if _, err := k.e.Receive(k.now(301), asked.Out.Msgs[0]); err != nil {
				t.Fatal(err)
			}
			if _, err := k.e.Tick(k.now(400)); err != nil {
				t.Fatal(err)
			}
			if got := k.c.ClockLead(); got != tc.clockSet {
				t.Errorf("the coordinator's clock lead %v, want %v", got, tc.clockSet)
			}
			if got := a.c.ClockLead(); got != 0 {
				t.Errorf("the asker's clock lead %v, want 0", got)
			}
		})
	}
}

// TestClockLeadIsTheLeastReported: the coordinator takes the least lead
// of the askers heard in the last leadReportAge (an asker on a clock
// behind the others reports more), and forgets a report that old.
func TestClockLeadIsTheLeastReported(t *testing.T) {
	k := newTestNodeWith(t, "k", 3, 10, nil)
	for _, p := range []string{"a", "b"} {
		if _, err := k.e.PeerUp(at(0), p); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		ms   int64
		from string
		lead time.Duration
		want time.Duration
	}{
		{1000, "a", 300 * time.Millisecond, 300 * time.Millisecond},
		{2000, "b", 200 * time.Millisecond, 200 * time.Millisecond},
		{3000, "a", 250 * time.Millisecond, 200 * time.Millisecond},
		{4000, "b", 0, 0},
		{4000 + leadReportAge.Milliseconds() + 1, "a", 250 * time.Millisecond, 250 * time.Millisecond}, // b's 0 is too old
	} {
		t.Run(fmt.Sprint(tc.ms), func(t *testing.T) {
			k.e.noteLead(at(tc.ms), tc.from, tc.lead)
			if _, err := k.e.Tick(at(tc.ms)); err != nil {
				t.Fatal(err)
			}
			if got := k.c.ClockLead(); got != tc.want {
				t.Errorf("clock lead %v, want %v", got, tc.want)
			}
		})
	}
}
