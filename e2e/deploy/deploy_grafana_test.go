package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// deployDashboard is the part of a Grafana dashboard the tests read.
type deployDashboard struct {
	Title         string                          `json:"title"`
	UID           string                          `json:"uid"`
	SchemaVersion int                             `json:"schemaVersion"`
	Panels        []deployPanel                   `json:"panels"`
	Templating    struct{ List []deployVariable } `json:"templating"`
}

type deployPanel struct {
	ID         int                      `json:"id"`
	Type       string                   `json:"type"`
	Title      string                   `json:"title"`
	Datasource *deployDatasource        `json:"datasource"`
	GridPos    struct{ H, W, X, Y int } `json:"gridPos"`
	Targets    []struct {
		Datasource *deployDatasource `json:"datasource"`
		Expr       string            `json:"expr"`
		RefID      string            `json:"refId"`
	} `json:"targets"`
}

type deployDatasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type deployVariable struct {
	Name       string            `json:"name"`
	Type       string            `json:"type"`
	Query      any               `json:"query"`
	Definition string            `json:"definition"`
	Datasource *deployDatasource `json:"datasource"`
}

func deployReadDashboard(t *testing.T) deployDashboard {
	t.Helper()
	var d deployDashboard
	if err := json.Unmarshal([]byte(deployRead(t, "grafana", "limiterd.json")), &d); err != nil {
		t.Fatalf("limiterd.json: %v", err)
	}
	return d
}

// deployQuery is one PromQL expression of the dashboard.
type deployQuery struct {
	where string // panel and target, for messages
	expr  string
}

// deployDashboardQueries returns every PromQL expression of the
// dashboard: the panels' targets, and the selectors of the variables'
// label_values() queries.
func deployDashboardQueries(t *testing.T, d deployDashboard) []deployQuery {
	t.Helper()
	var qs []deployQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			qs = append(qs, deployQuery{fmt.Sprintf("panel %d %q target %s", p.ID, p.Title, tg.RefID), tg.Expr})
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.+),\s*[a-zA-Z_][a-zA-Z0-9_]*\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		m := labelValues.FindStringSubmatch(v.Definition)
		if m == nil {
			t.Fatalf("variable %s: query %q is not label_values(SELECTOR, LABEL)", v.Name, v.Definition)
		}
		qs = append(qs, deployQuery{"variable " + v.Name, m[1]})
	}
	return qs
}

// deployGrafanaVars turns a Grafana expression into PromQL: its interval
// variables ($__rate_interval, $__interval, $__range) into a duration,
// and the template variables ($job, ${instance}) into a regexp matching
// anything, as "All" does.
func deployGrafanaVars(expr, interval string) string {
	expr = regexp.MustCompile(`\$__[a-z_]+|\$\{__[a-z_]+\}`).ReplaceAllString(expr, interval)
	return regexp.MustCompile(`\$[a-zA-Z_][a-zA-Z0-9_]*|\$\{[a-zA-Z_][a-zA-Z0-9_]*\}`).ReplaceAllString(expr, ".*")
}

