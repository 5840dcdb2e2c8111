package cluster

import (
	"bytes"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func TestStrangersWarnOnlyWhoStaysUnknown(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	type drop struct {
		name string
		at   time.Duration
	}
	tests := []struct {
		name     string
		drops    []drop
		members  []string // members at the time of due
		at       time.Duration
		want     []strangerReport
		overflow int
	}{
		{
			name:  "a sender still unknown after the grace is warned about",
			drops: []drop{{"x", 0}, {"x", time.Second}, {"x", 2 * time.Second}},
			at:    strangerGrace,
			want:  []strangerReport{{name: "x", dropped: 3, over: strangerGrace}},
		},
		{
			name:  "not before the grace",
			drops: []drop{{"x", 0}},
			at:    strangerGrace - time.Millisecond,
		},
		{
			name:    "a sender that became a member was joining: no warning",
			drops:   []drop{{"node8", 0}, {"node8", 100 * time.Millisecond}},
			members: []string{"node8"},
			at:      strangerGrace,
		},
		{
			name:    "several, in name order",
			drops:   []drop{{"b", 0}, {"a", 0}, {"c", 0}},
			members: []string{"c"},
			at:      strangerGrace,
			want:    []strangerReport{{name: "a", dropped: 1, over: strangerGrace}, {name: "b", dropped: 1, over: strangerGrace}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s strangers
			for _, d := range tt.drops {
				s.note(d.name, t0.Add(d.at))
			}
			member := func(name string) bool {
				for _, m := range tt.members {
					if m == name {
						return true
					}
				}
				return false
			}
			got, overflow := s.due(t0.Add(tt.at), member)
			if !reflect.DeepEqual(got, tt.want) || overflow != tt.overflow {
				t.Errorf("due = %+v, %d; want %+v, %d", got, overflow, tt.want, tt.overflow)
			}
		})
	}
}

func TestStrangersRewarnAndForget(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	none := func(string) bool { return false }
	var s strangers
	s.note("x", t0)
	if got, _ := s.due(t0.Add(strangerGrace), none); len(got) != 1 {
		t.Fatalf("first warning: %+v", got)
	}
	// Still sending: warned about again only after strangerRewarn.
	s.note("x", t0.Add(strangerGrace+time.Second))
	if got, _ := s.due(t0.Add(strangerGrace+strangerRewarn/2), none); len(got) != 0 {
		t.Errorf("warned again within strangerRewarn: %+v", got)
	}
	got, _ := s.due(t0.Add(strangerGrace+strangerRewarn), none)
	if want := []strangerReport{{name: "x", dropped: 1, over: strangerRewarn}}; !reflect.DeepEqual(got, want) {
		t.Errorf("second warning = %+v, want %+v", got, want)
	}
	// Silent since: forgotten, and its slot free again.
	if got, _ := s.due(t0.Add(strangerGrace+2*strangerRewarn), none); len(got) != 0 || len(s.names) != 0 {
		t.Errorf("a silent sender: reports %+v, %d names kept", got, len(s.names))
	}
}

func TestStrangersBounded(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var s strangers
	for i := range maxStrangers + 10 {
		s.note(fmt.Sprintf("forged-%d", i), t0)
		s.note(fmt.Sprintf("forged-%d", i), t0) // twice each
	}
	if len(s.names) != maxStrangers {
		t.Fatalf("%d names kept, want at most %d", len(s.names), maxStrangers)
	}
	got, overflow := s.due(t0.Add(strangerGrace), func(string) bool { return false })
	if len(got) != maxStrangers || overflow != 20 {
		t.Errorf("%d reports and %d overflowing messages, want %d and 20", len(got), overflow, maxStrangers)
	}
	if _, overflow := s.due(t0.Add(strangerGrace), func(string) bool { return false }); overflow != 0 {
		t.Errorf("overflow reported twice: %d", overflow)
	}
}

// TestStrangersJoinersPastTheBound: a cluster of more than maxStrangers
// nodes starting: every sender joins within the grace, the named ones and
// those past the bound alike, and nothing is reported.
func TestStrangersJoinersPastTheBound(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var s strangers
	for i := range 2 * maxStrangers {
		s.note(fmt.Sprintf("node-%d", i), t0)
	}
	all := func(string) bool { return true }
	if got, overflow := s.due(t0.Add(time.Second), all); len(got) != 0 || overflow != 0 {
		t.Errorf("joiners reported: %+v, %d more messages", got, overflow)
	}
	// A real stranger later is reported alone.
	s.note("stranger", t0.Add(2*time.Second))
	got, overflow := s.due(t0.Add(2*time.Second+strangerGrace), func(name string) bool { return name != "stranger" })
	if len(got) != 1 || got[0].name != "stranger" || overflow != 0 {
		t.Errorf("reports %+v and %d more messages, want the stranger's alone", got, overflow)
	}
}

func TestStrangersKeepACopyOfTheName(t *testing.T) {
	buf := []byte("node9")
	var s strangers
	s.note(unsafe.String(&buf[0], len(buf)), time.Unix(0, 0)) // aliasing a datagram, as Received.From does
	copy(buf, "XXXXX")
	got, _ := s.due(time.Unix(0, 0).Add(strangerGrace), func(string) bool { return false })
	if len(got) != 1 || got[0].name != "node9" {
		t.Errorf("reports %+v, want node9's", got)
	}
}

// TestWarnStrangersLogs: the Node warns about a sender still unknown
// after the grace, and not about one that became a member (a join race).
func TestWarnStrangersLogs(t *testing.T) {
	var buf bytes.Buffer
	n := &Node{log: slog.New(slog.NewTextHandler(&buf, nil)), members: map[string]*member{}}
	t0 := time.Unix(1_700_000_000, 0)
	n.strangers.note("joiner", t0)
	n.strangers.note("stranger", t0)
	n.members["joiner"] = &member{}
	n.warnStrangers(t0.Add(strangerGrace))
	got := buf.String()
	if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "sender=stranger messages=1") {
		t.Errorf("no warning about the stranger:\n%s", got)
	}
	if strings.Contains(got, "joiner") {
		t.Errorf("warned about a node that joined:\n%s", got)
	}
}
