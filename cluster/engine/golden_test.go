package engine

import (
	"bytes"
	"cmp"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/limiterd/limiterd/counter"
)

var update = flag.Bool("update", false, "rewrite the wire goldens under testdata/wire/")

// TestWireGoldens pins the bytes of every sync kind in both versions
// this node writes (delta.hex and the others version 1, what a node
// sends while a peer of an older release is a member; delta_v2.hex and
// the others version 2): a change of them is a change of the wire
// format, which peers of the old format drop (see doc.go), so it must be
// deliberate: go test -update rewrites the goldens, and the diff shows
// what changed.
func TestWireGoldens(t *testing.T) {
	for _, version := range []uint8{wireVersionPlain, wireVersion} {
		t.Run(fmt.Sprintf("v%d", version), func(t *testing.T) { checkSyncGoldens(t, version) })
	}
}

func checkSyncGoldens(t *testing.T, version uint8) {
	h := newHandle(1024)
	sent := time.UnixMilli(1_800_000_000_123)
	es := []counter.Entry{
		{Limit: "default|60000|12", Origin: "n1", Key: "client-1", Start: 1_800_000_000_000, Count: 7},
		{Limit: "default|60000|12", Origin: "n1", Key: "client-2", Start: 1_799_999_995_000, Count: 600},
		{Limit: "api|1000|1", Origin: "n2", Key: "api:k", Start: 1_800_000_000_100, Count: 70_000},
	}
	n := newTestNode(t, "n1", 2)
	if version != wireVersion {
		n.e.SetPeerSyncVersion("n2", version) // a peer of an older release
	}
	hb, err := n.e.heartbeat(sent)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		kind byte
		es   []counter.Entry
		msg  []byte // set: not from encodeEntries
	}{
		{name: "delta", kind: kindDelta, es: es},
		{name: "state", kind: kindState, es: es},
		{name: "hello", kind: kindHello},
		{name: "heartbeat", msg: hb[0]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.msg
			if got == nil {
				msgs, err := newWire(h).encodeEntries(tc.kind, version, "n1", sent.UnixMilli(), append([]counter.Entry(nil), tc.es...), 1<<20)
				if err != nil || len(msgs) != 1 {
					t.Fatalf("encode: %d messages, %v", len(msgs), err)
				}
				got = msgs[0]
			}
			name := tc.name
			if version != wireVersionPlain {
				name = fmt.Sprintf("%s_v%d", tc.name, version)
			}
			checkWireGolden(t, name, got)
			// And the golden decodes to what was encoded.
			kind, m, err := decode(h, got, DefaultDecodeLimits())
			if err != nil || m.Version != version || m.From != "n1" || m.SentMs != sent.UnixMilli() || !slices.Equal(m.entries(nil), sortedEntries(tc.es)) {
				t.Fatalf("decodes to kind %q %+v, %v", kind, m, err)
			}
		})
	}
}

// checkWireGolden compares a message with its golden hex dump under
// testdata/wire (rewritten with -update): a difference is a change of the
// wire format.
func checkWireGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", "wire", name+".hex")
	text := []byte(hex.Dump(got))
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if !bytes.Equal(text, want) {
		t.Fatalf("%s message bytes differ from %s (a wire change: deliberate? go test -update)\n--- got\n%s--- want\n%s", name, path, text, want)
	}
}

// sortedEntries is es in the order encodeEntries writes them: by limit,
// then origin, each group in es's order.
func sortedEntries(es []counter.Entry) []counter.Entry {
	out := slices.Clone(es)
	slices.SortStableFunc(out, func(a, b counter.Entry) int {
		return cmp.Or(cmp.Compare(a.Limit, b.Limit), cmp.Compare(a.Origin, b.Origin))
	})
	return out
}
