package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/internal/nodetest"
	"github.com/limiterd/limiterd/internal/promtest"
)

// deployPromtoolPath returns promtool, installing Debian's prometheus
// package for it when it is missing.
func deployPromtoolPath(t *testing.T) string {
	t.Helper()
	return deployNeed(t, "promtool", "prometheus")
}

// deployPromtoolRun runs promtool and fails the test on any error.
func deployPromtoolRun(t *testing.T, args ...string) string {
	t.Helper()
	out, err := deployRun("", nil, deployPromtoolPath(t), args...)
	if err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestPromtoolCheckRules: promtool accepts deploy/prometheus/alerts.yaml
// (its syntax, every expression through Prometheus's parser, the
// templates of the annotations).
func TestPromtoolCheckRules(t *testing.T) {
	out := deployPromtoolRun(t, "check", "rules", deployPath("prometheus", "alerts.yaml"))
	t.Logf("promtool check rules alerts.yaml:\n%s", out)
}

// TestPromtoolTestRules: alerts_test.yaml's unit tests pass: every alert
// fires on the series that should fire it, with its labels and its
// annotations rendered, and stays silent on those that should not.
func TestPromtoolTestRules(t *testing.T) {
	out := deployPromtoolRun(t, "test", "rules", deployPath("prometheus", "alerts_test.yaml"))
	t.Logf("promtool test rules alerts_test.yaml:\n%s", out)
}

// TestPromtoolTestRulesCatchAMissingAlert: the unit tests fail for each
// alert that is gone (here all renamed at once), so that they really
// expect every one.
func TestPromtoolTestRulesCatchAMissingAlert(t *testing.T) {
	dir := t.TempDir()
	alerts := deployRead(t, "prometheus", "alerts.yaml")
	names := deployAlertNames(t)
	for _, name := range names {
		alerts = strings.Replace(alerts, "- alert: "+name+"\n", "- alert: "+name+"Renamed\n", 1)
	}
	for file, content := range map[string]string{"alerts.yaml": alerts, "alerts_test.yaml": deployRead(t, "prometheus", "alerts_test.yaml")} {
		if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := deployRun(dir, nil, deployPromtoolPath(t), "test", "rules", "alerts_test.yaml")
	if err == nil {
		t.Fatalf("promtool test rules passed with every alert renamed:\n%s", out)
	}
	for _, name := range names {
		if !strings.Contains(out, "alertname: "+name+",") {
			t.Errorf("promtool test rules did not miss %s", name)
		}
	}
}

// deployAlertRule is one rule of alerts.yaml.
type deployAlertRule struct {
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

func deployAlertRules(t *testing.T) []deployAlertRule {
	t.Helper()
	var f struct {
		Groups []struct {
			Name  string            `yaml:"name"`
			Rules []deployAlertRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal([]byte(deployRead(t, "prometheus", "alerts.yaml")), &f); err != nil {
		t.Fatal(err)
	}
	var rules []deployAlertRule
	for _, g := range f.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("alerts.yaml has no rules")
	}
	return rules
}

func deployAlertNames(t *testing.T) []string {
	t.Helper()
	var names []string
	for _, r := range deployAlertRules(t) {
		names = append(names, r.Alert)
	}
	return names
}

// TestAlertRulesShape: every rule is an alert with a for: of its own (a
// blip pages no one), a severity of warning or critical, and a summary and
// a description that say what to do; names are unique.
func TestAlertRulesShape(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range deployAlertRules(t) {
		if r.Alert == "" || !strings.HasPrefix(r.Alert, "Limiterd") {
			t.Errorf("rule %q: want an alert named Limiterd...", r.Alert)
			continue
		}
		if seen[r.Alert] {
			t.Errorf("%s: twice", r.Alert)
		}
		seen[r.Alert] = true
		if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
			t.Errorf("%s: for: %q, want a duration", r.Alert, r.For)
		}
		if s := r.Labels["severity"]; s != "warning" && s != "critical" {
			t.Errorf("%s: severity %q, want warning or critical", r.Alert, s)
		}
		if len(r.Annotations["summary"]) < 20 || len(r.Annotations["description"]) < 100 {
			t.Errorf("%s: want a summary and a description of what to do: %q", r.Alert, r.Annotations)
		}
	}
}

// TestAlertTestsCoverEveryAlert: alerts_test.yaml has, for every alert, a
// case where it fires and one where it must not (an empty exp_alerts), and
// tests no alert that does not exist.
func TestAlertTestsCoverEveryAlert(t *testing.T) {
	var f struct {
		RuleFiles []string `yaml:"rule_files"`
		Tests     []struct {
			AlertRuleTests []struct {
				EvalTime  string           `yaml:"eval_time"`
				Alertname string           `yaml:"alertname"`
				ExpAlerts []map[string]any `yaml:"exp_alerts"`
			} `yaml:"alert_rule_test"`
		} `yaml:"tests"`
	}
	if err := yaml.Unmarshal([]byte(deployRead(t, "prometheus", "alerts_test.yaml")), &f); err != nil {
		t.Fatal(err)
	}
	if len(f.RuleFiles) != 1 || f.RuleFiles[0] != "alerts.yaml" {
		t.Errorf("rule_files %q: want alerts.yaml", f.RuleFiles)
	}
	fires, silent := map[string]int{}, map[string]int{}
	for _, tc := range f.Tests {
		for _, a := range tc.AlertRuleTests {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname]++
			} else {
				silent[a.Alertname]++
			}
		}
	}
	names := deployAlertNames(t)
	for _, n := range names {
		if fires[n] == 0 || silent[n] == 0 {
			t.Errorf("%s: %d cases where it fires, %d where it must not: want both", n, fires[n], silent[n])
		}
		delete(fires, n)
		delete(silent, n)
	}
	for n := range fires {
		t.Errorf("alerts_test.yaml tests %s, which alerts.yaml does not have", n)
	}
	for n := range silent {
		t.Errorf("alerts_test.yaml tests %s, which alerts.yaml does not have", n)
	}
	t.Logf("%d alerts, each with cases that fire and cases that do not", len(names))
}

// TestPromtoolCheckConfig: the example prometheus.yml is valid (promtool
// also checks the rule files it names, alerts.yaml), scrapes limiterd as
// job "limiterd", the job the alerts name.
func TestPromtoolCheckConfig(t *testing.T) {
	out := deployPromtoolRun(t, "check", "config", deployPath("prometheus", "prometheus.yml"))
	t.Logf("promtool check config prometheus.yml:\n%s", out)
	if !strings.Contains(out, "alerts.yaml") {
		t.Errorf("promtool checked no alerts.yaml: prometheus.yml should load it")
	}
	var cfg struct {
		ScrapeConfigs []struct {
			JobName     string `yaml:"job_name"`
			MetricsPath string `yaml:"metrics_path"`
		} `yaml:"scrape_configs"`
	}
	if err := yaml.Unmarshal([]byte(deployRead(t, "prometheus", "prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	for _, sc := range cfg.ScrapeConfigs {
		jobs = append(jobs, sc.JobName)
	}
	for _, r := range deployAlertRules(t) {
		for _, m := range regexp.MustCompile(`job="([^"]*)"`).FindAllStringSubmatch(r.Expr, -1) {
			if !deployContains(jobs, m[1]) {
				t.Errorf("%s names job %q; prometheus.yml scrapes %q", r.Alert, m[1], jobs)
			}
		}
	}
}

// deploySelectors returns, for every limiterd_ series an expression
// selects with literal label matchers (name{label="v"}, =~ too), the
// matchers: a matcher on a value no series has would select nothing.
func deploySelectors(expr string) map[string][][3]string {
	out := map[string][][3]string{}
	sel := regexp.MustCompile(`(limiterd_[a-z0-9_]+)\{([^}]*)\}`)
	matcher := regexp.MustCompile(`([a-z_]+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	for _, m := range sel.FindAllStringSubmatch(expr, -1) {
		for _, mm := range matcher.FindAllStringSubmatch(m[2], -1) {
			if strings.Contains(mm[3], "$") {
				continue // a Grafana variable
			}
			out[m[1]] = append(out[m[1]], [3]string{mm[1], mm[2], mm[3]})
		}
	}
	return out
}

// deployLabelValues returns, from scraped samples, each series name's
// label values: name -> label -> values.
func deployLabelValues(samples []promtest.Sample) map[string]map[string]map[string]bool {
	out := map[string]map[string]map[string]bool{}
	for _, s := range samples {
		if out[s.Name] == nil {
			out[s.Name] = map[string]map[string]bool{}
		}
		for l, v := range s.Labels {
			if out[s.Name][l] == nil {
				out[s.Name][l] = map[string]bool{}
			}
			out[s.Name][l][v] = true
		}
	}
	return out
}

// deployNameProblems returns every limiterd_ name in text that no live
// node exports, and every literal matcher on a label of limiterd's own
// (result, state, outcome, le...) that no live series satisfies: each
// alternative of a|b|c must be a value some series has.
func deployNameProblems(text string, series map[string]string, labels map[string]map[string]map[string]bool) []string {
	var problems []string
	names := deployMetricNames(text)
	if len(names) == 0 {
		problems = append(problems, "names no limiterd_ metric")
	}
	for _, n := range names {
		if _, ok := series[n]; !ok {
			problems = append(problems, "names "+n+", which no live limiterd exports")
		}
	}
	// Labels whose values are the site's, not limiterd's: a test file
	// makes them up.
	site := map[string]bool{"job": true, "instance": true, "peer": true, "rule": true, "limit": true, "cluster": true}
	literals := regexp.MustCompile(`^[a-zA-Z0-9_.+/:-]+(\|[a-zA-Z0-9_.+/:-]+)*$`)
	for name, ms := range deploySelectors(strings.ReplaceAll(text, `\"`, `"`)) {
		for _, m := range ms {
			label, op, val := m[0], m[1], m[2]
			if op == "!=" || op == "!~" || site[label] {
				continue
			}
			have := labels[name][label]
			var missing []string
			switch {
			case op == "=" || literals.MatchString(val):
				for _, v := range strings.Split(val, "|") {
					if op == "=" {
						v = val
					}
					if !have[v] {
						missing = append(missing, v)
					}
				}
			default:
				re, err := regexp.Compile("^(?:" + val + ")$")
				if err != nil {
					problems = append(problems, fmt.Sprintf("%s{%s%s%q}: %v", name, label, op, val, err))
					continue
				}
				found := false
				for v := range have {
					found = found || re.MatchString(v)
				}
				if !found {
					missing = append(missing, val)
				}
			}
			if len(missing) > 0 {
				var values []string
				for v := range have {
					values = append(values, v)
				}
				sort.Strings(values)
				problems = append(problems, fmt.Sprintf("%s{%s%s%q}: no live series has %s %q (it has %q)", name, label, op, val, label, missing, values))
			}
		}
	}
	sort.Strings(problems)
	return problems
}

// deployRules is the rule file of the live tests: limits small enough that
// a few checks reach a key's margin and its coordinator.
const deployRules = `rules:
  - name: default
    limit: 600
    window: 60s
  - name: api
    match: "api:*"
    limit: 5
    window: 1s
`

// deployLiveCluster starts two nodes (the harness gives each -grpc-addr,
// and -coordinate is on by default) and makes them export every series the
// deployment files use: checks allowed and denied, checks at the margin
// put to the coordinator, a gRPC call, bad requests, and sync between the
// peers (the per-peer series exist once a peer has been heard from).
func deployLiveCluster(t *testing.T) *nodetest.Cluster {
	t.Helper()
	c := nodetest.Start(t, nodetest.Config{Nodes: 2, Rules: []string{deployRules}})
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" sees both members alive", 20*time.Second, func() bool {
			m, err := p.Members()
			return err == nil && nodetest.CountState(m, "alive") == 2
		})
	}
	for i := range 40 {
		for _, p := range c.Procs {
			p.Check(t, "api:deploy-"+strconv.Itoa(i%4))
			p.Check(t, "client-"+strconv.Itoa(i))
		}
	}
	c.Procs[0].Get("/check") // a bad request: no key
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := c.Procs[0].RLS(t).ShouldRateLimit(ctx, deployCall("deploy")); err != nil {
		t.Fatalf("ShouldRateLimit: %v", err)
	}
	for _, p := range c.Procs {
		nodetest.Eventually(t, p.Name+" exports its peer's merge lag", 20*time.Second, func() bool {
			_, ok := p.Metrics(t).Value("limiterd_sync_merge_lag_seconds")
			return ok
		})
	}
	return c
}

// TestDeployMetricsExported: every limiterd_ metric alerts.yaml and the
// dashboard name is one a live node exports (a histogram's _bucket, _sum
// and _count count as its family's), and every label value they select
// literally (result=~"fallback_timeout|...", state=~"suspect|dead") is one
// live series carry.
func TestDeployMetricsExported(t *testing.T) {
	c := deployLiveCluster(t)
	series := map[string]string{}
	var samples []promtest.Sample
	for _, p := range c.Procs {
		types, s := deployFamilies(t, p)
		for name, fam := range deploySeriesNames(types) {
			series[name] = fam
		}
		samples = append(samples, s...)
	}
	var exported []string
	for name := range series {
		if strings.HasPrefix(name, "limiterd_") && series[name] == name {
			exported = append(exported, name)
		}
	}
	sort.Strings(exported)
	t.Logf("%d limiterd families exported: %v", len(exported), exported)
	labels := deployLabelValues(samples)
	for _, f := range [][2]string{{"prometheus", "alerts.yaml"}, {"prometheus", "alerts_test.yaml"}, {"grafana", "limiterd.json"}} {
		for _, p := range deployNameProblems(deployRead(t, f[0], f[1]), series, labels) {
			t.Errorf("%s %s", f[1], p)
		}
	}
	// And the check itself finds a misspelt metric and a label value that
	// does not exist.
	bogus := `rate(limiterd_check_error_total[5m]) + limiterd_coordinated_checks_total{result=~"granted|fallback"}`
	if p := deployNameProblems(bogus, series, labels); len(p) != 2 {
		t.Errorf("%s: want 2 problems, got %q", bogus, p)
	}

	// The other way round: a family no alert or panel shows is worth a look.
	used := map[string]bool{}
	for _, f := range []string{deployRead(t, "prometheus", "alerts.yaml"), deployRead(t, "grafana", "limiterd.json")} {
		for _, n := range deployMetricNames(f) {
			used[series[n]] = true
		}
	}
	for _, fam := range exported {
		if !used[fam] {
			t.Errorf("%s is exported but neither alerted on nor shown", fam)
		}
	}
}
