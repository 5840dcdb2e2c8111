package envoyrules

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ents builds entries from alternating keys and values.
func ents(kv ...string) []Entry {
	out := make([]Entry, 0, len(kv)/2)
	for i := 0; i+1 < len(kv); i += 2 {
		out = append(out, Entry{kv[i], kv[i+1]})
	}
	return out
}

// summary describes what Match returned: "nil", or the node's path and
// limit, e.g. "d.k_v 5/SECOND", "d.k unlimited", "d.k 1/DAY shadow".
func summary(d *Descriptor) string {
	if d == nil {
		return "nil"
	}
	s := d.Path + " " + fmt.Sprintf("%d/%s", d.Limit.RequestsPerUnit, d.Limit.Unit)
	if d.Limit.Unlimited {
		s = d.Path + " unlimited"
	}
	if d.ShadowMode {
		s += " shadow"
	}
	return s
}

type matchCase struct {
	entries []Entry
	want    string // summary of the result
}

func checkMatches(t *testing.T, c *Config, cases []matchCase) {
	t.Helper()
	for _, mc := range cases {
		if got := summary(c.Match(mc.entries)); got != mc.want {
			t.Errorf("Match(%v) = %s, want %s", mc.entries, got, mc.want)
		}
	}
}

func load(t *testing.T, parts ...string) *Config {
	t.Helper()
	c, err := Load(filepath.Join(append([]string{"testdata"}, parts...)...))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestReadmeExamples checks each example of upstream's README
// ("Configuration", "Examples") behaves as the README says.
func TestReadmeExamples(t *testing.T) {
	tests := []struct {
		file  string
		cases []matchCase
	}{
		{"example1.yaml", []matchCase{ // two 500/s limits on the same key
			{ents("database", "users"), "mongo_cps.database_users 500/SECOND"},
			{ents("database", "default"), "mongo_cps.database_default 500/SECOND"},
			{ents("database", "other"), "nil"},
		}},
		{"example2.yaml", []matchCase{ // nested lists; a placeholder without limit
			{ents("message_type", "marketing", "to_number", "2061111111"), "messaging.message_type_marketing.to_number 5/DAY"},
			{ents("message_type", "marketing", "to_number", "2062222222"), "messaging.message_type_marketing.to_number 5/DAY"},
			{ents("to_number", "2061111111"), "messaging.to_number 100/DAY"},
			{ents("message_type", "marketing"), "nil"},
			{ents("message_type", "other", "to_number", "2061111111"), "nil"},
		}},
		{"example3.yaml", []matchCase{ // key/value before key alone; 0 blocks an address
			{ents("remote_address", "50.0.0.1"), "edge_proxy_per_ip.remote_address 10/SECOND"},
			{ents("remote_address", "50.0.0.5"), "edge_proxy_per_ip.remote_address_50.0.0.5 0/SECOND"},
		}},
		{"example4a.yaml", []matchCase{ // depth must match
			{ents("key", "value", "subkey", "subvalue"), "nil"},
			{ents("key", "value"), "example4.key_value 300/SECOND"},
		}},
		{"example4b.yaml", []matchCase{
			{ents("key", "value", "subkey", "subvalue"), "example4.key_value.subkey 300/SECOND"},
			{ents("key", "value"), "nil"},
		}},
		{"example5.yaml", []matchCase{ // unlimited
			{ents("ldap", "x"), "internal.ldap unlimited"},
			{ents("azure", "x"), "internal.azure 100/MINUTE"},
		}},
		{"example6.yaml", []matchCase{ // shadow mode
			{ents("service", "auth-service", "user", "user-a"), "example6.service.user_user-a 10/SECOND shadow"},
			{ents("service", "auth-service", "user", "user-b"), "example6.service.user_user-b 20/SECOND"},
			{ents("service", "auth-service", "user", "user-c"), "nil"},
		}},
		{"example7.yaml", []matchCase{ // replaces: see TestReplaces
			{ents("key_1", "value_1", "user", "bkthomps"), "example7.key_1_value_1.user_bkthomps 5/SECOND"},
			{ents("key_2", "value_2", "user", "bkthomps"), "example7.key_2_value_2.user_bkthomps 10/SECOND"},
		}},
		{"example8.yaml", []matchCase{ // detailed_metric accepted; the README's text says "/ sec", its YAML minute
			{ents("key1", "unspecified_value"), "example8.key1 10/MINUTE"},
			{ents("key1", "unspecified_value2"), "example8.key1 10/MINUTE"},
			{ents("key1", "value1"), "example8.key1_value1 20/MINUTE"},
		}},
		{"example9a.yaml", []matchCase{ // trailing wildcard
			{ents("key1", "value1"), "example9.key1_value* 20/MINUTE"},
			{ents("key1", "valueXYZ"), "example9.key1_value* 20/MINUTE"},
			{ents("key1", "value"), "example9.key1_value* 20/MINUTE"},
			{ents("key1", "xvalue"), "nil"},
		}},
		{"example9b.yaml", []matchCase{ // middle wildcard
			{ents("path", "/api/123/action"), "example9.path_/api/*/action 20/MINUTE"},
			{ents("path", "/api/user-id/action"), "example9.path_/api/*/action 20/MINUTE"},
			{ents("path", "/api/123/other"), "nil"},
		}},
		{"example9c.yaml", []matchCase{ // several wildcards
			{ents("route", "/api/v1/resource/123/action"), "example9.route_/api/*/resource/*/action 20/MINUTE"},
			{ents("route", "/api/v2/resource/456/action"), "example9.route_/api/*/resource/*/action 20/MINUTE"},
			{ents("route", "/api/v2/thing/456/action"), "nil"},
		}},
		{"example10a.yaml", []matchCase{ // value_to_metric accepted
			{ents("route", "api", "http_method", "GET", "subject_id", "123"), "example10.route.http_method.subject_id 60/MINUTE"},
			{ents("route", "web", "http_method", "POST", "subject_id", "456"), "example10.route.http_method.subject_id 60/MINUTE"},
		}},
		{"example10b.yaml", []matchCase{
			{ents("user", "alice", "action", "readfile", "resource", "documents"), "example10_wildcard.user.action_read*.resource 100/MINUTE"},
			{ents("user", "alice", "action", "write", "resource", "documents"), "nil"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			checkMatches(t, load(t, "readme", tt.file), tt.cases)
		})
	}
}

// TestReadmeExample3Blocks checks README Example 3's "Black list IP": the
// descriptor ("remote_address", "50.0.0.5") is matched by the node with
// requests_per_unit 0, which denies every request without counting, while
// any other address gets the counted 10 per second.
func TestReadmeExample3Blocks(t *testing.T) {
	c := load(t, "readme", "example3.yaml")
	blocked := c.Match(ents("remote_address", "50.0.0.5"))
	if blocked == nil || !blocked.Limit.DeniesAll() {
		t.Fatalf("Match(50.0.0.5) = %s, want a node whose limit denies all", summary(blocked))
	}
	if got, want := *blocked.Limit, (RateLimit{Unit: "SECOND", RequestsPerUnit: 0, Window: time.Second}); got != want {
		t.Errorf("blocked limit = %+v, want %+v", got, want)
	}
	if blocked.Line != 11 || blocked.ShadowMode {
		t.Errorf("blocked node = %+v, want line 11 without shadow mode", *blocked)
	}
	other := c.Match(ents("remote_address", "50.0.0.1"))
	if other == nil || other.Limit.DeniesAll() || other.Limit.RequestsPerUnit != 10 {
		t.Errorf("Match(50.0.0.1) = %s, want the counted 10/SECOND limit", summary(other))
	}
	if blocked.RuleName() == other.RuleName() {
		t.Errorf("both nodes are named %q", blocked.RuleName())
	}
}

// TestReadmeExamplesRefused covers the README examples limiterd cannot
// serve: share_threshold (Example 11).
func TestReadmeExamplesRefused(t *testing.T) {
	tests := map[string]string{
		"example11a.yaml": `:8: descriptor "example11.files_files/*": field "share_threshold": not supported by limiterd`,
		"example11b.yaml": `:7: descriptor "example11_metrics.route_api/*": field "share_threshold": not supported by limiterd`,
	}
	for file, want := range tests {
		path := filepath.Join("testdata", "readme", file)
		_, err := Load(path)
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), path+want) {
			t.Errorf("Load(%s) = %v\nwant an error containing %s%s", file, err, path, want)
		}
	}
}

