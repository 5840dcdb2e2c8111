package clustersim

import "time"

// Times is the time one node spent inside its Engine (Config.Timed): Tick
// on the ticks without anti-entropy (collecting the changes and encoding
// them), Tick on the ticks with it (the same, plus scanning for hot keys
// and encoding them, or the heartbeat) and Receive (decoding and merging).
type Times struct {
	Tick, Hot, Receive EngineTime
}

// EngineTime is time spent in Engine calls, in ns: wall clock, and CPU
// time of the thread that made the calls (CPUOK false where the platform
// does not tell). Wall-clock time also counts the time the thread waited
// for a core, which on a shared machine can be most of it; CPU time does
// not.
type EngineTime struct {
	Wall, CPU int64
	CPUOK     bool
}

// Sub is the time spent between an earlier reading e0 and t.
func (t EngineTime) Sub(e0 EngineTime) EngineTime {
	return EngineTime{Wall: t.Wall - e0.Wall, CPU: t.CPU - e0.CPU, CPUOK: t.CPUOK}
}

// stopwatch measures one stretch of Engine calls; the zero value, which
// startWatch returns without Config.Timed, measures nothing.
type stopwatch struct {
	on    bool
	wall  time.Time
	cpu   int64
	cpuOK bool
}

func (s *Cluster) startWatch() stopwatch {
	if !s.cfg.Timed {
		return stopwatch{}
	}
	cpu, ok := ThreadCPU()
	return stopwatch{on: true, wall: time.Now(), cpu: cpu, cpuOK: ok}
}

// stop adds the time since startWatch to t.
func (w stopwatch) stop(t *EngineTime) {
	if !w.on {
		return
	}
	t.Wall += time.Since(w.wall).Nanoseconds()
	cpu, ok := ThreadCPU()
	t.CPUOK = ok && w.cpuOK
	t.CPU += cpu - w.cpu
}
