package check

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// manifests are the objects of deploy/kubernetes/limiterd.yaml.
type manifests struct {
	services   map[string]*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	sts        *appsv1.StatefulSet
	pdb        *policyv1.PodDisruptionBudget
}

// load decodes every document strictly into its API type.
func load(t *testing.T, path string) manifests {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{}}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var head struct{ APIVersion, Kind string }
		if err := yaml.Unmarshal(doc, &head); err != nil {
			t.Fatalf("document %d: %v", i, err)
		}
		strict := func(v any) {
			t.Helper()
			if err := yaml.UnmarshalStrict(doc, v); err != nil {
				t.Fatalf("document %d (%s %s): %v", i, head.APIVersion, head.Kind, err)
			}
		}
		switch head.APIVersion + " " + head.Kind {
		case "v1 Service":
			var s corev1.Service
			strict(&s)
			m.services[s.Name] = &s
		case "v1 ConfigMap":
			var c corev1.ConfigMap
			strict(&c)
			m.configMaps[c.Name] = &c
		case "apps/v1 StatefulSet":
			m.sts = new(appsv1.StatefulSet)
			strict(m.sts)
		case "policy/v1 PodDisruptionBudget":
			m.pdb = new(policyv1.PodDisruptionBudget)
			strict(m.pdb)
		default:
			t.Fatalf("document %d: %q %q is not a kind this check knows", i, head.APIVersion, head.Kind)
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

// TestManifestsAgree: the objects reference each other correctly, which
// no single object's schema can check.
func TestManifestsAgree(t *testing.T) {
	m := load(t, "../limiterd.yaml")
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
		t.Error("readiness must be /readyz (joined), liveness /healthz")
	}
	// The flags agree with the ports, the Services and the volumes.
	for flag, port := range map[string]string{"http-addr": "http", "grpc-addr": "grpc", "bind-addr": "gossip-tcp"} {
		v, _ := flagValue(c.Args, flag)
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
			rules, _ := flagValue(c.Args, "rules")
			if cm == nil || cm.Data[filepath.Base(rules)] == "" || filepath.Dir(rules) != mounts[v.Name] {
				t.Errorf("-rules=%s is not a key of ConfigMap %s mounted at %s", rules, v.ConfigMap.Name, mounts[v.Name])
			}
		case v.Secret != nil:
			keys, _ := flagValue(c.Args, "gossip-key-file")
			if filepath.Dir(keys) != mounts[v.Name] {
				t.Errorf("-gossip-key-file=%s is not in the Secret's mount %s", keys, mounts[v.Name])
			}
		}
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
// Only the addresses change: loopback, with free ports.
func TestCommandLineStarts(t *testing.T) {
	m := load(t, "../limiterd.yaml")
	dir := t.TempDir()
	bin := filepath.Join(dir, "limiterd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/limiterd")
	build.Dir = "../../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	c := m.sts.Spec.Template.Spec.Containers[0]
	rulesPath, gossipPath := filepath.Join(dir, "rules.yaml"), filepath.Join(dir, "keys")
	if err := os.WriteFile(rulesPath, []byte(m.configMaps["limiterd-rules"].Data["rules.yaml"]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(gossipPath, []byte("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n"), 0o600); err != nil {
		t.Fatal(err)
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
		"join": gossip, "rules": rulesPath, "gossip-key-file": gossipPath,
	}
	var args []string
	for _, a := range c.Args {
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if v, ok := replace[name]; ok {
			a = "-" + name + "=" + v
		}
		a = strings.ReplaceAll(a, "$(POD_NAME)", "limiterd-0")
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
	if !strings.Contains(stderr.String(), `"node":"limiterd-0"`) {
		t.Errorf("the log does not name the node limiterd-0:\n%s", stderr.String())
	}
}
