package loadgen

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/limiterd/limiterd/internal/nodetest"
)

// TestServeNoop: the no-op servers answer /check with 200 and the policy
// limitload's preflight wants, on every address, until the context ends.
func TestServeNoop(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var errs nodetest.LockedBuffer
	done := make(chan error)
	go func() {
		done <- ServeNoop(ctx, []string{"127.0.0.1:0", "127.0.0.1:0"}, 600, 60*time.Second, &errs)
	}()
	re := regexp.MustCompile(`serving no-op /check on (127\.0\.0\.1:\d+)`)
	var addrs []string
	for deadline := time.Now().Add(5 * time.Second); len(addrs) < 2 && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		addrs = nil
		for _, m := range re.FindAllStringSubmatch(errs.String(), -1) {
			addrs = append(addrs, m[1])
		}
	}
	if len(addrs) != 2 {
		t.Fatalf("servers: %q", errs.String())
	}
	for _, a := range addrs {
		resp, err := http.Get("http://" + a + "/check?key=k")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit-Policy") != `"default";q=600;w=60` || !strings.Contains(string(body), `"allowed":true`) {
			t.Fatalf("%s: %d %v %s", a, resp.StatusCode, resp.Header, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("served with %v", err)
	}
}
