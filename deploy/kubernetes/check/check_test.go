package check

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// repoRoot is the repository's root, from this directory.
const repoRoot = "../../.."

// manifests are the objects of deploy/kubernetes/limiterd.yaml, or of the
// Helm chart as helm template renders it.
type manifests struct {
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	sts             *appsv1.StatefulSet
	pdb             *policyv1.PodDisruptionBudget
	serviceMonitor  *monitoringv1.ServiceMonitor
	prometheusRule  *monitoringv1.PrometheusRule
	documentsByKind map[string]int
}

// load decodes every document of the file at path strictly into its API
// type.
func load(t *testing.T, path string) manifests {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return decode(t, data)
}

// documentSeparator is a line "---", which starts a YAML document.
var documentSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode decodes every document of data strictly into its API type: the
// Kubernetes types of k8s.io/api, and the prometheus-operator's own for
// ServiceMonitor and PrometheusRule (the API server validates those against
// the CRDs' schemas, which the operator generates from the same types). A
// document of comments alone (helm template leaves them) is skipped.
func decode(t *testing.T, data []byte) manifests {
	t.Helper()
	m := manifests{
		services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		secrets: map[string]*corev1.Secret{}, documentsByKind: map[string]int{},
	}
	for i, doc := range documentSeparator.Split(string(data), -1) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		if head == (struct{ APIVersion, Kind string }{}) {
			var v any
			if err := yaml.Unmarshal([]byte(doc), &v); err != nil || v != nil {
				t.Fatalf("document %d has no apiVersion and kind:\n%s", i, doc)
			}
			continue
		}
		strict := func(v any) {
			t.Helper()
			if err := yaml.UnmarshalStrict([]byte(doc), v); err != nil {
				t.Fatalf("document %d (%s %s): %v", i, head.APIVersion, head.Kind, err)
			}
		}
		m.documentsByKind[head.Kind]++
		switch head.APIVersion + " " + head.Kind {
		case "v1 Service":
			var s corev1.Service
			strict(&s)
			m.services[s.Name] = &s
		case "v1 ConfigMap":
			var c corev1.ConfigMap
			strict(&c)
			m.configMaps[c.Name] = &c
		case "v1 Secret":
			var s corev1.Secret
			strict(&s)
			m.secrets[s.Name] = &s
		case "apps/v1 StatefulSet":
			m.sts = new(appsv1.StatefulSet)
			strict(m.sts)
		case "policy/v1 PodDisruptionBudget":
			m.pdb = new(policyv1.PodDisruptionBudget)
			strict(m.pdb)
		case "monitoring.coreos.com/v1 ServiceMonitor":
			m.serviceMonitor = new(monitoringv1.ServiceMonitor)
			strict(m.serviceMonitor)
		case "monitoring.coreos.com/v1 PrometheusRule":
			m.prometheusRule = new(monitoringv1.PrometheusRule)
			strict(m.prometheusRule)
		default:
			t.Fatalf("document %d: %q %q is not a kind this check knows", i, head.APIVersion, head.Kind)
		}
	}
	for kind, n := range m.documentsByKind {
		if n > 1 && kind != "Service" && kind != "ConfigMap" && kind != "Secret" {
			t.Fatalf("%d documents of kind %s: one is expected", n, kind)
		}
	}
	if m.sts == nil || m.pdb == nil {
		t.Fatal("no StatefulSet or no PodDisruptionBudget")
	}
	return m
}

// selects reports whether every label of sel is in labels.
func selects(sel, labels map[string]string) bool {
	if len(sel) == 0 {
		return false
	}
	for k, v := range sel {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// flagValue returns the value of -name=value in args.
func flagValue(args []string, name string) (string, bool) {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			return v, true
		}
	}
	return "", false
}

