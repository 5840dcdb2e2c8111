package rls

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// TestExampleFiles: examples/envoy, which README's Envoy section shows,
// decides as its comments say, and the Envoy configuration asks for the
// domain and descriptors the rule file limits. (Envoy itself is not run
// here; the descriptors it sends are built as its remote_address and
// header_value_match actions build them.)
func TestExampleFiles(t *testing.T) {
	rules, err := os.ReadFile("../examples/envoy/ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{}, "ratelimit.yaml", string(rules))
	if resp := f.call(t, "edge", desc("remote_address", "203.0.113.9")); resp.OverallCode != over {
		t.Fatalf("the blocked address: %v", resp)
	}
	login := desc("path", "/login", "remote_address", "198.51.100.7")
	for i := range 6 {
		resp := f.call(t, "edge", desc("remote_address", "198.51.100.7"), login)
		if want := i < 5; (resp.OverallCode == ok) != want {
			t.Fatalf("login %d: %v, want OK %v", i+1, resp, want)
		}
	}
	if resp := f.call(t, "edge", desc("remote_address", "198.51.100.7")); resp.Statuses[0].LimitRemaining != 594 {
		t.Fatalf("the address after five logins and a denied one: %v, want 594 of 600 left", resp.Statuses[0])
	}

	b, err := os.ReadFile("../examples/envoy/envoy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("envoy.yaml: %v", err)
	}
	text := string(b)
	for _, want := range []string{
		"domain: edge", "envoy.filters.http.ratelimit", "cluster_name: limiterd", "transport_api_version: V3",
		"remote_address: {}", "descriptor_key: path", "descriptor_value: /login", "http2_protocol_options",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("envoy.yaml lacks %q", want)
		}
	}
}
