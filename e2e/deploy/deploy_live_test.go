package deploy

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// deployPromServer is a real Prometheus of the test's.
type deployPromServer struct {
	addr string
	hc   *http.Client
}

// deployStartPrometheus runs Prometheus with deploy/prometheus/prometheus.yml
// as an operator would install it beside alerts.yaml, pointed at the
// cluster's nodes, scraping and evaluating every second, without an
// Alertmanager; it is stopped when the test ends.
func deployStartPrometheus(t *testing.T, c *nodetest.Cluster) *deployPromServer {
	t.Helper()
	bin := deployNeed(t, "prometheus", "prometheus")
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(deployRead(t, "prometheus", "prometheus.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["global"] = map[string]any{"scrape_interval": "1s", "evaluation_interval": "1s"}
	delete(cfg, "alerting")
	var targets []string
	for _, p := range c.Procs {
		targets = append(targets, p.HTTP)
	}
	found := false
	for _, sc := range cfg["scrape_configs"].([]any) {
		sc := sc.(map[string]any)
		if sc["job_name"] != "limiterd" {
			continue
		}
		found = true
		sc["scrape_timeout"] = "1s"
		statics := sc["static_configs"].([]any)
		statics[0].(map[string]any)["targets"] = targets
		sc["static_configs"] = statics[:1]
	}
	if !found {
		t.Fatal("prometheus.yml has no job limiterd")
	}
	dir := t.TempDir()
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{"prometheus.yml": b, "alerts.yaml": []byte(deployRead(t, "prometheus", "alerts.yaml"))} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := &deployPromServer{addr: fmt.Sprintf("127.0.0.1:%d", nodetest.FreePort(t)), hc: c.HTTP}
	out := &nodetest.LockedBuffer{}
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+s.addr, "--log.level=warn")
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("prometheus output:\n%s", deployTail([]byte(out.String())))
		}
	})
	nodetest.Eventually(t, "prometheus ready", 30*time.Second, func() bool {
		select {
		case <-exited:
			t.Fatalf("prometheus exited:\n%s", out.String())
		default:
		}
		code, _, err := nodetest.Get(s.hc, "http://"+s.addr+"/-/ready")
		return err == nil && code == 200
	})
	return s
}

// api GETs a path of Prometheus's HTTP API and decodes its data.
func (s *deployPromServer) api(t *testing.T, path string, data any) {
	t.Helper()
	code, body, err := nodetest.Get(s.hc, "http://"+s.addr+path)
	if err != nil || code != 200 {
		t.Fatalf("prometheus %s: %d %v\n%s", path, code, err, body)
	}
	var r struct {
		Status string          `json:"status"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &r); err != nil || r.Status != "success" {
		t.Fatalf("prometheus %s: %v\n%s", path, err, body)
	}
	if err := json.Unmarshal(r.Data, data); err != nil {
		t.Fatalf("prometheus %s: %v\n%s", path, err, body)
	}
}

// query returns how many series an instant query gives.
func (s *deployPromServer) query(t *testing.T, q string) int {
	t.Helper()
	var d struct {
		Result []json.RawMessage `json:"result"`
	}
	s.api(t, "/api/v1/query?query="+url.QueryEscape(q), &d)
	return len(d.Result)
}

type deployPromAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

func (s *deployPromServer) alerts(t *testing.T) []deployPromAlert {
	t.Helper()
	var d struct {
		Alerts []deployPromAlert `json:"alerts"`
	}
	s.api(t, "/api/v1/alerts", &d)
	return d.Alerts
}

// TestDeployLivePrometheus: a real Prometheus, configured by
// prometheus.yml and alerts.yaml, scrapes a live two-node cluster. Every
// alert rule evaluates without error, none is pending or firing on the
// healthy cluster, every dashboard query returns series, and a rule file
// refused on SIGHUP makes LimiterdRulesReloadFailed pending for that node.
func TestDeployLivePrometheus(t *testing.T) {
	c := deployLiveCluster(t)
	prom := deployStartPrometheus(t, c)
	nodetest.Eventually(t, "both nodes scraped", 30*time.Second, func() bool {
		return prom.query(t, `up{job="limiterd"} == 1`) == 2
	})

	// Rates need two scrapes in their range: ask until every query has
	// series, then name those that never got any.
	qs := deployDashboardQueries(t, deployReadDashboard(t))
	empty := func() []string {
		var out []string
		for _, q := range qs {
			if prom.query(t, deployGrafanaVars(q.expr, "1m")) == 0 {
				out = append(out, q.where+": "+q.expr)
			}
		}
		return out
	}
	deadline := time.Now().Add(30 * time.Second)
	for e := empty(); len(e) > 0; e = empty() {
		if time.Now().After(deadline) {
			t.Fatalf("dashboard queries with no series from a live cluster:\n%s", strings.Join(e, "\n"))
		}
		time.Sleep(time.Second)
	}
	t.Logf("all %d dashboard queries return series", len(qs))

	type rule struct {
		Name           string `json:"name"`
		Health         string `json:"health"`
		LastError      string `json:"lastError"`
		LastEvaluation string `json:"lastEvaluation"`
	}
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []rule `json:"rules"`
		} `json:"groups"`
	}
	nodetest.Eventually(t, "every alert rule evaluated", 30*time.Second, func() bool {
		prom.api(t, "/api/v1/rules?type=alert", &rules)
		n := 0
		for _, g := range rules.Groups {
			for _, r := range g.Rules {
				if r.Health == "unknown" || strings.HasPrefix(r.LastEvaluation, "0001-") {
					return false
				}
				n++
			}
		}
		return n == len(deployAlertNames(t))
	})
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if r.Health != "ok" {
				t.Errorf("%s: health %s: %s", r.Name, r.Health, r.LastError)
			}
		}
	}
	var active []string
	for _, a := range prom.alerts(t) {
		active = append(active, fmt.Sprintf("%s %s %v", a.Labels["alertname"], a.State, a.Labels))
	}
	sort.Strings(active)
	if len(active) > 0 {
		t.Errorf("alerts on a healthy cluster:\n%s", strings.Join(active, "\n"))
	}

	// An invalid rule file: node-0 keeps its rules and reports it.
	if err := os.WriteFile(c.Rules, []byte("rules:\n  - name: default\n    limit: -5\n    window: 60s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := c.Procs[0].Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, "LimiterdRulesReloadFailed pending", 30*time.Second, func() bool {
		for _, a := range prom.alerts(t) {
			if a.Labels["alertname"] == "LimiterdRulesReloadFailed" && a.Labels["instance"] == c.Procs[0].HTTP &&
				a.Labels["severity"] == "warning" && a.Labels["job"] == "limiterd" && a.State == "pending" {
				return true
			}
		}
		return false
	})
}
