package cluster

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// rateLog logs at most rateLogBurst lines a second; the lines it
// suppresses are counted and reported with the next one written. It keeps
// a stream of bad packets or a dead peer from flooding the log. The zero
// value is ready.
type rateLog struct {
	mu         sync.Mutex
	window     int64 // unix second of the current window
	written    int   // lines written in it
	suppressed int   // lines suppressed since the last one written
}

// rateLogBurst is how many lines a rateLog writes in one second.
const rateLogBurst = 5

func (r *rateLog) log(l *slog.Logger, level slog.Level, msg string, args ...any) {
	if !l.Enabled(context.Background(), level) {
		return
	}
	sec := time.Now().Unix()
	r.mu.Lock()
	if sec != r.window {
		r.window, r.written = sec, 0
	}
	if r.written >= rateLogBurst {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.written++
	k := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	if k > 0 {
		args = append(args, "suppressed_before", k)
	}
	l.Log(context.Background(), level, msg, args...)
}

// logBridge turns memberlist's log lines ("[WARN] memberlist: ...") into
// slog records at the matching level. Debug lines pass through as they
// come (they are dropped unless debug is on); others are rate-limited per
// level, since a peer with the wrong key makes one error per packet.
type logBridge struct {
	log   *slog.Logger
	limit [4]rateLog // info, warn, error, other
}

func newLogBridge(l *slog.Logger) *logBridge {
	return &logBridge{log: l.With("component", "memberlist")}
}

// Write implements io.Writer for log.Logger; each call is one line.
func (b *logBridge) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	level, slot := slog.LevelInfo, 3
	for _, pre := range []struct {
		tag   string
		level slog.Level
		slot  int
	}{
		{"[DEBUG]", slog.LevelDebug, -1}, {"[INFO]", slog.LevelInfo, 0},
		{"[WARN]", slog.LevelWarn, 1}, {"[ERR]", slog.LevelError, 2}, {"[ERROR]", slog.LevelError, 2},
	} {
		if rest, ok := strings.CutPrefix(line, pre.tag); ok {
			line, level, slot = strings.TrimSpace(rest), pre.level, pre.slot
			break
		}
	}
	line = strings.TrimPrefix(line, "memberlist: ")
	if slot < 0 {
		b.log.Debug(line)
	} else {
		b.limit[slot].log(b.log, level, line)
	}
	return len(p), nil
}
