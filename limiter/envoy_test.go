package limiter

import (
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/limiterd/limiterd/limiter/envoyrules"
)

// envoyFile is the path of an Envoy test file of package envoyrules.
func envoyFile(name string) string { return filepath.Join("envoyrules", "testdata", name) }

func TestParseEnvoyFile(t *testing.T) {
	type want struct {
		name   string
		limit  int64
		window time.Duration
		shadow bool
		line   int
	}
	day := 24 * time.Hour
	tests := []struct {
		file   string
		domain string
		rules  []want
	}{
		{"readme/example1.yaml", "mongo_cps", []want{
			{"envoy:mongo_cps:mongo_cps.database_users", 500, time.Second, false, 5},
			{"envoy:mongo_cps:mongo_cps.database_default", 500, time.Second, false, 11},
		}},
		{"readme/example2.yaml", "messaging", []want{
			// The parent node has no limit: only its child is a rule.
			{"envoy:messaging:messaging.message_type_marketing.to_number", 5, day, false, 9},
			{"envoy:messaging:messaging.to_number", 100, day, false, 15},
		}},
		{"readme/example3.yaml", "edge_proxy_per_ip", []want{
			// The blocked address (requests_per_unit: 0) is not counted.
			{"envoy:edge_proxy_per_ip:edge_proxy_per_ip.remote_address", 10, time.Second, false, 5},
		}},
		{"upstream/shadowmode_config.yaml", "test-domain", []want{
			{"envoy:test-domain:test-domain.key1_value1.subkey1", 5, time.Second, false, 10},
			{"envoy:test-domain:test-domain.key1_value1.subkey1_subvalue1", 10, time.Second, true, 16},
			{"envoy:test-domain:test-domain.key2", 20, time.Minute, true, 24},
			{"envoy:test-domain:test-domain.key2_value2", 30, time.Minute, false, 30},
		}},
		{"upstream/basic_config.yaml", "test-domain", []want{
			{"envoy:test-domain:test-domain.key1_value1.subkey1", 5, time.Second, false, 10},
			{"envoy:test-domain:test-domain.key1_value1.subkey1_subvalue1", 10, time.Second, false, 16},
			{"envoy:test-domain:test-domain.key2", 20, time.Minute, false, 23},
			{"envoy:test-domain:test-domain.key2_value2", 30, time.Minute, false, 29},
			{"envoy:test-domain:test-domain.key3", 1, time.Hour, false, 39},
			{"envoy:test-domain:key4_rate_limit", 1, day, false, 44}, // its rate_limit name
			{"envoy:test-domain:test-domain.key5_value5", 15, day, false, 50},
			{"envoy:test-domain:test-domain.key5_value5.subkey5_subvalue5", 25, day, false, 56},
			// key6 is unlimited: not counted.
			{"envoy:test-domain:test-domain.key7", 70, time.Minute, false, 68},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			path := envoyFile(tt.file)
			rs, err := Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if rs.Source != path || len(rs.Envoy) != 1 || rs.Envoy[0].Domain != tt.domain {
				t.Fatalf("Source %q, %d Envoy configs; want %q and one for %q", rs.Source, len(rs.Envoy), path, tt.domain)
			}
			if len(rs.Rules) != len(tt.rules) {
				t.Fatalf("%d rules, want %d: %+v", len(rs.Rules), len(tt.rules), rs.Rules)
			}
			for i, w := range tt.rules {
				r := rs.Rules[i]
				wantSpec := LimitSpec{Policy: w.name, Limit: w.limit, Window: w.window, Slices: DefaultSlices}
				if r.Name != w.name || r.Match != "" || !r.ByName || r.Shadow != w.shadow || r.Line != w.line ||
					len(r.Limits) != 1 || r.Limits[0] != wantSpec {
					t.Errorf("rule %d = %+v; want %+v", i, r, w)
				}
			}
			// The names are those a frontend computes from the Config.
			var names []string
			var walk func([]*envoyrules.Descriptor)
			walk = func(list []*envoyrules.Descriptor) {
				for _, d := range list {
					if d.Limit != nil && !d.Limit.Unlimited && !d.Limit.DeniesAll() {
						names = append(names, EnvoyRuleName(tt.domain, d))
					}
					walk(d.Descriptors)
				}
			}
			walk(rs.Envoy[0].Descriptors)
			for i, n := range names {
				if n != rs.Rules[i].Name {
					t.Errorf("EnvoyRuleName of node %d = %q, rule %q", i, n, rs.Rules[i].Name)
				}
			}
		})
	}
}

