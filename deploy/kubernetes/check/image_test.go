package check

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// The names the test gives what it builds; it removes them at its end.
const (
	goBaseImage = "localhost/limiterd-check/go:local"
	testImage   = "localhost/limiterd-check/limiterd:test"
)

// podmanArgs puts the flags every podman command takes before args: runc,
// not Debian 12's crun (1.8), which refuses to start a container on a
// machine whose cgroups are mounted in hybrid mode, as this one's are.
func podmanArgs(args ...string) []string {
	return append([]string{"--runtime", "runc"}, args...)
}

// podman runs a podman command under ctx.
func podman(ctx context.Context, path string, args ...string) (string, error) {
	return run(ctx, "", path, podmanArgs(args...)...)
}

// TestImage builds the Dockerfile with podman, checks what the image holds
// and how it is configured, and runs two containers of it that form a
// cluster on the host's loopback. Its cost is the installation of podman
// and runc, and the compilation of limiterd inside the build unless
// TestCommandLineStarts did it (buildImage).
func TestImage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bins := debianPrograms(t, ctx, "podman", "runc")
	pm := bins["podman"]
	step := time.Now()
	took := func(what string) {
		t.Logf("%s: %v", what, time.Since(step).Round(100*time.Millisecond))
		step = time.Now()
	}

	buildGoBase(t, ctx, pm)
	t.Cleanup(func() { podman(context.Background(), pm, "rmi", "--force", goBaseImage) })
	buildImage(t, ctx, pm)
	t.Cleanup(func() { podman(context.Background(), pm, "rmi", "--force", testImage) })
	took("build")

	checkConfig(t, ctx, pm)
	checkFiles(t, ctx, pm)
	took("inspect")

	runCluster(t, ctx, pm)
	took("two containers")
}

// buildGoBase builds the image the Dockerfile's build stage starts from
// here (doc.go): scratch with the CA certificates, a /tmp, and the Go
// image's environment. The Go toolchain is not in it: the build mounts
// this machine's.
func buildGoBase(t *testing.T, ctx context.Context, pm string) {
	t.Helper()
	dir := t.TempDir()
	certs, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt")
	if err != nil {
		t.Fatalf("the CA certificates the build stage copies: %v (Debian's ca-certificates)", err)
	}
	for name, data := range map[string][]byte{
		"rootfs/etc/ssl/certs/ca-certificates.crt": certs,
		"rootfs/tmp/.keep":                         nil,
		"Containerfile": []byte("FROM scratch\nCOPY rootfs/ /\n" +
			"ENV PATH=/go/bin:/usr/local/go/bin:/usr/bin:/bin GOPATH=/go HOME=/root GOTOOLCHAIN=local\n" +
			"WORKDIR /go\n"),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "rootfs/tmp"), 0o1777); err != nil {
		t.Fatal(err)
	}
	if _, err := podman(ctx, pm, "build", "--quiet", "--pull=never", "--tag", goBaseImage, dir); err != nil {
		t.Fatal(err)
	}
}

