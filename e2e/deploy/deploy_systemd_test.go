package deploy

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// deployUnitExec is the ExecStart= of deploy/systemd/limiterd.service: the
// tests put a copy of the built binary there instead, since verify needs
// the program to exist.
const deployUnitExec = "ExecStart=/usr/local/bin/limiterd"

// deployUnitCopy writes the unit, with ExecStart on a copy of the built
// limiterd and then changed by mutate, into a new directory, and returns
// the unit's path.
func deployUnitCopy(t *testing.T, mutate func(string) string) string {
	t.Helper()
	unit := deployRead(t, "systemd", "limiterd.service")
	if strings.Count(unit, deployUnitExec+"\n") != 1 {
		t.Fatalf("limiterd.service has no line %q to point at the test's binary", deployUnitExec)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "limiterd")
	b, err := os.ReadFile(nodetest.Build(t, "limiterd"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	unit = strings.Replace(unit, deployUnitExec, "ExecStart="+bin, 1)
	if mutate != nil {
		unit = mutate(unit)
	}
	path := filepath.Join(dir, "limiterd.service")
	if err := os.WriteFile(path, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// deployVerify runs systemd-analyze verify on a unit and returns what it
// said about it. systemd 252 exits 0 on many problems it "ignores" (an
// unknown key, a value it cannot parse), so every line naming the unit
// counts as a finding; lines about other units (the system's own, which
// verify loads as dependencies) are not this file's.
func deployVerify(t *testing.T, unit string) (findings []string, out string, err error) {
	t.Helper()
	analyze := deployNeed(t, "systemd-analyze", "systemd")
	out, err = deployRun(filepath.Dir(unit), append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice", "SYSTEMD_LOG_COLOR=0"), analyze, "verify", "--man=no", unit)
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "limiterd.service") {
			findings = append(findings, l)
		}
	}
	return findings, out, err
}

// TestSystemdUnitVerifies: systemd-analyze verify accepts the unit, with
// nothing to say, and rejects each broken copy of it, so that the check
// really reads the file (systemd as PID 1 is not needed for verify).
func TestSystemdUnitVerifies(t *testing.T) {
	if findings, out, err := deployVerify(t, deployUnitCopy(t, nil)); err != nil || len(findings) > 0 {
		t.Fatalf("systemd-analyze verify limiterd.service: %v\n%s", err, out)
	}
	// replace breaks the first setting (not a comment) that has old.
	replace := func(old, new string) func(string) string {
		return func(u string) string {
			lines := strings.SplitAfter(u, "\n")
			for i, l := range lines {
				if !strings.HasPrefix(l, "#") && strings.Contains(l, old) {
					lines[i] = strings.Replace(l, old, new, 1)
					return strings.Join(lines, "")
				}
			}
			t.Fatalf("the unit has no setting with %q to break", old)
			return u
		}
	}
	for _, tc := range []struct {
		name   string
		mutate func(string) string
	}{
		{"unknown directive", replace("ProtectSystem=strict", "ProtectSytem=strict")},
		{"invalid restart value", replace("Restart=on-failure", "Restart=sometimes")},
		{"unknown system call group", replace("SystemCallFilter=@system-service", "SystemCallFilter=@system-servic")},
		{"unknown address family", replace("AF_NETLINK", "AF_NETLNK")},
		{"invalid time span", replace("TimeoutStopSec=20s", "TimeoutStopSec=20parsecs")},
		{"missing program", func(u string) string {
			return regexp.MustCompile(`(?m)^ExecStart=(.*)$`).ReplaceAllString(u, "ExecStart=${1}-missing")
		}},
		{"settings outside their section", replace("[Service]\n", "")},
		{"no ExecStart", func(u string) string {
			return regexp.MustCompile(`(?m)^ExecStart=.*\n`).ReplaceAllString(u, "")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			findings, out, err := deployVerify(t, deployUnitCopy(t, tc.mutate))
			if err == nil && len(findings) == 0 {
				t.Fatalf("systemd-analyze verify accepted a broken unit:\n%s", out)
			}
			t.Logf("rejected (%v): %s", err, strings.Join(findings, " | "))
		})
	}
}

// deployExposureMax is the most systemd-analyze security may score the
// unit: the 1.2 measured with systemd 252, so that any weakening fails.
const deployExposureMax = 1.2

// TestSystemdSecurityExposure: systemd-analyze security --offline scores
// the unit at most deployExposureMax, and finds nothing but the accepted
// exposures (the README's table).
func TestSystemdSecurityExposure(t *testing.T) {
	// accepted are the findings systemd-analyze security still
	// has against the unit, each kept on purpose.
	accepted := map[string]string{
		"SystemCallFilter=~@resources":             "the Go runtime raises RLIMIT_NOFILE at start (prlimit64)",
		"RootDirectory=/RootImage=":                "one binary and its rule files: an image would add upkeep, not protection",
		"RestrictAddressFamilies=~AF_NETLINK":      "net.Interfaces finds the address to advertise when bound to 0.0.0.0",
		"RestrictAddressFamilies=~AF_UNIX":         "glibc's resolver may ask systemd-resolved or nscd",
		"RestrictAddressFamilies=~AF_(INET|INET6)": "a network service",
		"ProcSubset=":     "the process metrics read /proc/stat (process_start_time_seconds)",
		"PrivateNetwork=": "a network service",
		"DeviceAllow=":    "char-rtc:r, which ProtectClock= itself adds",
		"IPAddressDeny=":  "the allowed networks are the site's: add IPAddressAllow= in a drop-in",
	}
	analyze := deployNeed(t, "systemd-analyze", "systemd")
	unit := deployUnitCopy(t, nil)
	env := append(os.Environ(), "LANG=C", "LC_ALL=C", "SYSTEMD_COLORS=0")
	out, err := deployRun(filepath.Dir(unit), env, analyze, "security", "--offline=true", "--threshold="+strconv.Itoa(int(deployExposureMax*10)), unit)
	m := regexp.MustCompile(`Overall exposure level for limiterd\.service: ([0-9.]+) (\w+)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("systemd-analyze security printed no overall exposure (%v):\n%s", err, out)
	}
	score, _ := strconv.ParseFloat(m[1], 64)
	t.Logf("systemd-analyze security --offline=true limiterd.service: %s %s", m[1], m[2])
	if err != nil || score > deployExposureMax {
		t.Fatalf("exposure %v %s, above %v (%v):\n%s", score, m[2], deployExposureMax, err, out)
	}

	js, err := deployRun(filepath.Dir(unit), env, analyze, "security", "--offline=true", "--json=short", unit)
	if err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, js)
	}
	var items []struct {
		Set         bool    `json:"set"`
		Name        string  `json:"name"`
		Description string  `json:"description"`
		Exposure    *string `json:"exposure"`
	}
	if err := json.Unmarshal([]byte(js), &items); err != nil {
		t.Fatalf("systemd-analyze security --json: %v\n%s", err, js)
	}
	open := map[string]bool{}
	for _, it := range items {
		if it.Set || it.Exposure == nil {
			continue
		}
		open[it.Name] = true
		if _, ok := accepted[it.Name]; !ok {
			t.Errorf("new exposure %s (%s): harden the unit, or accept it in this test and the README", it.Name, it.Description)
		}
	}
	for name := range accepted {
		if !open[name] {
			t.Logf("%s is no longer an exposure: drop it from this test and the README", name)
		}
	}
}

// deployUnitSettings returns the [Service] settings of a unit: each
// directive's values in file order.
func deployUnitSettings(unit string) map[string][]string {
	settings := map[string][]string{}
	section := ""
	for _, l := range strings.Split(unit, "\n") {
		l = strings.TrimSpace(l)
		switch {
		case l == "" || strings.HasPrefix(l, "#"):
		case strings.HasPrefix(l, "["):
			section = l
		case section == "[Service]":
			if k, v, ok := strings.Cut(l, "="); ok {
				settings[k] = append(settings[k], v)
			}
		}
	}
	return settings
}

// deployFlagDefault returns a flag's default as `limiterd -h` prints it.
func deployFlagDefault(t *testing.T, help, flag string) string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^  -` + regexp.QuoteMeta(flag) + `\b[^\n]*\n[^\n]*\(default "([^"]*)"`).FindStringSubmatch(help)
	if m == nil {
		t.Fatalf("limiterd -h shows no default for -%s", flag)
	}
	return m[1]
}

func deployHelp(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(nodetest.Build(t, "limiterd"), "-h").CombinedOutput()
	if err != nil && !strings.Contains(string(out), "Usage: limiterd") {
		t.Fatalf("limiterd -h: %v\n%s", err, out)
	}
	return string(out)
}

// TestSystemdUnitHardening: the unit has each setting the issue asks for,
// with its value, and gives a stopping node the time it needs.
func TestSystemdUnitHardening(t *testing.T) {
	s := deployUnitSettings(deployRead(t, "systemd", "limiterd.service"))
	for _, tc := range []struct{ key, want string }{
		{"Type", "exec"},
		{"ExecStart", "/usr/local/bin/limiterd"},
		{"ExecReload", "/bin/kill -HUP $MAINPID"}, // rules and gossip keys reload on SIGHUP
		{"Restart", "on-failure"},
		{"EnvironmentFile", "/etc/limiterd/limiterd.env"},
		{"User", "limiterd"},
		{"Group", "limiterd"},
		{"UMask", "0077"},
		{"NoNewPrivileges", "yes"},
		{"CapabilityBoundingSet", ""}, // empty: no capability at all
		{"AmbientCapabilities", ""},
		{"ProtectSystem", "strict"},
		{"ReadOnlyPaths", "/etc/limiterd"},
		{"ProtectHome", "yes"},
		{"PrivateTmp", "yes"},
		{"PrivateDevices", "yes"},
		{"ProtectKernelTunables", "yes"},
		{"ProtectKernelModules", "yes"},
		{"ProtectKernelLogs", "yes"},
		{"ProtectControlGroups", "yes"},
		{"ProtectClock", "yes"},
		{"ProtectHostname", "yes"},
		{"RestrictAddressFamilies", "AF_INET AF_INET6 AF_UNIX AF_NETLINK"},
		{"RestrictNamespaces", "yes"},
		{"LockPersonality", "yes"},
		{"MemoryDenyWriteExecute", "yes"},
		{"RestrictRealtime", "yes"},
		{"RestrictSUIDSGID", "yes"},
		{"SystemCallArchitectures", "native"},
		{"SystemCallFilter", "@system-service"},
	} {
		if v := s[tc.key]; len(v) == 0 || v[0] != tc.want {
			t.Errorf("%s=%q, want %q", tc.key, v, tc.want)
		}
	}
	if v := s["LimitNOFILE"]; len(v) != 1 {
		t.Errorf("LimitNOFILE=%q: want one", v)
	} else if n, err := strconv.Atoi(v[0]); err != nil || n < 65536 {
		t.Errorf("LimitNOFILE=%s: want at least 65536", v[0])
	}

	// SIGTERM: -shutdown-timeout to drain, then the node's last changes,
	// its leave broadcast and memberlist's shutdown, each bounded by the
	// cluster's LeaveTimeout (2s). systemd must not SIGKILL it before.
	shutdown, err := time.ParseDuration(deployFlagDefault(t, deployHelp(t), "shutdown-timeout"))
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := deployEnvFile(t).active["LIMITERD_SHUTDOWN_TIMEOUT"]; ok {
		if shutdown, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	stop, err := time.ParseDuration(strings.Join(s["TimeoutStopSec"], ""))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%q: %v", s["TimeoutStopSec"], err)
	}
	if need := shutdown + 3*2*time.Second; stop <= need {
		t.Errorf("TimeoutStopSec=%v: a stopping node may take %v (-shutdown-timeout %v, then leaving the cluster)", stop, need, shutdown)
	}
}

// TestSystemdSysusers: limiterd.sysusers creates the system user and group
// the unit runs as (systemd-sysusers into an empty root, not the host).
func TestSystemdSysusers(t *testing.T) {
	deployNeed(t, "systemd-analyze", "systemd")
	sysusers, err := exec.LookPath("systemd-sysusers")
	if err != nil {
		t.Skipf("systemd-sysusers is missing: %v", err)
	}
	root := t.TempDir()
	if err := os.Mkdir(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	// On standard input: --root would prefix a file's path too.
	cmd := exec.Command(sysusers, "--root="+root, "-")
	cmd.Stdin = strings.NewReader(deployRead(t, "systemd", "limiterd.sysusers"))
	b, err := cmd.CombinedOutput()
	if out := string(b); err != nil || strings.Contains(out, "<stdin>:") {
		t.Fatalf("systemd-sysusers limiterd.sysusers: %v\n%s", err, out)
	}
	passwd, err := os.ReadFile(filepath.Join(root, "etc", "passwd"))
	if err != nil {
		t.Fatal(err)
	}
	var user []string
	for _, l := range strings.Split(string(passwd), "\n") {
		if f := strings.Split(l, ":"); len(f) == 7 && f[0] == "limiterd" {
			user = f
		}
	}
	if user == nil {
		t.Fatalf("no limiterd user:\n%s", passwd)
	}
	if uid, _ := strconv.Atoi(user[2]); uid == 0 || uid >= 1000 || user[6] != "/usr/sbin/nologin" {
		t.Errorf("limiterd user %q: want a system uid (1-999) and /usr/sbin/nologin", strings.Join(user, ":"))
	}
	group, err := os.ReadFile(filepath.Join(root, "etc", "group"))
	if err != nil || !regexp.MustCompile(`(?m)^limiterd:x:`+user[3]+`:`).Match(group) {
		t.Errorf("no limiterd group of gid %s: %v\n%s", user[3], err, group)
	}
	s := deployUnitSettings(deployRead(t, "systemd", "limiterd.service"))
	if u, g := strings.Join(s["User"], ""), strings.Join(s["Group"], ""); u != user[0] || g != user[0] {
		t.Errorf("the unit runs as %s:%s, sysusers creates %s", u, g, user[0])
	}
}

// deployEnv is limiterd.env read the way systemd reads an EnvironmentFile.
type deployEnv struct {
	active    map[string]string // VAR=value lines
	order     []string          // their names in file order
	mentioned []string          // # VAR=... lines: documented, off
}

// deployEnvFile reads deploy/systemd/limiterd.env. It accepts only the
// plain subset of systemd's syntax (VAR=value, no quotes, no spaces, no
// continuation), so that this reading and systemd's cannot differ.
func deployEnvFile(t *testing.T) deployEnv {
	t.Helper()
	e := deployEnv{active: map[string]string{}}
	assign := regexp.MustCompile(`^([A-Z][A-Z0-9_]*)=([^\s"'\\]*)$`)
	commented := regexp.MustCompile(`^#\s*(LIMITERD_[A-Z0-9_]+)=`)
	for i, l := range strings.Split(deployRead(t, "systemd", "limiterd.env"), "\n") {
		switch {
		case strings.TrimSpace(l) == "":
		case strings.HasPrefix(l, "#"):
			if m := commented.FindStringSubmatch(l); m != nil {
				e.mentioned = append(e.mentioned, m[1])
			}
		default:
			m := assign.FindStringSubmatch(l)
			if m == nil {
				t.Fatalf("limiterd.env:%d: %q is not VAR=value (no quotes, spaces or backslashes)", i+1, l)
			}
			if _, dup := e.active[m[1]]; dup {
				t.Fatalf("limiterd.env:%d: %s set twice", i+1, m[1])
			}
			e.active[m[1]] = m[2]
			e.order = append(e.order, m[1])
		}
	}
	return e
}

// TestSystemdEnvFileNamesRealVariables: every variable limiterd.env and the
// unit set or mention is one limiterd reads (a misspelt one would be
// ignored in silence), and the file says how to give the gossip key.
func TestSystemdEnvFileNamesRealVariables(t *testing.T) {
	known := map[string]bool{}
	for _, m := range regexp.MustCompile(`env (LIMITERD_[A-Z0-9_]+)\)`).FindAllStringSubmatch(deployHelp(t), -1) {
		known[m[1]] = true
	}
	if len(known) < 20 {
		t.Fatalf("limiterd -h lists %d variables", len(known))
	}
	e := deployEnvFile(t)
	names := append(append([]string{}, e.order...), e.mentioned...)
	for _, v := range deployUnitSettings(deployRead(t, "systemd", "limiterd.service"))["Environment"] {
		k, _, _ := strings.Cut(v, "=")
		names = append(names, k)
	}
	for _, n := range names {
		if !known[n] {
			t.Errorf("%s is not a variable of limiterd -h", n)
		}
	}
	if e.active["LIMITERD_GOSSIP_KEY_FILE"] == "" || !deployContains(e.mentioned, "LIMITERD_GOSSIP_KEY") {
		t.Errorf("limiterd.env should set LIMITERD_GOSSIP_KEY_FILE and show LIMITERD_GOSSIP_KEY as the other way")
	}
	if _, both := e.active["LIMITERD_GOSSIP_KEY"]; both {
		t.Errorf("limiterd.env sets LIMITERD_GOSSIP_KEY beside LIMITERD_GOSSIP_KEY_FILE: limiterd refuses both")
	}
}

func deployContains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// deployEnvNode is a node configured as the unit configures it, by the
// environment alone: the unit's Environment= lines, then limiterd.env over
// them (systemd's order), then, for what is the example host's own (its
// addresses, the seeds, the files under /etc/limiterd), loopback ports and
// temporary files. It joins a seed node sharing its gossip key file.
type deployEnvNode struct {
	seed   *nodetest.Proc
	node   *nodetest.Proc
	env    []string
	keys   string // the gossip key file
	rules  string // the rule file
	traced string // strace's log, when traced
}

func deployStartEnvNode(t *testing.T, wrap []string, extra map[string]string) *deployEnvNode {
	t.Helper()
	dir := t.TempDir()
	n := &deployEnvNode{keys: filepath.Join(dir, "gossip-keys"), rules: filepath.Join(dir, "rules.yaml")}
	rules, err := os.ReadFile(filepath.Join("..", "..", "testdata", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.rules, rules, 0o640); err != nil {
		t.Fatal(err)
	}
	// As limiterd.env says to make it: 32 random bytes, base64.
	key := make([]byte, 32)
	f, err := os.Open("/dev/urandom")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Read(key)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(n.keys, []byte(base64.StdEncoding.EncodeToString(key)+"\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	c := nodetest.Start(t, nodetest.Config{Nodes: 1, Rules: []string{string(rules)}, Args: []string{"-gossip-key-file", n.keys}})
	n.seed = c.Procs[0]

	vars := map[string]string{}
	var order []string
	set := func(k, v string) {
		if _, ok := vars[k]; !ok {
			order = append(order, k)
		}
		vars[k] = v
	}
	for _, v := range deployUnitSettings(deployRead(t, "systemd", "limiterd.service"))["Environment"] {
		k, val, _ := strings.Cut(v, "=")
		set(k, val)
	}
	e := deployEnvFile(t)
	for _, k := range e.order {
		set(k, e.active[k])
	}
	httpAddr := "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
	host := map[string]string{
		"LIMITERD_HTTP_ADDR":        httpAddr,
		"LIMITERD_BIND_ADDR":        "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t)),
		"LIMITERD_JOIN":             n.seed.Gossip,
		"LIMITERD_GOSSIP_KEY_FILE":  n.keys,
		"LIMITERD_RULES":            n.rules,
		"LIMITERD_NODE_NAME":        "", // kept: the file's own
		"LIMITERD_SHUTDOWN_TIMEOUT": "", // kept, when set
	}
	for k, v := range host {
		if _, ok := vars[k]; !ok {
			if v != "" {
				t.Fatalf("the unit and limiterd.env no longer set %s: update the test", k)
			}
			continue
		}
		if v != "" {
			vars[k] = v
		}
	}
	for k, v := range extra {
		set(k, v)
	}
	n.env = []string{"PATH=/usr/bin:/bin"}
	for _, k := range order {
		n.env = append(n.env, k+"="+vars[k])
	}
	// Exactly the environment, and no argument: what the unit gives it.
	n.node = &nodetest.Proc{Name: vars["LIMITERD_NODE_NAME"], HTTP: httpAddr, GRPC: vars["LIMITERD_GRPC_ADDR"], Env: n.env}
	if wrap != nil {
		// Not beside the rule file: its constant writes would be events in
		// the directory limiterd watches, which hold a file change's
		// reload back for as long as they go on.
		n.traced = filepath.Join(t.TempDir(), "strace.log")
		n.node.Wrap = append(append([]string{}, wrap...), "-o", n.traced, "--")
	}
	c.Procs = append(c.Procs, n.node)
	c.Start(n.node)
	nodetest.Eventually(t, "the env-file node and the seed see each other alive", 30*time.Second, func() bool {
		a, err1 := n.node.Members()
		b, err2 := n.seed.Members()
		return err1 == nil && err2 == nil && nodetest.CountState(a, "alive") == 2 && nodetest.CountState(b, "alive") == 2 &&
			a[n.seed.Name] == "alive" && b[n.node.Name] == "alive"
	})
	return n
}

// TestSystemdEnvFile: the unit's environment and limiterd.env, with the
// example host's addresses and files swapped for the test's, configure a
// node that joins an encrypted cluster through the gossip key file, and
// SIGHUP (the unit's ExecReload) reloads its rules.
func TestSystemdEnvFile(t *testing.T) {
	n := deployStartEnvNode(t, nil, nil)
	t.Logf("environment: %q", n.env)
	reloads := func() float64 { return n.node.Metric(t, "limiterd_rule_reloads_total", "result", "success") }
	before := reloads()
	if err := n.node.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, "a rule reload on SIGHUP", 10*time.Second, func() bool { return reloads() == before+1 })
	if code, r := n.node.Check(t, "client-1"); code != 200 || r.Rule != "default" {
		t.Fatalf("check: %d %+v", code, r)
	}
}

// deploySyscallGroups parses `systemd-analyze syscall-filter`: each group
// with its system calls and nested groups.
func deploySyscallGroups(t *testing.T) map[string][]string {
	t.Helper()
	analyze := deployNeed(t, "systemd-analyze", "systemd")
	out, err := exec.Command(analyze, "syscall-filter").Output()
	if err != nil {
		t.Fatalf("systemd-analyze syscall-filter: %v", err)
	}
	groups := map[string][]string{}
	cur := ""
	for _, l := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(l, "@"):
			cur = strings.TrimSpace(l)
		case strings.HasPrefix(l, "    ") && cur != "":
			if e := strings.TrimSpace(l); e != "" && !strings.HasPrefix(e, "#") {
				groups[cur] = append(groups[cur], e)
			}
		case !strings.HasPrefix(l, " "):
			cur = ""
		}
	}
	if len(groups["@system-service"]) == 0 {
		t.Fatalf("systemd-analyze syscall-filter lists no @system-service:\n%s", deployTail(out))
	}
	return groups
}

// deployAllowedSyscalls applies the unit's SystemCallFilter= lines in
// order, as systemd does: the first, not inverted, is an allow list; each
// later one adds to it, or takes away with ~.
func deployAllowedSyscalls(t *testing.T, filters []string, groups map[string][]string) map[string]bool {
	t.Helper()
	var expand func(string, map[string]bool)
	expand = func(e string, into map[string]bool) {
		if !strings.HasPrefix(e, "@") {
			into[e] = true
			return
		}
		list, ok := groups[e]
		if !ok {
			t.Fatalf("unknown system call group %s", e)
		}
		for _, x := range list {
			expand(x, into)
		}
	}
	allowed := map[string]bool{}
	for i, f := range filters {
		deny := strings.HasPrefix(f, "~")
		if i == 0 && deny {
			t.Fatalf("SystemCallFilter=%s: the tests expect an allow list first", f)
		}
		set := map[string]bool{}
		for _, e := range strings.Fields(strings.TrimPrefix(f, "~")) {
			expand(e, set)
		}
		for s := range set {
			if deny {
				delete(allowed, s)
			} else {
				allowed[s] = true
			}
		}
	}
	return allowed
}

// TestSystemdSandboxSyscalls runs the node of TestSystemdEnvFile under
// strace through its whole life, with the work a node does (checks, some
// at a key's margin, gRPC, scrapes, a rule file change, SIGHUP, SIGTERM),
// and holds what it did against the unit's sandbox, since no systemd runs
// here to enforce it: every system call within SystemCallFilter, every
// socket of a family RestrictAddressFamilies allows, no memory both
// writable and executable (MemoryDenyWriteExecute), no file opened for
// writing (ProtectSystem=strict), nothing under /home or /root
// (ProtectHome), only the devices PrivateDevices keeps, no other process's
// /proc (ProtectProc=invisible), and no new namespace (RestrictNamespaces).
func TestSystemdSandboxSyscalls(t *testing.T) {
	strace := deployNeed(t, "strace", "strace")
	if out, err := exec.Command(strace, "-qq", "-o", "/dev/null", "--", "/bin/true").CombinedOutput(); err != nil {
		t.Skipf("strace cannot trace here (ptrace refused?): %v\n%s", err, out)
	}
	unit := deployUnitSettings(deployRead(t, "systemd", "limiterd.service"))
	allowed := deployAllowedSyscalls(t, unit["SystemCallFilter"], deploySyscallGroups(t))
	families := map[string]bool{}
	for _, f := range strings.Fields(strings.Join(unit["RestrictAddressFamilies"], " ")) {
		families[f] = true
	}

	grpcAddr := "127.0.0.1:" + strconv.Itoa(nodetest.FreePort(t))
	n := deployStartEnvNode(t, []string{strace, "-f", "-qq", "-s", "512"}, map[string]string{"LIMITERD_GRPC_ADDR": grpcAddr})

	// The work: checks far from and at the margin (api: 10 per second, so
	// the coordinator is asked past the blind share), a gRPC call, scrapes.
	for i := range 60 {
		n.node.Check(t, "api:sandbox-"+strconv.Itoa(i%4))
		n.node.Check(t, "client-"+strconv.Itoa(i))
	}
	rls := n.node.RLS(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	if _, err := rls.ShouldRateLimit(ctx, &rlsv3.RateLimitRequest{Domain: "sandbox", Descriptors: deployCall("u").Descriptors}); err != nil {
		t.Errorf("ShouldRateLimit: %v", err)
	}
	cancel()
	for _, path := range []string{"/metrics", "/cluster", "/healthz"} {
		if code, _, err := n.node.Get(path); err != nil || code != 200 {
			t.Errorf("%s: %d %v", path, code, err)
		}
	}
	// A rule file changed on disk (fsnotify), then SIGHUP (rules and keys).
	reloads := func() float64 { return n.node.Metric(t, "limiterd_rule_reloads_total", "result", "success") }
	rules, _ := os.ReadFile(n.rules)
	if err := os.WriteFile(n.rules, append(rules, []byte("# changed\n")...), 0o640); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, "a reload of the changed rule file", 20*time.Second, func() bool { return reloads() >= 1 })
	if err := n.node.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	nodetest.Eventually(t, "a rule reload on SIGHUP", 20*time.Second, func() bool { return reloads() >= 2 })
	if err := n.node.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-n.node.Exited():
	case <-time.After(60 * time.Second):
		t.Fatal("the traced node did not stop on SIGTERM")
	}
	if n.node.ExitCode() != 0 {
		t.Fatalf("the node exited %d on SIGTERM:\n%s", n.node.ExitCode(), n.node.Stderr.String())
	}

	tr := deployParseTrace(t, n.traced)
	t.Logf("strace: %d lines, %d distinct system calls, socket families %v, %d paths opened", tr.lines, len(tr.calls), deployKeys(tr.families), len(tr.opened))
	t.Logf("system calls: %v", deployKeys(tr.calls))
	t.Logf("paths opened: %v", deployKeys(tr.opened))
	var outside []string
	for c := range tr.calls {
		if !allowed[c] {
			outside = append(outside, c)
		}
	}
	sort.Strings(outside)
	if len(outside) > 0 {
		t.Errorf("system calls outside SystemCallFilter=%q: %v", unit["SystemCallFilter"], outside)
	}
	for f := range tr.families {
		if !families[f] {
			t.Errorf("a socket of family %s, which RestrictAddressFamilies= forbids", f)
		}
	}
	for _, l := range tr.wx {
		t.Errorf("writable and executable memory, which MemoryDenyWriteExecute= forbids: %s", l)
	}
	for _, l := range tr.namespaces {
		t.Errorf("a new namespace, which RestrictNamespaces= forbids: %s", l)
	}
	devices := regexp.MustCompile(`^/dev/(null|zero|full|random|urandom|tty|ptmx|pts/.*|shm/.*|stdin|stdout|stderr|fd/.*)$`)
	procSubset := strings.Join(unit["ProcSubset"], "") == "pid"
	ownProc := regexp.MustCompile(`^/proc/(self|thread-self|[0-9]+)(/|$)`)
	for path, write := range tr.opened {
		switch {
		case write && !devices.MatchString(path):
			t.Errorf("%s opened for writing: ProtectSystem=strict makes it read-only", path)
		case strings.HasPrefix(path, "/home/") || strings.HasPrefix(path, "/root/") || strings.HasPrefix(path, "/run/user/"):
			t.Errorf("%s read: ProtectHome= hides it", path)
		case strings.HasPrefix(path, "/dev/") && !devices.MatchString(path):
			t.Errorf("%s opened: PrivateDevices= hides it", path)
		case strings.HasPrefix(path, "/proc/"):
			if m := regexp.MustCompile(`^/proc/([0-9]+)`).FindStringSubmatch(path); m != nil && !tr.pids[m[1]] {
				t.Errorf("%s read: ProtectProc=invisible hides other processes", path)
			}
			if procSubset && !ownProc.MatchString(path) {
				t.Errorf("%s read: ProcSubset=pid hides it", path)
			}
		}
	}
}

// deployTrace is what an strace -f log shows of a process.
type deployTrace struct {
	lines      int
	calls      map[string]bool
	families   map[string]bool
	opened     map[string]bool // path: opened for writing
	pids       map[string]bool // the traced process's threads
	wx         []string        // mappings writable and executable, or made executable
	namespaces []string
}

func deployParseTrace(t *testing.T, path string) deployTrace {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := deployTrace{calls: map[string]bool{}, families: map[string]bool{}, opened: map[string]bool{}, pids: map[string]bool{}}
	call := regexp.MustCompile(`^([0-9]+) +(?:<\.\.\. )?([a-z_][a-z0-9_]*)(?:\(| resumed>)`)
	socket := regexp.MustCompile(`^socket(?:pair)?\((AF_[A-Z0-9]+)`)
	open := regexp.MustCompile(`^open(?:at2?)?\((?:[A-Z_0-9]+, )?"([^"]*)", ([A-Z_|0-9]+)`)
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		tr.lines++
		m := call.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		tr.pids[m[1]] = true
		name := m[2]
		tr.calls[name] = true
		rest := strings.TrimSpace(l[len(m[1]):])
		if s := socket.FindStringSubmatch(rest); s != nil {
			tr.families[s[1]] = true
		}
		if o := open.FindStringSubmatch(rest); o != nil {
			flags := o[2]
			write := strings.Contains(flags, "O_WRONLY") || strings.Contains(flags, "O_RDWR") || strings.Contains(flags, "O_CREAT") || strings.Contains(flags, "O_TRUNC")
			tr.opened[o[1]] = tr.opened[o[1]] || write
		}
		switch name {
		case "mmap":
			if strings.Contains(rest, "PROT_WRITE") && strings.Contains(rest, "PROT_EXEC") {
				tr.wx = append(tr.wx, l)
			}
		case "mprotect", "pkey_mprotect":
			if strings.Contains(rest, "PROT_EXEC") {
				tr.wx = append(tr.wx, l)
			}
		case "clone", "clone3", "unshare", "setns":
			if strings.Contains(rest, "CLONE_NEW") || name == "setns" {
				tr.namespaces = append(tr.namespaces, l)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if tr.lines == 0 || !tr.calls["execve"] {
		t.Fatalf("strace logged nothing of the node (%d lines)", tr.lines)
	}
	return tr
}

func deployKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
