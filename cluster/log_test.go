package cluster

import (
	"bytes"
	"log"
	"log/slog"
	"strings"
	"testing"
)

func TestLogBridgeLevels(t *testing.T) {
	var buf bytes.Buffer
	l := log.New(newLogBridge(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))), "", 0)
	l.Printf("[DEBUG] memberlist: Stream connection from=127.0.0.1:1")
	l.Printf("[INFO] memberlist: Marking n2 as failed")
	l.Printf("[WARN] memberlist: Refuting a suspect message")
	l.Printf("[ERR] memberlist: Failed to send ping")
	l.Printf("no level at all")
	got := buf.String()
	for _, want := range []string{
		`level=INFO msg="Marking n2 as failed" component=memberlist`,
		`level=WARN msg="Refuting a suspect message" component=memberlist`,
		`level=ERROR msg="Failed to send ping" component=memberlist`,
		`level=INFO msg="no level at all"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("log lacks %s:\n%s", want, got)
		}
	}
	if strings.Contains(got, "Stream connection") {
		t.Errorf("a debug line passed at info level:\n%s", got)
	}
}

func TestRateLogSuppressesFloods(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, nil))
	var r rateLog
	for range 100 {
		r.log(lg, slog.LevelWarn, "bad packet")
	}
	// One second is ample for 100 calls; if the window turned over in
	// between, up to twice the burst may pass.
	if n := strings.Count(buf.String(), "bad packet"); n < rateLogBurst || n > 2*rateLogBurst {
		t.Fatalf("%d lines written for 100 calls, want %d (at most %d)", n, rateLogBurst, 2*rateLogBurst)
	}
}