// flagValues returns the values of every -name=value in args.
func flagValues(args []string, name string) []string {
	var vs []string
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "-"+name+"="); ok {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestManifestsAgree: the objects reference each other correctly, which
// no single object's schema can check.
func TestManifestsAgree(t *testing.T) {
	checkAgree(t, load(t, "../limiterd.yaml"))
}

// checkAgree checks that the objects of m reference each other correctly:
// selectors, ports, probes, -join, the volumes and the flags naming their
// files, the security settings; and, where m has them, the ServiceMonitor
// and the gossip key's Secret.
func checkAgree(t *testing.T, m manifests) {
	t.Helper()
	pod := &m.sts.Spec.Template
	labels := pod.Labels
	if m.sts.Spec.Selector == nil || !selects(m.sts.Spec.Selector.MatchLabels, labels) {
		t.Error("the StatefulSet's selector does not select its pods")
	}
	if m.pdb.Spec.Selector == nil || !selects(m.pdb.Spec.Selector.MatchLabels, labels) {
		t.Error("the PodDisruptionBudget does not select the pods")
	}
	headless := m.services[m.sts.Spec.ServiceName]
	if headless == nil || headless.Spec.ClusterIP != corev1.ClusterIPNone || !headless.Spec.PublishNotReadyAddresses {
		t.Fatalf("the StatefulSet's serviceName %q must be a headless Service publishing not-ready addresses", m.sts.Spec.ServiceName)
	}
	if m.sts.Spec.PodManagementPolicy != appsv1.ParallelPodManagement {
		t.Error("pods must start in parallel: one is ready only once it has joined another")
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("%d containers", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	ports := map[string]corev1.ContainerPort{}
	for _, p := range c.Ports {
		ports[p.Name] = p
	}
	for name, s := range m.services {
		if !selects(s.Spec.Selector, labels) {
			t.Errorf("Service %s does not select the pods", name)
		}
		for _, p := range s.Spec.Ports {
			cp, ok := ports[p.TargetPort.StrVal]
			if p.TargetPort.Type != intstr.String || !ok || cp.Protocol != p.Protocol || cp.ContainerPort != p.Port {
				t.Errorf("Service %s port %s: target %v is not a container port of the same protocol and number", name, p.Name, p.TargetPort)
			}
		}
	}
	for _, pr := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || ports[pr.HTTPGet.Port.StrVal].Name == "" {
			t.Errorf("a probe on no named container port: %+v", pr)
		}
	}
	if c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.LivenessProbe.HTTPGet.Path != "/healthz" {
		t.Error("readiness must be /readyz (joined and heard from every peer), liveness /healthz")
	}
	// The flags agree with the ports, the Services and the volumes.
	for flag, port := range map[string]string{"http-addr": "http", "grpc-addr": "grpc", "bind-addr": "gossip-tcp"} {
		v, _ := flagValue(c.Args, flag)
		if _, on := ports[port]; flag == "grpc-addr" && v == "" && !on {
			continue // Envoy's rate limit service turned off, and no port for it
		}
		if _, p, err := net.SplitHostPort(v); err != nil || p != fmt.Sprint(ports[port].ContainerPort) {
			t.Errorf("-%s=%s does not listen on container port %s", flag, v, port)
		}
	}
	join, _ := flagValue(c.Args, "join")
	if host, port, err := net.SplitHostPort(join); err != nil || host != headless.Name || port != fmt.Sprint(headless.Spec.Ports[0].Port) {
		t.Errorf("-join=%s must name the headless Service %s and its gossip port", join, headless.Name)
	}
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	for _, v := range pod.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			cm := m.configMaps[v.ConfigMap.Name]
			rules := flagValues(c.Args, "rules")
			if len(rules) == 0 {
				t.Error("no -rules")
			}
			for _, r := range rules {
				if cm == nil || cm.Data[filepath.Base(r)] == "" || filepath.Dir(r) != mounts[v.Name] {
					t.Errorf("-rules=%s is not a key of ConfigMap %s mounted at %s", r, v.ConfigMap.Name, mounts[v.Name])
				}
			}
			if cm != nil && len(cm.Data) != len(rules) {
				t.Errorf("ConfigMap %s has %d files, and %d -rules name them", v.ConfigMap.Name, len(cm.Data), len(rules))
			}
		case v.Secret != nil:
			keys, _ := flagValue(c.Args, "gossip-key-file")
			if filepath.Dir(keys) != mounts[v.Name] {
				t.Errorf("-gossip-key-file=%s is not in the Secret's mount %s", keys, mounts[v.Name])
			}
			// A Secret of the same manifests (the chart's own) must hold
			// the file; one they do not have is created by hand.
			if s := m.secrets[v.Secret.SecretName]; s != nil && len(s.Data[filepath.Base(keys)]) == 0 && s.StringData[filepath.Base(keys)] == "" {
				t.Errorf("Secret %s has no key %s for -gossip-key-file=%s", s.Name, filepath.Base(keys), keys)
			}
			for _, it := range v.Secret.Items {
				if it.Path == filepath.Base(keys) && it.Key != filepath.Base(keys) {
					t.Errorf("the Secret's key %s is mounted as %s", it.Key, it.Path)
				}
			}
		}
	}
	if len(m.secrets) > 1 || len(m.configMaps) != 1 {
		t.Errorf("%d Secrets, %d ConfigMaps: the gossip key's and the rules' are expected", len(m.secrets), len(m.configMaps))
	}
	if sm := m.serviceMonitor; sm != nil {
		checkServiceMonitor(t, m, sm)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
		t.Error("the container must run read-only, without privilege escalation or capabilities")
	}
	if ps := pod.Spec.SecurityContext; ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot {
		t.Error("the pod must run as non-root")
	}
}

