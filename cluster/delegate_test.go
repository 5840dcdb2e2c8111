package cluster

import "testing"

// TestMetaSyncVersion: a node states the sync version it decodes, that
// it decodes the relay envelopes and the newest coordination version it
// decodes, and a node of a release that states none is read as decoding
// sync version 1, no envelope and coordination version 0 (before 5), so
// that its peers write it version 1 (engine.SetPeerSyncVersion), pass
// asks on to it raw (engine.SetPeerRelays) and state no lead in their
// asks to it (engine.SetPeerCoordVersion).
func TestMetaSyncVersion(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want meta
	}{
		{"http=10.0.0.1%3A8080", meta{http: "10.0.0.1:8080", sync: 1}},
		{"http=10.0.0.1%3A8080&leaving=1&sync=2", meta{http: "10.0.0.1:8080", leaving: true, sync: 2}},
		{"sync=1", meta{sync: 1}},
		{"sync=0", meta{sync: 1}},
		{"sync=x", meta{sync: 1}},
		{"sync=300", meta{sync: 1}},
		{"relay=1&sync=2", meta{sync: 2, relay: true}},
		{"relay=0&sync=2", meta{sync: 2}},
		{"coord=5&relay=1&sync=2", meta{sync: 2, relay: true, coord: 5}},
		{"coord=x&sync=2", meta{sync: 2}},
		{"coord=300&sync=2", meta{sync: 2}},
		{"", meta{sync: 1}},
	} {
		if got := decodeMeta([]byte(tc.meta)); got != tc.want {
			t.Errorf("decodeMeta(%q) = %+v, want %+v", tc.meta, got, tc.want)
		}
	}
	if got := string(encodeMeta(meta{http: "h:1", sync: 2, relay: true, coord: 5})); got != "coord=5&http=h%3A1&relay=1&sync=2" {
		t.Errorf("encodeMeta: %q", got)
	}
}

func FuzzDecodeMeta(f *testing.F) {
	f.Add([]byte("http=127.0.0.1%3A8081&leaving=1"))
	f.Add([]byte("http=127.0.0.1%3A8081&sync=2"))
	f.Add([]byte("sync=300"))
	f.Add([]byte("%zz&;=="))
	f.Fuzz(func(t *testing.T, b []byte) {
		m := decodeMeta(b)
		if m.sync < 1 {
			t.Fatalf("sync version %d: a peer decodes version 1 at least", m.sync)
		}
		if m2 := decodeMeta(encodeMeta(m)); m2 != m {
			t.Fatalf("round trip of %+v gave %+v", m, m2)
		}
	})
}