// buildImage builds the repository's Dockerfile as testImage, its build
// stage from goBaseImage with this machine's Go toolchain, module cache and
// build cache mounted, and no network. The build cache holds what
// TestCommandLineStarts compiled with the same flags (the compiler's
// cache keys leave the source directory out under -trimpath), so the
// build compiles nothing that test compiled.
func buildImage(t *testing.T, ctx context.Context, pm string) {
	t.Helper()
	goEnv := func(name string) string {
		out, err := run(ctx, "", "go", "env", name)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	goroot, modcache, gocache := goEnv("GOROOT"), goEnv("GOMODCACHE"), goEnv("GOCACHE")
	if !filepath.IsAbs(gocache) { // GOCACHE=off
		gocache = cacheDir(t, "image-go-build")
	}
	// Every module the build needs, in the mounted cache, downloaded the
	// way this machine downloads them (its proxy): the build has no
	// network.
	if _, err := run(ctx, repoRoot, "go", "mod", "download"); err != nil {
		t.Fatal(err)
	}
	out, err := podman(ctx, pm, "build",
		"--pull=never", "--network=none", "--layers=false",
		"--build-arg", "GO_IMAGE="+goBaseImage,
		"--volume", goroot+":/usr/local/go:ro",
		"--volume", modcache+":/go/pkg/mod",
		"--volume", gocache+":/root/.cache/go-build",
		"--file", filepath.Join(repoRoot, "Dockerfile"),
		"--tag", testImage,
		repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("podman build:\n%s", lastLines(out, 3))
}

// imageConfig is the part of `podman image inspect` the test reads.
type imageConfig struct {
	Size   int64
	Config struct {
		User         string
		ExposedPorts map[string]struct{}
		Env          []string
		Entrypoint   []string
		Cmd          []string
		Healthcheck  any
	}
}

// checkConfig: the image runs limiterd as user 65532, exposes HTTP, gRPC
// and memberlist (TCP and UDP), listens on every address by default, and
// takes its default rules from the file it carries.
func checkConfig(t *testing.T, ctx context.Context, pm string) {
	t.Helper()
	out, err := podman(ctx, pm, "image", "inspect", testImage)
	if err != nil {
		t.Fatal(err)
	}
	var images []imageConfig
	if err := json.Unmarshal([]byte(out), &images); err != nil || len(images) != 1 {
		t.Fatalf("podman image inspect: %v\n%s", err, out)
	}
	img := images[0]
	t.Logf("image size %.1f MB (%d bytes, uncompressed)", float64(img.Size)/1e6, img.Size)
	c := img.Config
	if c.User != "65532:65532" {
		t.Errorf("User %q", c.User)
	}
	var ports []string
	for p := range c.ExposedPorts {
		ports = append(ports, p)
	}
	slices.Sort(ports)
	if want := []string{"7946/tcp", "7946/udp", "8080/tcp", "8081/tcp"}; !slices.Equal(ports, want) {
		t.Errorf("ExposedPorts %v, want %v", ports, want)
	}
	if !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/limiterd"}) || len(c.Cmd) != 0 {
		t.Errorf("Entrypoint %q, Cmd %q", c.Entrypoint, c.Cmd)
	}
	for _, e := range []string{"LIMITERD_HTTP_ADDR=0.0.0.0:8080", "LIMITERD_GRPC_ADDR=0.0.0.0:8081", "LIMITERD_RULES=/etc/limiterd/rules.yaml"} {
		if !slices.Contains(c.Env, e) {
			t.Errorf("Env %q has no %s", c.Env, e)
		}
	}
}

// checkFiles: the image holds limiterd, the CA certificates and the rule
// file, and nothing else; limiterd is static (no interpreter, no shared
// library) and was built with CGO_ENABLED=0 and -trimpath.
func checkFiles(t *testing.T, ctx context.Context, pm string) {
	t.Helper()
	name := fmt.Sprintf("limiterd-check-files-%d", os.Getpid())
	if _, err := podman(ctx, pm, "create", "--name", name, testImage); err != nil {
		t.Fatal(err)
	}
	defer podman(context.Background(), pm, "rm", "--force", name)
	cmd := exec.CommandContext(ctx, pm, podmanArgs("export", name)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	tarball, err := cmd.Output()
	if err != nil {
		t.Fatalf("podman export: %v\n%s", err, stderr.String())
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(tarball))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeDir {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files["/"+strings.TrimPrefix(h.Name, "/")] = data
	}
	// The runtime's own mount points and files (/etc/hosts, ...) are empty
	// placeholders in an export: only files with content count.
	var names []string
	for n, data := range files {
		if len(data) > 0 {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	want := []string{"/etc/limiterd/rules.yaml", "/etc/ssl/certs/ca-certificates.crt", "/usr/local/bin/limiterd"}
	if !slices.Equal(names, want) {
		t.Errorf("the image holds %v, want %v", names, want)
	}
	rules, err := os.ReadFile(filepath.Join(repoRoot, "testdata", "rules.yaml"))
	if err != nil || !bytes.Equal(files["/etc/limiterd/rules.yaml"], rules) {
		t.Errorf("/etc/limiterd/rules.yaml is not testdata/rules.yaml (%v)", err)
	}
	bin := files["/usr/local/bin/limiterd"]
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("limiterd: %v", err)
	}
	libs, _ := f.ImportedLibraries()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("limiterd has an interpreter: it is not static")
		}
	}
	if len(libs) != 0 {
		t.Errorf("limiterd needs %v: it is not static", libs)
	}
	info, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("limiterd's build information: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" || info.Path != "github.com/limiterd/limiterd/cmd/limiterd" {
		t.Errorf("limiterd %s built with %v: want CGO_ENABLED=0 and -trimpath", info.Path, settings)
	}
	if info.GoVersion != runtime.Version() {
		t.Logf("limiterd built by %s, the test by %s", info.GoVersion, runtime.Version())
	}
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// node is a container of the image, on the host's network.
type node struct {
	name             string
	http, grpc, swim int
	args             []string
}

// runCluster starts a container of the image as the image runs it, with
// the same hardening as deploy/kubernetes (read-only root filesystem, no
// capabilities, no privilege escalation) and only its addresses moved to
// loopback; then a second one that joins it. Both must answer, the second
// must become ready, and each must see the other alive.
func runCluster(t *testing.T, ctx context.Context, pm string) {
	t.Helper()
	// A gossip key in the environment (loopback needs none): the image
	// passes LIMITERD_* variables to limiterd, and both nodes must share it.
	const key = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="
	start := func(n *node) {
		t.Helper()
		args := []string{"run", "--detach", "--name", n.name,
			"--network", "host", "--read-only", "--cap-drop", "ALL", "--security-opt", "no-new-privileges",
			// podman would ask for its own default limits, which this
			// machine refuses to raise to (EPERM); lower ones are allowed.
			"--ulimit", "nofile=8192:8192", "--ulimit", "nproc=4096:4096",
			"--env", "LIMITERD_GOSSIP_KEY=" + key,
			testImage,
			"-node-name=" + n.name,
			fmt.Sprintf("-http-addr=127.0.0.1:%d", n.http),
			fmt.Sprintf("-grpc-addr=127.0.0.1:%d", n.grpc),
			fmt.Sprintf("-bind-addr=127.0.0.1:%d", n.swim),
		}
		t.Cleanup(func() {
			if t.Failed() {
				logs, _ := podman(context.Background(), pm, "logs", n.name)
				t.Logf("%s's log:\n%s", n.name, logs)
			}
			podman(context.Background(), pm, "rm", "--force", "--time", "0", n.name)
		})
		if _, err := podman(ctx, pm, append(args, n.args...)...); err != nil {
			t.Fatal(err)
		}
	}
	newNode := func(i int) *node {
		return &node{name: fmt.Sprintf("limiterd-check-%d-%d", os.Getpid(), i), http: freePort(t), grpc: freePort(t), swim: freePort(t)}
	}
	first, second := newNode(1), newNode(2)
	start(first)

	// The image's default rule file decides: testdata/rules.yaml's
	// "default" rule, 600 per 60 s.
	resp := waitFor(t, ctx, first, "/check?key=client-42", http.StatusOK)
	if p := resp.Header.Get("RateLimit-Policy"); !strings.Contains(p, `"default";q=600;w=60`) {
		t.Errorf("RateLimit-Policy %q: not the image's default rule file", p)
	}
	checkUser(t, ctx, pm, first.name)

	second.args = []string{fmt.Sprintf("-join=127.0.0.1:%d", first.swim)}
	start(second)
	waitFor(t, ctx, second, "/readyz", http.StatusOK)
	waitFor(t, ctx, second, "/check?key=client-42", http.StatusOK)
	for _, n := range []*node{first, second} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var c struct {
				Nodes   int `json:"nodes"`
				Members []struct{ Name, State string }
			}
			resp := waitFor(t, ctx, n, "/cluster", http.StatusOK)
			err := json.Unmarshal(resp.body, &c)
			alive := 0
			for _, m := range c.Members {
				if m.State == "alive" && (m.Name == first.name || m.Name == second.name) {
					alive++
				}
			}
			if err == nil && c.Nodes == 2 && alive == 2 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s's /cluster after 30 s: %s (%v)", n.name, resp.body, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// response is an answer of a node's HTTP API.
type response struct {
	http.Header
	body []byte
}

// waitFor asks n for path until it answers status, for 30 s at most.
func waitFor(t *testing.T, ctx context.Context, n *node, path string, status int) response {
	t.Helper()
	url := fmt.Sprintf("http://127.0.0.1:%d%s", n.http, path)
	client := &http.Client{Timeout: 2 * time.Second}
	var last string
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(200 * time.Millisecond) {
		resp, err := client.Get(url)
		if err != nil {
			last = err.Error()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode == status {
			return response{resp.Header, body}
		}
		last = fmt.Sprintf("%s: %s", resp.Status, body)
	}
	t.Fatalf("%s: no %d in 30 s; last: %s", url, status, last)
	return response{}
}

// checkUser: the container's process runs as user and group 65532.
func checkUser(t *testing.T, ctx context.Context, pm, name string) {
	t.Helper()
	out, err := podman(ctx, pm, "inspect", "--format", "{{.State.Pid}}", name)
	if err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strings.TrimSpace(out), "status"))
	if err != nil {
		t.Fatal(err)
	}
	ids := 0
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 || (f[0] != "Uid:" && f[0] != "Gid:") {
			continue
		}
		ids++
		if f[1] != "65532" || f[2] != "65532" {
			t.Errorf("the container's limiterd runs as %s", line)
		}
	}
	if ids != 2 {
		t.Errorf("no Uid: and Gid: lines in %s's /proc status:\n%s", name, status)
	}
}