// TestUpstreamExampleConfig reads upstream's examples/ratelimit/config/
// example.yaml. limiterd refuses it for its two quota_mode descriptors
// only; its "banned" limit of 0 is accepted. Without quota_mode the file
// parses, the banned node denies all, and "override" replaces it.
func TestUpstreamExampleConfig(t *testing.T) {
	path := filepath.Join("testdata", "upstream", "example.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Parse(path, data)
	for _, want := range []string{
		"2 problems:",
		path + `:90: descriptor "rl.service_service_1": field "quota_mode": not supported by limiterd`,
		path + `:99: descriptor "rl.service_service_2": field "quota_mode": not supported by limiterd`,
	} {
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), want) {
			t.Errorf("Load(%s) = %v\nwant an error containing %s", path, err, want)
		}
	}
	if strings.Contains(fmt.Sprint(err), "requests_per_unit") {
		t.Errorf("the limit of 0 is refused: %v", err)
	}

	c := mustParse(t, "example.yaml", strings.ReplaceAll(string(data), "    quota_mode: true\n", ""))
	banned := c.Match(ents("foo", "x", "bar", "banned"))
	if banned == nil || !banned.Limit.DeniesAll() || banned.Limit.Name != "banned_limit" || banned.Limit.Window != time.Minute {
		t.Fatalf("Match(foo, bar=banned) = %s, want banned_limit denying all", summary(banned))
	}
	if d := c.Match(ents("foo", "x", "bar", "other")); d == nil || d.Limit.DeniesAll() || d.Limit.RequestsPerUnit != 3 {
		t.Errorf("Match(foo, bar=other) = %s, want 3/MINUTE", summary(d))
	}
	override := c.Match(ents("source_cluster", "proxy", "destination_cluster", "override"))
	if got := replaced([]*Descriptor{banned, override}); got[0] != nil || got[1] != override {
		t.Errorf("after replaces: %s, %s; want the banned limit dropped", summary(got[0]), summary(got[1]))
	}
}