// TestKustomization: kustomization.yaml lists the manifests that exist.
func TestKustomization(t *testing.T) {
	data, err := os.ReadFile("../kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		APIVersion string   `json:"apiVersion"`
		Kind       string   `json:"kind"`
		Resources  []string `json:"resources"`
	}
	if err := yaml.UnmarshalStrict(data, &k); err != nil {
		t.Fatal(err)
	}
	if k.Kind != "Kustomization" || len(k.Resources) == 0 {
		t.Fatalf("%+v", k)
	}
	for _, r := range k.Resources {
		if _, err := os.Stat(filepath.Join("..", r)); err != nil {
			t.Error(err)
		}
	}
}

// TestCommandLineStarts runs the container's command line with a real
// limiterd, as the first pod of the StatefulSet: the pod's name and
// address from the downward API, the rules and the gossip key from their
// volumes, and the headless Service's name resolving to the pod itself.
// Only the addresses change: loopback, with free ports. It runs
// deploy/kubernetes/limiterd.yaml's and the Helm chart's (helm_test.go),
// with limiterd's rules and with envoyproxy/ratelimit's beside them.
func TestCommandLineStarts(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "limiterd")
	// Built as the Dockerfile builds the image's (static, -trimpath): the
	// binary the pods run; and TestImage's build then finds every package
	// compiled in the Go build cache it mounts.
	build := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/limiterd")
	build.Dir = repoRoot
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	t.Run("limiterd.yaml", func(t *testing.T) {
		startCommandLine(t, bin, load(t, "../limiterd.yaml"), "limiterd-0")
	})
	for _, tc := range []struct{ name, release, values string }{
		{"chart", "limiterd", ""},
		{"chart with envoy rules", "edge", envoyRulesValues},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := decode(t, []byte(renderChart(t, tc.release, tc.values).manifest))
			startCommandLine(t, bin, m, m.sts.Name+"-0")
		})
	}
}

// startCommandLine runs the StatefulSet's container command line of m
// with bin as pod podName, its volumes' files in a temporary directory,
// and waits for it to be ready.
func startCommandLine(t *testing.T, bin string, m manifests, podName string) {
	c := m.sts.Spec.Template.Spec.Containers[0]
	dir := t.TempDir()
	// The files of each volume, as Kubernetes would mount them: every key
	// of the ConfigMap, the Secret's key (or a key of the test's when the
	// Secret is not part of the manifests).
	mounts := map[string]string{}
	for _, vm := range c.VolumeMounts {
		mounts[vm.Name] = vm.MountPath
	}
	files := map[string][]byte{}
	for _, v := range m.sts.Spec.Template.Spec.Volumes {
		switch {
		case v.ConfigMap != nil:
			for k, data := range m.configMaps[v.ConfigMap.Name].Data {
				files[path.Join(mounts[v.Name], k)] = []byte(data)
			}
		case v.Secret != nil:
			keys, _ := flagValue(c.Args, "gossip-key-file")
			if s := m.secrets[v.Secret.SecretName]; s != nil {
				files[keys] = s.Data[path.Base(keys)]
			} else {
				files[keys] = []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n")
			}
		}
	}
	local := map[string]string{}
	for p, data := range files {
		local[p] = filepath.Join(dir, strings.ReplaceAll(strings.TrimPrefix(p, "/"), "/", "_"))
		if err := os.WriteFile(local[p], data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	httpAddr, grpcAddr, gossip := free(), free(), free()
	replace := map[string]string{
		"http-addr": httpAddr, "grpc-addr": grpcAddr, "bind-addr": gossip, "advertise-addr": gossip,
		"join": gossip,
	}
	var args []string
	for _, a := range c.Args {
		name, value, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if v, ok := replace[name]; ok && value != "" {
			a = "-" + name + "=" + v
		}
		if name == "rules" || name == "gossip-key-file" {
			if local[value] == "" {
				t.Fatalf("%s: no volume has this file", a)
			}
			a = "-" + name + "=" + local[value]
		}
		a = strings.ReplaceAll(a, "$(POD_NAME)", podName)
		if strings.Contains(a, "$(") {
			t.Fatalf("%s: an environment variable the test does not set", a)
		}
		args = append(args, a)
	}
	var stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get("http://" + httpAddr + c.ReadinessProbe.HTTPGet.Path)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("limiterd %v not ready in 20 s:\n%s", args, stderr.String())
		}
	}
	if !strings.Contains(stderr.String(), `"node":"`+podName+`"`) {
		t.Errorf("the log does not name the node %s:\n%s", podName, stderr.String())
	}
	// Every rule file is loaded: the log's start line names them all.
	for _, r := range flagValues(args, "rules") {
		if !strings.Contains(stderr.String(), strconv.Quote(r)) {
			t.Errorf("the log does not name the rule file %s:\n%s", r, stderr.String())
		}
	}
}
