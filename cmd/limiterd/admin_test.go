package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAdminListener: -admin-addr serves the admin API on a listener of its
// own; the /check listener does not serve it.
func TestAdminListener(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(rulesV1), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	admin := "http://" + l.Addr().String()
	l.Close()
	base, stop := startDaemon(t, path, "-admin-addr", strings.TrimPrefix(admin, "http://"))
	get(t, base+"/check?key=k")
	if code, body := get(t, admin+"/v1/keys?key=k"); code != 200 || !strings.Contains(body, `"count":1,"remaining":1`) {
		t.Fatalf("GET on the admin listener: %d %s", code, body)
	}
	if code, body := get(t, base+"/v1/keys?key=k"); code != 404 {
		t.Fatalf("the admin API on the /check listener: %d %s", code, body)
	}
	req, _ := http.NewRequest("DELETE", admin+"/v1/keys?key=k", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"rule":"default"`) {
		t.Fatalf("DELETE: %d %s", resp.StatusCode, b)
	}
	if code, body := get(t, admin+"/v1/keys?key=k"); code != 200 || !strings.Contains(body, `"count":0,"remaining":2`) {
		t.Fatalf("GET after the reset: %d %s", code, body)
	}
	if code := stop(); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

// TestAdminAddrOfItsOwn: -admin-addr is refused on another listener's
// address (but two ephemeral ports are two listeners).
func TestAdminAddrOfItsOwn(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-http-addr", "127.0.0.1:8080", "-admin-addr", "127.0.0.1:8080"}, "-admin-addr must be a listener of its own, not -http-addr's"},
		{[]string{"-grpc-addr", "127.0.0.1:9090", "-admin-addr", "127.0.0.1:9090"}, "not -grpc-addr's"},
		{[]string{"-pprof-addr", "127.0.0.1:6060", "-admin-addr", "127.0.0.1:6060"}, "not -pprof-addr's"},
		{[]string{"-http-addr", "127.0.0.1:0", "-admin-addr", "127.0.0.1:0"}, ""},
		{[]string{"-admin-addr", "127.0.0.1:9091"}, ""},
	} {
		cfg, err := parseConfig(tc.args, func(k string) string { return map[string]string{"LIMITERD_ADMIN_ADDR": "127.0.0.1:1"}[k] }, io.Discard)
		if tc.want == "" {
			if err != nil || cfg.adminAddr != tc.args[len(tc.args)-1] {
				t.Errorf("%q: %v, admin %q", tc.args, err, cfg.adminAddr)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.args, err, tc.want)
		}
	}
	cfg, err := parseConfig(nil, func(k string) string { return map[string]string{"LIMITERD_ADMIN_ADDR": "127.0.0.1:9091"}[k] }, io.Discard)
	if err != nil || cfg.adminAddr != "127.0.0.1:9091" {
		t.Errorf("LIMITERD_ADMIN_ADDR: %q %v", cfg.adminAddr, err)
	}
	if cfg, _ := parseConfig(nil, func(string) string { return "" }, io.Discard); cfg.adminAddr != "" {
		t.Errorf("-admin-addr is %q by default, want off", cfg.adminAddr)
	}
}
