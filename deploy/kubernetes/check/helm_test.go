package check

import (
	"encoding/base64"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v4/pkg/chart/common"
	commonutil "helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	releaseutil "helm.sh/helm/v4/pkg/release/v1/util"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// chartDir is deploy/helm/limiterd, from this directory.
const chartDir = "../../helm/limiterd"

// chartNamespace is the namespace the tests install the chart into.
const chartNamespace = "limiterd"

// kubeVersion is the Kubernetes version the chart is rendered for. Helm's
// library alone assumes v1.20 (the helm binary is told its client-go's
// version when it is built), below the chart's kubeVersion.
func kubeVersion(t *testing.T) *common.KubeVersion {
	t.Helper()
	v, err := common.ParseKubeVersion("v1.34.0")
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// envoyRulesValues adds an envoyproxy/ratelimit configuration file beside
// limiterd's rules.
const envoyRulesValues = `
envoyRules:
  api.yaml: |
    domain: api
    descriptors:
      - key: remote_address
        rate_limit:
          unit: minute
          requests_per_unit: 600
`

// rendered is what helm template prints: the manifests and the notes.
type rendered struct{ manifest, notes string }

// values parses a values file as helm does for -f.
func values(t *testing.T, text string) map[string]any {
	t.Helper()
	v, err := loader.LoadValues(strings.NewReader(text))
	if err != nil {
		t.Fatalf("values %q: %v", text, err)
	}
	return v
}

// renderChartErr renders the chart as `helm template RELEASE chartDir -n
// limiterd -f values` does, with the packages that command uses, less its
// Kubernetes client (half of the compilation of this check): the chart's
// kubeVersion checked, the values coalesced with the chart's and checked
// against values.schema.json, every template rendered, NOTES.txt set
// apart, and the manifests put in install order (hooks refused: the chart
// has none).
func renderChartErr(t *testing.T, releaseName, text string) (rendered, error) {
	t.Helper()
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatalf("load %s: %v", chartDir, err)
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion(t)
	if !chartutil.IsCompatibleRange(ch.Metadata.KubeVersion, caps.KubeVersion.String()) {
		t.Fatalf("the chart's kubeVersion %s excludes %s", ch.Metadata.KubeVersion, caps.KubeVersion.String())
	}
	options := common.ReleaseOptions{Name: releaseName, Namespace: chartNamespace, Revision: 1, IsInstall: true}
	vals, err := commonutil.ToRenderValuesWithSchemaValidation(ch, values(t, text), options, caps, false)
	if err != nil {
		return rendered{}, err
	}
	files, err := engine.Engine{}.Render(ch, vals)
	if err != nil {
		return rendered{}, err
	}
	var r rendered
	for name, out := range files {
		if strings.HasSuffix(name, "/NOTES.txt") {
			r.notes = out
			delete(files, name)
		}
	}
	hooks, ms, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return rendered{}, err
	}
	if len(hooks) != 0 {
		t.Errorf("%d hooks: the chart has none", len(hooks))
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	r.manifest = b.String()
	return r, nil
}

func renderChart(t *testing.T, releaseName, text string) rendered {
	t.Helper()
	r, err := renderChartErr(t, releaseName, text)
	if err != nil {
		t.Fatalf("helm template %s with %q: %v", releaseName, text, err)
	}
	return r
}

// lintChart runs helm lint --strict with the values (lint.RunAll, which
// the command runs): any warning or error fails.
func lintChart(t *testing.T, text string) {
	t.Helper()
	l := lint.RunAll(chartDir, values(t, text), chartNamespace, lint.WithKubeVersion(kubeVersion(t)))
	for _, m := range l.Messages {
		if m.Severity > support.InfoSev {
			t.Errorf("helm lint: %v", m)
		} else {
			t.Logf("helm lint: %v", m)
		}
	}
}

// containerArgs returns the limiterd container's arguments.
func containerArgs(m manifests) []string { return m.sts.Spec.Template.Spec.Containers[0].Args }

// TestChart renders and lints the chart with its default values and with
// others, decodes every rendered document strictly (decode), checks that
// the objects agree (checkAgree, as for deploy/kubernetes/limiterd.yaml),
// and what each set of values must change.
func TestChart(t *testing.T) {
	cases := []struct {
		name, release, values string
		check                 func(t *testing.T, m manifests, notes string)
	}{
		{"default", "limiterd", "", func(t *testing.T, m manifests, notes string) {
			if *m.sts.Spec.Replicas != 3 || m.sts.Name != "limiterd" || m.sts.Spec.ServiceName != "limiterd-peers" {
				t.Errorf("StatefulSet %s of %d behind %s", m.sts.Name, *m.sts.Spec.Replicas, m.sts.Spec.ServiceName)
			}
			s := m.secrets["limiterd-gossip"]
			if s == nil {
				t.Fatalf("no Secret limiterd-gossip: %v", m.secrets)
			}
			// The key file: one line, the base64 of a 32-byte key.
			line, ok := strings.CutSuffix(string(s.Data["keys"]), "\n")
			key, err := base64.StdEncoding.DecodeString(line)
			if !ok || err != nil || len(key) != 32 {
				t.Errorf("the generated key file %q is not one line of base64 of 32 bytes (%v)", s.Data["keys"], err)
			}
			if m.serviceMonitor != nil || m.prometheusRule != nil {
				t.Error("a ServiceMonitor or PrometheusRule by default")
			}
			if m.pdb.Spec.MaxUnavailable == nil || m.pdb.Spec.MaxUnavailable.IntValue() != 1 {
				t.Errorf("PodDisruptionBudget maxUnavailable %v", m.pdb.Spec.MaxUnavailable)
			}
			if v, _ := flagValue(containerArgs(m), "grpc-addr"); v != "0.0.0.0:8081" {
				t.Errorf("-grpc-addr=%s", v)
			}
			if !strings.Contains(notes, "limiterd.limiterd.svc:8080/check") || !strings.Contains(notes, "random key") {
				t.Errorf("NOTES.txt:\n%s", notes)
			}
		}},
		{"existing secret", "limiterd", "gossip: {existingSecret: my-gossip, secretKey: key-file}", func(t *testing.T, m manifests, notes string) {
			if len(m.secrets) != 0 {
				t.Errorf("Secrets rendered beside an existing one: %v", m.secrets)
			}
			v := m.sts.Spec.Template.Spec.Volumes
			i := slices.IndexFunc(v, func(v corev1.Volume) bool { return v.Secret != nil })
			if i < 0 || v[i].Secret.SecretName != "my-gossip" {
				t.Errorf("no volume of Secret my-gossip: %+v", v)
			}
			if f, _ := flagValue(containerArgs(m), "gossip-key-file"); f != "/etc/limiterd/gossip/key-file" {
				t.Errorf("-gossip-key-file=%s", f)
			}
			if !strings.Contains(notes, "your Secret my-gossip") {
				t.Errorf("NOTES.txt:\n%s", notes)
			}
		}},
		{"ServiceMonitor and PrometheusRule", "limiterd", `
metrics:
  serviceMonitor: {enabled: true, labels: {release: prometheus}, interval: 15s}
  prometheusRule: {enabled: true, labels: {release: prometheus}}
`, func(t *testing.T, m manifests, notes string) {
			if m.serviceMonitor == nil || m.prometheusRule == nil {
				t.Fatal("no ServiceMonitor or no PrometheusRule")
			}
			if m.serviceMonitor.Labels["release"] != "prometheus" || m.prometheusRule.Labels["release"] != "prometheus" {
				t.Error("the labels for Prometheus's selectors are missing")
			}
			if ep := m.serviceMonitor.Spec.Endpoints; len(ep) != 1 || ep[0].Interval != "15s" {
				t.Errorf("endpoints %+v", ep)
			}
			checkPrometheusRule(t, m.prometheusRule)
		}},
		{"envoy rules", "limiterd", envoyRulesValues, func(t *testing.T, m manifests, notes string) {
			rules := flagValues(containerArgs(m), "rules")
			if want := []string{"/etc/limiterd/rules/api.yaml", "/etc/limiterd/rules/rules.yaml"}; !slices.Equal(rules, want) {
				t.Errorf("-rules %v, want %v", rules, want)
			}
			if !strings.HasPrefix(m.configMaps["limiterd-rules"].Data["api.yaml"], "domain: api\n") {
				t.Errorf("the envoy rule file is not in the ConfigMap: %v", m.configMaps["limiterd-rules"].Data)
			}
		}},
		{"replicas 5", "limiterd", "replicaCount: 5", func(t *testing.T, m manifests, notes string) {
			if *m.sts.Spec.Replicas != 5 {
				t.Errorf("%d replicas", *m.sts.Spec.Replicas)
			}
		}},
		{"another release, gRPC off", "edge", "grpc: {enabled: false}\nimage: {tag: dev}\nextraArgs: [-sync-interval=100ms]", func(t *testing.T, m manifests, notes string) {
			if m.sts.Name != "edge-limiterd" || m.services["edge-limiterd-peers"] == nil || m.secrets["edge-limiterd-gossip"] == nil {
				t.Errorf("names not derived from the release: %s, %v, %v", m.sts.Name, m.services, m.secrets)
			}
			if j, _ := flagValue(containerArgs(m), "join"); j != "edge-limiterd-peers:7946" {
				t.Errorf("-join=%s", j)
			}
			if v, ok := flagValue(containerArgs(m), "grpc-addr"); !ok || v != "" {
				t.Errorf("-grpc-addr=%q: gRPC must be turned off over the image's default", v)
			}
			for _, s := range m.services {
				for _, p := range s.Spec.Ports {
					if p.Name == "grpc" {
						t.Errorf("Service %s has a grpc port", s.Name)
					}
				}
			}
			c := m.sts.Spec.Template.Spec.Containers[0]
			if c.Image != "ghcr.io/limiterd/limiterd:dev" || !slices.Contains(c.Args, "-sync-interval=100ms") {
				t.Errorf("image %s, args %v", c.Image, c.Args)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lintChart(t, tc.values)
			r := renderChart(t, tc.release, tc.values)
			m := decode(t, []byte(r.manifest))
			checkAgree(t, m)
			tc.check(t, m, r.notes)
		})
	}
}

// TestChartRefusesBadValues: values.schema.json and the templates refuse
// values that would render a broken release.
func TestChartRefusesBadValues(t *testing.T) {
	for _, tc := range []struct{ name, values, want string }{
		{"misspelt key", "replicaCout: 5", "replicaCout"},
		{"misspelt nested key", "gossip: {existingSecrte: x}", "existingSecrte"},
		{"wrong type", "replicaCount: three", "replicaCount"},
		{"no replicas", "replicaCount: 0", "replicaCount"},
		{"unknown log level", "log: {level: verbose}", "level"},
		{"probe handler", "readinessProbe: {tcpSocket: {port: 8080}}", "readinessProbe"},
		{"extra arg not a flag", "extraArgs: [sync-interval=1s]", "extraArgs"},
		{"rule file in both", "envoyRules: {rules.yaml: 'domain: x'}", `"rules.yaml" is in both rules and envoyRules`},
		{"no rule file", "rules: null", "limiterd needs at least one rule file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := renderChartErr(t, "limiterd", tc.values)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("helm template with %q: error %v, want one naming %q", tc.values, err, tc.want)
			}
		})
	}
}

// checkServiceMonitor: the ServiceMonitor selects the client Service alone
// (the headless one has the same pods: each would be scraped twice), on a
// port that Service has, and gives its targets the job the alerts select.
func checkServiceMonitor(t *testing.T, m manifests, sm *monitoringv1.ServiceMonitor) {
	t.Helper()
	var selected []*corev1.Service
	for _, s := range m.services {
		if selects(sm.Spec.Selector.MatchLabels, s.Labels) {
			selected = append(selected, s)
		}
	}
	if len(selected) != 1 || selected[0].Spec.ClusterIP == corev1.ClusterIPNone {
		t.Fatalf("the ServiceMonitor selects %d Services; want the client Service alone", len(selected))
	}
	s := selected[0]
	if !slices.Contains(sm.Spec.NamespaceSelector.MatchNames, chartNamespace) {
		t.Errorf("the ServiceMonitor looks in namespaces %v", sm.Spec.NamespaceSelector.MatchNames)
	}
	if job := s.Labels[sm.Spec.JobLabel]; job != "limiterd" {
		t.Errorf("the targets' job is %q (label %q of Service %s); the alerts select job=\"limiterd\"", job, sm.Spec.JobLabel, s.Name)
	}
	for _, ep := range sm.Spec.Endpoints {
		if !slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) || ep.Path != "/metrics" {
			t.Errorf("endpoint %s %s: not /metrics on a port of Service %s", ep.Port, ep.Path, s.Name)
		}
	}
}

// checkPrometheusRule: the PrometheusRule holds deploy/prometheus/alerts.yaml's
// groups, every one of them and nothing else.
func checkPrometheusRule(t *testing.T, pr *monitoringv1.PrometheusRule) {
	t.Helper()
	data, err := os.ReadFile("../../prometheus/alerts.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []monitoringv1.RuleGroup `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(data, &file); err != nil {
		t.Fatalf("alerts.yaml: %v", err)
	}
	alerts := 0
	for _, g := range file.Groups {
		alerts += len(g.Rules)
	}
	if alerts < 20 || !reflect.DeepEqual(pr.Spec.Groups, file.Groups) {
		t.Errorf("the PrometheusRule's groups differ from alerts.yaml's %d groups of %d alerts", len(file.Groups), alerts)
	}
}