// TestUpstreamReloadConfig reads upstream's integration test config
// reload.yaml, whose "block" limit is 0.
func TestUpstreamReloadConfig(t *testing.T) {
	c := load(t, "upstream", "reload.yaml")
	checkMatches(t, c, []matchCase{
		{ents("key1", "foo"), "reload.key1 50/SECOND"},
		{ents("block", "foo"), "reload.block 0/SECOND"},
		{ents("one_per_minute", "foo"), "reload.one_per_minute 1/MINUTE"},
	})
	for key, want := range map[string]bool{"key1": false, "block": true, "one_per_minute": false} {
		if got := c.Match(ents(key, "foo")).Limit.DeniesAll(); got != want {
			t.Errorf("%s: DeniesAll = %v, want %v", key, got, want)
		}
	}
}

// replaced applies replaces across the descriptors of one request, as
// upstream's service.constructLimitsToCheck does and doc.go tells callers
// to: every matched node whose limit's name some matched node replaces is
// dropped.
func replaced(matched []*Descriptor) []*Descriptor {
	names := map[string]bool{}
	for _, d := range matched {
		if d != nil {
			for _, r := range d.Replaces {
				names[r] = true
			}
		}
	}
	out := make([]*Descriptor, len(matched))
	for i, d := range matched {
		if d != nil && (d.Limit.Name == "" || !names[d.Limit.Name]) {
			out[i] = d
		}
	}
	return out
}

