package check

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// dockerfile holds the instructions of the repository's Dockerfile that
// the manifests must agree with.
type dockerfile struct {
	user   string   // USER
	expose []string // EXPOSE, as port/protocol
}

// readDockerfile reads the Dockerfile's USER and EXPOSE instructions (the
// last of each stage wins; the last stage is the image): a line-level
// reading, enough for the file's own simple syntax (no heredocs).
func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	var d dockerfile
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		switch strings.ToUpper(f[0]) {
		case "FROM":
			d = dockerfile{}
		case "USER":
			d.user = strings.Join(f[1:], " ")
		case "EXPOSE":
			d.expose = append(d.expose, f[1:]...)
		}
	}
	slices.Sort(d.expose)
	return d
}

// makeVariable returns the default of a Makefile variable set with ?=.
func makeVariable(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(repoRoot, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^` + name + `\s*\?=\s*(\S+)\s*$`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("the Makefile sets no %s ?=", name)
	}
	return string(m[1])
}

// TestImageAgrees: deploy/kubernetes/limiterd.yaml and the Helm chart run
// the image `make image` builds, under its name and tag, as the user the
// Dockerfile names, with the ports it exposes.
func TestImageAgrees(t *testing.T) {
	image := makeVariable(t, "IMAGE_REPO") + ":" + makeVariable(t, "IMAGE_TAG")
	d := readDockerfile(t)
	if d.user == "" || len(d.expose) == 0 {
		t.Fatalf("the Dockerfile's image has no USER or no EXPOSE: %+v", d)
	}
	for name, m := range map[string]manifests{
		"deploy/kubernetes/limiterd.yaml": load(t, "../limiterd.yaml"),
		"the Helm chart":                  decode(t, []byte(renderChart(t, "limiterd", "").manifest)),
	} {
		pod := m.sts.Spec.Template.Spec
		c := pod.Containers[0]
		if c.Image != image {
			t.Errorf("%s runs %s; make image builds %s", name, c.Image, image)
		}
		if sc := pod.SecurityContext; sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil ||
			fmt.Sprintf("%d:%d", *sc.RunAsUser, *sc.RunAsGroup) != d.user {
			t.Errorf("%s: the pod's runAsUser and runAsGroup are not the Dockerfile's USER %s", name, d.user)
		}
		var ports []string
		for _, p := range c.Ports {
			ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, strings.ToLower(string(p.Protocol))))
		}
		slices.Sort(ports)
		if !slices.Equal(ports, d.expose) {
			t.Errorf("%s: container ports %v, the Dockerfile exposes %v", name, ports, d.expose)
		}
	}
}