func TestParseEnvoyWithoutCountedLimits(t *testing.T) {
	rs, err := Parse("deny.yaml", []byte("domain: d\ndescriptors:\n  - key: a\n    rate_limit: {unit: second, requests_per_unit: 0}\n  - key: b\n    rate_limit: {unlimited: true}\n  - key: c\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs.Rules) != 0 || len(rs.Envoy) != 1 {
		t.Fatalf("%d rules and %d configs, want 0 and 1", len(rs.Rules), len(rs.Envoy))
	}
	l, err := New(newCounter(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	if l.Envoy("d") != rs.Envoy[0] {
		t.Error("Envoy(\"d\") is not the parsed config")
	}
	var d Decision
	if err := l.Check(at(0), Request{Key: "k", Hits: 1}, &d); err != nil || !d.Allowed || d.Rule != "" {
		t.Errorf("Check by key: %+v, %v; want allowed by no rule", d, err)
	}
}

func TestParseEnvoyErrors(t *testing.T) {
	tests := []struct {
		file string
		text string
	}{
		{"upstream/bad_limit_unit.yaml", "bad_limit_unit.yaml:"},
		{"upstream/duplicate_key.yaml", "duplicate_key.yaml:"},
		{"upstream/misspelled_key.yaml", "misspelled_key.yaml:"},
		{"upstream/unlimited_with_unit.yaml", "unlimited_with_unit.yaml:"},
		{"upstream/share_threshold.yaml", "share_threshold.yaml:"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			rs, err := Load(envoyFile(tt.file))
			if rs != nil || !errors.Is(err, ErrInvalidRules) || !errors.Is(err, envoyrules.ErrInvalidConfig) {
				t.Fatalf("Load = %v, %v; want an error matching ErrInvalidRules and envoyrules.ErrInvalidConfig", rs, err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "limiter: invalid rules: ") || strings.Contains(msg, "envoyrules: invalid config") || !strings.Contains(msg, tt.text) {
				t.Errorf("message %q: want one prefix and the file's position %q", msg, tt.text)
			}
		})
	}
}

// TestEnvoyRuleName pins the names: plain where the domain allows, else
// sanitised with a hash, always valid and distinct for distinct inputs.
func TestEnvoyRuleName(t *testing.T) {
	named := func(n string) *envoyrules.Descriptor {
		return &envoyrules.Descriptor{Key: "k", Limit: &envoyrules.RateLimit{Name: n}}
	}
	long := strings.Repeat("d", 100)
	tests := []struct {
		domain, node, want string
	}{
		{"messaging", "msg.to_number", "envoy:messaging:msg.to_number"},
		{"a", "b:c", "envoy:a:b:c"},
		// A ":" in the domain would make "a:b" + "c" the name of "a" + "b:c".
		{"a:b", "c", "envoy::a_b:c-f1bb0ca6"},
		{"edge proxy", "n", "envoy::edge_proxy:n-ea26c54e"},
		{"edge\tproxy", "n", "envoy::edge_proxy:n-d94e6fbc"},
		{"héllo", "n", "envoy::h__llo:n-3ed95bcd"},
		{"", "n", "envoy:::n-0d84902c"},
		{strings.Repeat("d", 60), strings.Repeat("x", 60), "envoy:" + strings.Repeat("d", 60) + ":" + strings.Repeat("x", 60)},
		// Too long: cut to 128 bytes with the hash.
		{long, strings.Repeat("x", 40), "envoy::" + long + ":" + strings.Repeat("x", 11) + "-ea3de8b6"},
	}
	seen := make(map[string]int)
	for i, tt := range tests {
		got := EnvoyRuleName(tt.domain, named(tt.node))
		if got != tt.want {
			t.Errorf("EnvoyRuleName(%q, %q) = %q, want %q", tt.domain, tt.node, got, tt.want)
		}
		if msg := checkRuleName(got); msg != "" {
			t.Errorf("EnvoyRuleName(%q, %q) = %q: not a valid rule name: %s", tt.domain, tt.node, got, msg)
		}
		if again := EnvoyRuleName(tt.domain, named(tt.node)); again != got {
			t.Errorf("EnvoyRuleName(%q, %q) not deterministic: %q then %q", tt.domain, tt.node, got, again)
		}
		if j, dup := seen[got]; dup {
			t.Errorf("cases %d and %d share the name %q", j, i, got)
		}
		seen[got] = i
	}
}

// TestCheckEnvoyRule decides Envoy requests as the frontend will: Match on
// the Config, then Check with the node's rule and CountKey, so each request
// descriptor value counts apart, and a key alone never reaches the rule.
func TestCheckEnvoyRule(t *testing.T) {
	rs, err := Load(envoyFile("readme/example2.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(newCounter(t), rs)
	if err != nil {
		t.Fatal(err)
	}
	cfg := l.Envoy("messaging")
	if cfg == nil || l.Envoy("other") != nil {
		t.Fatalf("Envoy(messaging) = %v, Envoy(other) = %v", cfg, l.Envoy("other"))
	}
	check := func(ms int64, entries ...envoyrules.Entry) Decision {
		t.Helper()
		node := cfg.Match(entries)
		if node == nil {
			t.Fatalf("no node for %v", entries)
		}
		req := Request{Key: envoyrules.CountKey(cfg.Domain, entries), Rule: EnvoyRuleName(cfg.Domain, node), Hits: 1}
		var d Decision
		if err := l.Check(at(ms), req, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	marketing := func(to string) []envoyrules.Entry {
		return []envoyrules.Entry{{Key: "message_type", Value: "marketing"}, {Key: "to_number", Value: to}}
	}
	const rule5 = "envoy:messaging:messaging.message_type_marketing.to_number"
	for i := range 5 {
		if d := check(int64(i), marketing("111")...); !d.Allowed || d.Rule != rule5 || d.Limits[0].Remaining != int64(4-i) || d.Limits[0].Policy != rule5 {
			t.Fatalf("marketing to 111, %d: %+v", i, d)
		}
	}
	if d := check(10, marketing("111")...); d.Allowed {
		t.Errorf("6th marketing message to 111 in a day: %+v, want denied", d)
	}
	if d := check(11, marketing("222")...); !d.Allowed || d.Limits[0].Remaining != 4 {
		t.Errorf("marketing to 222: %+v, want its own count", d)
	}
	// The other node, 100 a day per number, counts apart.
	if d := check(12, envoyrules.Entry{Key: "to_number", Value: "111"}); !d.Allowed || d.Rule != "envoy:messaging:messaging.to_number" || d.Limits[0].Remaining != 99 {
		t.Errorf("to_number 111: %+v", d)
	}
	// By key alone, ByName rules govern nothing: there is no default rule.
	var d Decision
	if err := l.Check(at(13), Request{Key: envoyrules.CountKey("messaging", marketing("111")), Hits: 1}, &d); err != nil || !d.Allowed || d.Rule != "" {
		t.Errorf("by key: %+v, %v; want no rule", d, err)
	}
	if b := l.Bounds(); len(b) != 2 || b[0].Rule != rule5 || b[0].Limit != 5 || b[0].Window != 24*time.Hour || b[0].WorstCase < 5 {
		t.Errorf("Bounds = %+v, want both Envoy limits", b)
	}
}

// TestSetRulesSwapsEnvoy checks that SetRules replaces the Envoy configs
// together with the rules made from them, and that readers never see the
// one without the other.
func TestSetRulesSwapsEnvoy(t *testing.T) {
	parse := func(domain string) *RuleSet {
		rs, err := Merge(
			mustParse(t, "rules:\n  - name: default\n    limit: 5\n    window: 1s\n"),
			mustParseAs(t, domain+".yaml", "domain: "+domain+"\ndescriptors:\n  - key: user\n    rate_limit: {unit: second, requests_per_unit: 3}\n"),
		)
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	one, two := parse("one"), parse("two")
	l, err := New(newCounter(t), one)
	if err != nil {
		t.Fatal(err)
	}
	ruleOf := func(domain string) string { return "envoy:" + domain + ":" + domain + ".user" }
	state := func() (env1, env2 bool, rule1, rule2 error) {
		var d Decision
		rule1 = l.Check(at(0), Request{Key: "k", Rule: ruleOf("one"), Hits: 1, Peek: true}, &d)
		rule2 = l.Check(at(0), Request{Key: "k", Rule: ruleOf("two"), Hits: 1, Peek: true}, &d)
		return l.Envoy("one") != nil, l.Envoy("two") != nil, rule1, rule2
	}
	if e1, e2, r1, r2 := state(); !e1 || e2 || r1 != nil || !errors.Is(r2, ErrUnknownRule) {
		t.Fatalf("with one: Envoy %v %v, rules %v %v", e1, e2, r1, r2)
	}
	if err := l.SetRules(two); err != nil {
		t.Fatal(err)
	}
	if e1, e2, r1, r2 := state(); e1 || !e2 || !errors.Is(r1, ErrUnknownRule) || r2 != nil {
		t.Fatalf("with two: Envoy %v %v, rules %v %v", e1, e2, r1, r2)
	}
	if l.Envoy("two") != two.Envoy[0] {
		t.Error("Envoy(two) is not the config of the set in force")
	}
	// A rejected set leaves both in force.
	if err := l.SetRules(&RuleSet{Envoy: []*envoyrules.Config{two.Envoy[0], two.Envoy[0]}}); err == nil {
		t.Fatal("SetRules accepted two configs of one domain")
	}
	if e1, e2, _, r2 := state(); e1 || !e2 || r2 != nil {
		t.Fatalf("after a rejected set: Envoy %v %v, rule %v", e1, e2, r2)
	}

	// Concurrently: each compiled state a reader loads holds the rules of
	// exactly the configs it holds.
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for i := range 200 {
			if err := l.SetRules([]*RuleSet{one, two}[i%2]); err != nil {
				t.Error(err)
			}
		}
		close(stop)
	})
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				cp := l.rules.Load()
				for _, domain := range []string{"one", "two"} {
					_, hasEnvoy := cp.envoy[domain]
					_, hasRule := cp.byName[ruleOf(domain)]
					if hasEnvoy != hasRule {
						t.Errorf("a state with Envoy(%s) %v and its rule %v", domain, hasEnvoy, hasRule)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

func mustParseAs(t testing.TB, source, data string) *RuleSet {
	t.Helper()
	rs, err := Parse(source, []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	return rs
}