// TestReplaces checks README Example 7's three statements.
func TestReplaces(t *testing.T) {
	c := load(t, "readme", "example7.yaml")
	one := c.Match(ents("key_1", "value_1", "user", "bkthomps"))
	two := c.Match(ents("key_2", "value_2", "user", "bkthomps"))
	if one == nil || two == nil || one.Limit.Name != "specific_limit" || len(two.Replaces) != 1 || two.Replaces[0] != "specific_limit" {
		t.Fatalf("matched %s (%+v) and %s (%+v)", summary(one), one, summary(two), two)
	}
	check := func(req []*Descriptor, want ...string) {
		t.Helper()
		got := replaced(req)
		for i := range got {
			if s := summary(got[i]); s != want[i] {
				t.Errorf("descriptor %d after replaces = %s, want %s", i, s, want[i])
			}
		}
	}
	check([]*Descriptor{one}, "example7.key_1_value_1.user_bkthomps 5/SECOND")
	check([]*Descriptor{two}, "example7.key_2_value_2.user_bkthomps 10/SECOND")
	check([]*Descriptor{one, two}, "nil", "example7.key_2_value_2.user_bkthomps 10/SECOND")
}

// TestUpstreamBasicConfig mirrors TestBasicConfig of upstream's
// test/config/config_test.go on test/config/basic_config.yaml.
func TestUpstreamBasicConfig(t *testing.T) {
	c := load(t, "upstream", "basic_config.yaml")
	checkMatches(t, c, []matchCase{
		{nil, "nil"},
		{ents("key1", "something"), "nil"},
		{ents("key1", "value1"), "nil"},
		{ents("key2", "value2", "subkey", "subvalue"), "nil"},
		{ents("key5", "value5", "subkey5", "subvalue"), "nil"},
		{ents("key1", "value1", "subkey1", "something"), "test-domain.key1_value1.subkey1 5/SECOND"},
		{ents("key1", "value1", "subkey1", "subvalue1"), "test-domain.key1_value1.subkey1_subvalue1 10/SECOND"},
		{ents("key2", "something"), "test-domain.key2 20/MINUTE"},
		{ents("key2", "value2"), "test-domain.key2_value2 30/MINUTE"},
		{ents("key2", "value3"), "nil"}, // a value without limit whitelists it
		{ents("key3", "foo"), "test-domain.key3 1/HOUR"},
		{ents("key4", "foo"), "test-domain.key4 1/DAY"},
		{ents("key5", "value5"), "test-domain.key5_value5 15/DAY"}, // limit and children
		{ents("key5", "value5", "subkey5", "subvalue5"), "test-domain.key5_value5.subkey5_subvalue5 25/DAY"},
		{ents("key6", "foo"), "test-domain.key6 unlimited"},
		{ents("key7", "unspecified_value"), "test-domain.key7 70/MINUTE"},
	})
	if d := c.Match(ents("key3", "foo")); d.Limit.Name != "" {
		t.Errorf("key3 name = %q, want none", d.Limit.Name)
	}
	if d := c.Match(ents("key4", "foo")); d.Limit.Name != "key4_rate_limit" {
		t.Errorf("key4 name = %q, want key4_rate_limit", d.Limit.Name)
	}
}

// TestUpstreamShadowMode mirrors TestShadowModeConfig.
func TestUpstreamShadowMode(t *testing.T) {
	checkMatches(t, load(t, "upstream", "shadowmode_config.yaml"), []matchCase{
		{ents("key1", "value1", "subkey1", "something"), "test-domain.key1_value1.subkey1 5/SECOND"},
		{ents("key1", "value1", "subkey1", "subvalue1"), "test-domain.key1_value1.subkey1_subvalue1 10/SECOND shadow"},
		{ents("key2", "something"), "test-domain.key2 20/MINUTE shadow"},
		{ents("key2", "value2"), "test-domain.key2_value2 30/MINUTE"},
	})
}

// TestUpstreamWildcard mirrors TestWildcardConfig.
func TestUpstreamWildcard(t *testing.T) {
	checkMatches(t, load(t, "upstream", "wildcard.yaml"), []matchCase{
		{ents("noVal", "foo1"), "test-domain.noVal 20/MINUTE"},
		{ents("wild", "foo1"), "test-domain.wild_foo* 20/MINUTE"},
		{ents("wild", "foo2"), "test-domain.wild_foo* 20/MINUTE"},
		{ents("nestedWild", "val1", "wild", "goo2"), "test-domain.nestedWild_val1.wild_goo* 20/MINUTE"},
		{ents("wild", "bar"), "nil"},
		{ents("noWild", "foo1"), "nil"},
		{ents("midWild", "barab"), "test-domain.midWild_bar*b 20/MINUTE"},
		{ents("midWild", "bar123b"), "test-domain.midWild_bar*b 20/MINUTE"},
		{ents("midWild", "barb"), "test-domain.midWild_bar*b 20/MINUTE"},
		{ents("midWild", "bara"), "nil"},
		{ents("midWild", "xbarb"), "nil"},
		{ents("multiWild", "foo123bar456baz"), "test-domain.multiWild_foo*bar*baz 10/MINUTE"},
		{ents("multiWild", "foobarbaz"), "test-domain.multiWild_foo*bar*baz 10/MINUTE"},
		{ents("multiWild", "foo123baz"), "nil"},
		{ents("multiWild", "bar456baz"), "nil"},
	})
}