// TestDashboardShape: the dashboard is one Grafana imports and
// provisions as it is: a recent schema, a Prometheus data source chosen by
// a variable (so no data source uid of ours is baked in), unique panel
// ids, panels on the 24-column grid, every query on the job and node
// variables, and a panel for each thing the issue asks to see.
func TestDashboardShape(t *testing.T) {
	d := deployReadDashboard(t)
	if d.SchemaVersion < 36 || d.Title == "" || d.UID == "" {
		t.Errorf("schemaVersion %d, title %q, uid %q: want a schema of Grafana 9 or later, a title and a uid", d.SchemaVersion, d.Title, d.UID)
	}
	vars := map[string]deployVariable{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v
	}
	if ds, ok := vars["datasource"]; !ok || ds.Type != "datasource" || ds.Query != "prometheus" {
		t.Errorf("want a variable datasource of type datasource, query prometheus: %+v", ds)
	}
	for _, name := range []string{"job", "instance"} {
		if v, ok := vars[name]; !ok || v.Type != "query" || v.Datasource == nil || v.Datasource.UID != "${datasource}" {
			t.Errorf("want a query variable %s on ${datasource}: %+v", name, v)
		}
	}
	ids := map[int]bool{}
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %d %q: gridPos %+v off the 24-column grid", p.ID, p.Title, g)
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Targets) == 0 {
			t.Errorf("panel %d: title %q, %d targets", p.ID, p.Title, len(p.Targets))
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" || p.Datasource.Type != "prometheus" {
			t.Errorf("panel %d %q: data source %+v, want the ${datasource} variable", p.ID, p.Title, p.Datasource)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if refs[tg.RefID] || tg.RefID == "" {
				t.Errorf("panel %d %q: refId %q empty or twice", p.ID, p.Title, tg.RefID)
			}
			refs[tg.RefID] = true
			if tg.Datasource == nil || tg.Datasource.UID != "${datasource}" {
				t.Errorf("panel %d %q target %s: data source %+v", p.ID, p.Title, tg.RefID, tg.Datasource)
			}
			for _, sel := range regexp.MustCompile(`limiterd_[a-z0-9_]+(\{[^}]*\})?`).FindAllStringSubmatch(tg.Expr, -1) {
				if !strings.Contains(sel[1], `job=~"$job"`) || !strings.Contains(sel[1], `instance=~"$instance"`) {
					t.Errorf("panel %d %q: %s is not filtered by $job and $instance", p.ID, p.Title, sel[0])
				}
			}
		}
	}
	for y := range 200 { // no two panels on one cell
		for x := range 24 {
			var on []string
			for _, p := range d.Panels {
				g := p.GridPos
				if x >= g.X && x < g.X+g.W && y >= g.Y && y < g.Y+g.H {
					on = append(on, p.Title)
				}
			}
			if len(on) > 1 {
				t.Fatalf("panels %q overlap at x=%d y=%d", on, x, y)
			}
		}
	}

	all := ""
	for _, q := range deployDashboardQueries(t, d) {
		all += q.expr + "\n"
	}
	for _, want := range []struct{ what, re string }{
		{"decisions by outcome", `sum by \(outcome\) \(rate\(limiterd_decisions_total`},
		{"check latency p50", `histogram_quantile\(0\.5, sum by \(le\) \(rate\(limiterd_check_duration_seconds_bucket`},
		{"check latency p99", `histogram_quantile\(0\.99, sum by \(le\) \(rate\(limiterd_check_duration_seconds_bucket`},
		{"worst-case ratio per rule", `max by \(rule, limit\) \(limiterd_rule_worst_case_ratio`},
		{"cluster members by state", `by \(state\) \(limiterd_cluster_members`},
		{"sync traffic", `rate\(limiterd_sync_messages_total`},
		{"sync bytes", `rate\(limiterd_sync_bytes_total`},
		{"coordinator checks", `sum by \(result\) \(rate\(limiterd_coordinated_checks_total`},
		{"coordinator fallbacks", `limiterd_coordinated_checks_total\{[^}]*result=~"fallback`},
		{"coordinator wait p99", `histogram_quantile\(0\.99, sum by \(le\) \(rate\(limiterd_coordinator_wait_seconds_bucket`},
		{"untracked keys", `rate\(limiterd_untracked_checks_total`},
		{"fail-open errors", `rate\(limiterd_check_errors_total`},
		{"gRPC requests by result", `sum by \(result\) \(rate\(limiterd_grpc_requests_total`},
		{"reload status", `limiterd_rules_last_reload_successful`},
		{"deltas past the delivery grace", `rate\(limiterd_sync_late_deltas_total`},
		{"sync delta delay p99", `histogram_quantile\(0\.99, sum by \(instance, le\) \(rate\(limiterd_sync_delta_delay_seconds_bucket`},
	} {
		if !regexp.MustCompile(want.re).MatchString(all) {
			t.Errorf("no panel shows %s (no query matches %s)", want.what, want.re)
		}
	}
}

// deployParse writes the expressions into a rule file, one recording rule
// each, and runs promtool check rules on it: Prometheus's own parser.
func deployParse(t *testing.T, exprs []string) (string, error) {
	t.Helper()
	type rule struct {
		Record string `json:"record"`
		Expr   string `json:"expr"`
	}
	var rules []rule
	for i, e := range exprs {
		rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: e})
	}
	// JSON is YAML: no quoting of the expressions to get wrong.
	b, err := json.Marshal(map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "dashboard-queries.yaml")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return deployRun("", nil, deployPromtoolPath(t), "check", "rules", path)
}

// TestDashboardQueriesParse: every expression of the dashboard, with the
// Grafana variables replaced, goes through Prometheus's own parser, and a
// broken one would not.
func TestDashboardQueriesParse(t *testing.T) {
	qs := deployDashboardQueries(t, deployReadDashboard(t))
	var exprs []string
	for _, q := range qs {
		exprs = append(exprs, deployGrafanaVars(q.expr, "5m"))
	}
	out, err := deployParse(t, exprs)
	if err != nil {
		for _, q := range qs {
			t.Logf("%s: %s", q.where, q.expr)
		}
		t.Fatalf("promtool check rules on the dashboard's %d queries: %v\n%s", len(qs), err, out)
	}
	t.Logf("promtool check rules: %d dashboard queries parsed:\n%s", len(qs), out)

	broken := strings.Replace(exprs[0], "(", "", 1)
	if out, err := deployParse(t, []string{broken}); err == nil {
		t.Fatalf("promtool accepted %q:\n%s", broken, out)
	}
}
