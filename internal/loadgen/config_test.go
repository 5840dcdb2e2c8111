package loadgen

import (
	"errors"
	"testing"
)

// fakeResolver answers for a few names and fails for the rest.
func fakeResolver(host string) ([]string, error) {
	switch host {
	case "localhost":
		return []string{"127.0.0.1", "::1"}, nil
	case "mixed.example":
		return []string{"127.0.0.1", "192.0.2.1"}, nil
	case "remote.example":
		return []string{"192.0.2.7"}, nil
	case "nothing.example":
		return []string{"not-an-ip"}, nil
	}
	return nil, errors.New("no such host")
}

func TestLoopbackGuard(t *testing.T) {
	tests := []struct {
		target      string
		allowRemote bool
		want        string // resolved target, or "" for an error
		remote      bool   // the error is ErrRemoteTarget
	}{
		{"127.0.0.1:8080", false, "127.0.0.1:8080", false},
		{"127.3.2.1:1", false, "127.3.2.1:1", false},
		{"[::1]:8080", false, "[::1]:8080", false},
		{"[::ffff:127.0.0.1]:80", false, "127.0.0.1:80", false},
		{"http://127.0.0.1:8081/", false, "127.0.0.1:8081", false},
		{"localhost:9", false, "127.0.0.1:9", false},
		{"10.0.0.1:8080", false, "", true},
		{"[2001:db8::1]:80", false, "", true},
		{"0.0.0.0:8080", false, "", true},
		{"128.0.0.1:8080", false, "", true},
		{"mixed.example:80", false, "", true},
		{"remote.example:80", false, "", true},
		{"10.0.0.1:8080", true, "10.0.0.1:8080", false},
		{"remote.example:80", true, "192.0.2.7:80", false},
		{"https://127.0.0.1:443", false, "", false},
		{"127.0.0.1", false, "", false},
		{"127.0.0.1:0", false, "", false},
		{"127.0.0.1:65536", false, "", false},
		{"127.0.0.1:http", false, "", false},
		{":8080", false, "", false},
		{"unknown.example:80", false, "", false},
		{"nothing.example:80", false, "", false},
	}
	for _, tt := range tests {
		got, err := ResolveTarget(tt.target, tt.allowRemote, fakeResolver)
		switch {
		case tt.want != "" && (err != nil || got != tt.want):
			t.Errorf("%q (allow remote %v): %q, %v; want %q", tt.target, tt.allowRemote, got, err, tt.want)
		case tt.want == "" && err == nil:
			t.Errorf("%q (allow remote %v): accepted as %q, want an error", tt.target, tt.allowRemote, got)
		case tt.want == "" && errors.Is(err, ErrRemoteTarget) != tt.remote:
			t.Errorf("%q: error %v, remote guard %v", tt.target, err, tt.remote)
		}
	}
}