// TestUpstreamMetadata: metadata is accepted and does not affect matching.
func TestUpstreamMetadata(t *testing.T) {
	checkMatches(t, load(t, "upstream", "metadata.yaml"), []matchCase{
		{ents("key1", "value1", "subkey1", "x"), "test-domain.key1_value1.subkey1 5/SECOND"},
		{ents("key2", "x"), "test-domain.key2 20/MINUTE"},
	})
}

// TestMatchOrder checks upstream's lookup order and its quirks, which Match
// keeps so that a request matches here what it matches upstream.
func TestMatchOrder(t *testing.T) {
	c := mustParse(t, "order.yaml", `domain: d
descriptors:
  - key: k
    rate_limit: {unit: second, requests_per_unit: 1}
  - key: k
    value: a*
    rate_limit: {unit: second, requests_per_unit: 2}
  - key: k
    value: ab*
    rate_limit: {unit: second, requests_per_unit: 3}
  - key: k
    value: abc
    rate_limit: {unit: second, requests_per_unit: 4}
  - key: w
    value: "*"
    rate_limit: {unit: second, requests_per_unit: 5}
  - key: foo
    value: bar
    rate_limit: {unit: second, requests_per_unit: 6}
  - key: star*
    rate_limit: {unit: second, requests_per_unit: 7}
  - key: p
    rate_limit: {unit: minute, requests_per_unit: 8}
    descriptors:
      - key: q
        rate_limit: {unit: minute, requests_per_unit: 9}
`)
	checkMatches(t, c, []matchCase{
		{ents("k", "abc"), "d.k_abc 4/SECOND"}, // exact first
		{ents("k", "abd"), "d.k_a* 2/SECOND"},  // then the first wildcard in file order
		{ents("k", "a*"), "d.k_a* 2/SECOND"},   // the pattern itself, exactly
		{ents("k", "zzz"), "d.k 1/SECOND"},     // then the key alone
		{ents("k", ""), "d.k 1/SECOND"},        // an empty value is a value like any other
		{ents("w", ""), "d.w_* 5/SECOND"},      // "*" matches none
		{ents("w", "anything"), "d.w_* 5/SECOND"},
		{ents("foo_bar", "x"), "d.foo_bar 6/SECOND"}, // key "foo_bar" falls back to composite "foo_bar"
		{ents("foo", "bar"), "d.foo_bar 6/SECOND"},
		{ents("start", "x"), "d.star* 7/SECOND"}, // "*" in a key: "start_x" matches "star*"
		{ents("p", "1"), "d.p 8/MINUTE"},
		{ents("p", "1", "q", "2"), "d.p.q 9/MINUTE"},
		{ents("p", "1", "q", "2", "r", "3"), "nil"}, // deeper than the tree
		{ents("k", "abc", "q", "2"), "nil"},         // k_abc has no children
		{ents("x", "1"), "nil"},
	})
	var zero Config
	var nilConfig *Config
	if zero.Match(ents("k", "abc")) != nil || nilConfig.Match(ents("k", "abc")) != nil {
		t.Error("the zero or nil Config matched")
	}
}

// clone copies the exported fields of a tree, as a caller building a Config
// by hand would: no index, no names.
func clone(list []*Descriptor) []*Descriptor {
	out := make([]*Descriptor, len(list))
	for i, d := range list {
		out[i] = &Descriptor{Key: d.Key, Value: d.Value, Wildcard: d.Wildcard, Limit: d.Limit, ShadowMode: d.ShadowMode,
			Replaces: d.Replaces, Descriptors: clone(d.Descriptors), Path: d.Path, Line: d.Line}
	}
	return out
}

// TestMatchWithoutIndex checks a hand-built Config matches as a parsed one:
// for every test config, and for entries built from its own keys and values
// and variants of them.
func TestMatchWithoutIndex(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, f := range files {
		c, err := Load(f)
		if err != nil {
			continue
		}
		hand := &Config{Domain: c.Domain, Descriptors: clone(c.Descriptors)}
		var values []string
		var walk func([]*Descriptor)
		walk = func(list []*Descriptor) {
			for _, d := range list {
				values = append(values, d.Key, d.Value, d.Value+"x", strings.ReplaceAll(d.Value, "*", "zz"))
				walk(d.Descriptors)
			}
		}
		walk(c.Descriptors)
		for depth := 1; depth <= 3; depth++ {
			for i := range values {
				entries := make([]Entry, depth)
				for j := range entries {
					entries[j] = Entry{values[(i+j*7)%len(values)], values[(i*3+j+1)%len(values)]}
				}
				if a, b := summary(c.Match(entries)), summary(hand.Match(entries)); a != b {
					t.Errorf("%s: Match(%v) = %s parsed, %s by hand", f, entries, a, b)
				}
				tried++
			}
		}
		walkPaths(c.Descriptors, nil, func(path []Entry, d *Descriptor) {
			if a, b := c.Match(path), hand.Match(path); summary(a) != summary(b) {
				t.Errorf("%s: Match(%v) = %s parsed, %s by hand", f, path, summary(a), summary(b))
			}
		})
	}
	if tried < 100 {
		t.Errorf("only %d lookups tried", tried)
	}
}

// walkPaths calls fn for every node with the entries naming it exactly.
func walkPaths(list []*Descriptor, above []Entry, fn func([]Entry, *Descriptor)) {
	for _, d := range list {
		path := append(above[:len(above):len(above)], Entry{d.Key, d.Value})
		fn(path, d)
		walkPaths(d.Descriptors, path, fn)
	}
}

// TestWildcardMatch checks the pattern matcher on its own, including a
// prefix and suffix that overlap in the value (upstream guards this with
// its total-length check).
func TestWildcardMatch(t *testing.T) {
	tests := []struct {
		pattern, value string
		want           bool
	}{
		{"a*", "a", true},
		{"a*", "abc", true},
		{"a*", "ba", false},
		{"*", "", true},
		{"*a", "ba", true},
		{"ab*ba", "aba", false}, // "ab" and "ba" overlap: too short
		{"ab*ba", "abba", true},
		{"ab*ba", "abxba", true},
		{"a*b*c", "abc", true},
		{"a*b*c", "acbc", true},
		{"a*b*c", "ac", false},
		{"a*b*c", "axxc", false},
		{"a**b", "ab", true},
		{"a*bb*bc", "abbbc", true}, // a, "", bb, "", bc
		{"a*bb*bc", "abbc", false},
		{"a*bb*bc", "abbxbc", true},
	}
	for _, tt := range tests {
		if got := wildcardMatch(strings.Split(tt.pattern, "*"), tt.value); got != tt.want {
			t.Errorf("wildcardMatch(%q, %q) = %v, want %v", tt.pattern, tt.value, got, tt.want)
		}
	}
}

// TestMatchConcurrent uses one Config from many goroutines; run with -race
// it checks that Match and RuleName only read.
func TestMatchConcurrent(t *testing.T) {
	c := load(t, "upstream", "basic_config.yaml")
	done := make(chan string)
	for g := range 8 {
		go func() {
			var last string
			for i := range 500 {
				d := c.Match(ents("key1", "value1", "subkey1", fmt.Sprint(g, i)))
				last = d.RuleName() + " " + CountKey(c.Domain, ents("key1", "value1"))
			}
			done <- last
		}()
	}
	for range 8 {
		if got := <-done; got != "test-domain.key1_value1.subkey1 test-domain|key1=value1" {
			t.Errorf("got %q", got)
		}
	}
}
