package clustersim

import "time"

// Times is the time one node spent inside its Engine (Config.Timed): Tick
// on the ticks without anti-entropy (collecting the changes and encoding
// them), Tick on the ticks with it (the same, plus scanning for hot keys
// and encoding them, or the heartbeat), Receive (decoding and merging)
// and Ask, the asking side of its checks at the margin.
type Times struct {
	Tick, Hot, Receive EngineTime
	// Ask is the engine time of the node's checks that went to a
	// coordinator: its Engine.Ask, the coordinator's Receive of the ask
	// (on the coordinator's engine, counted here because the check paid
	// for it), the Receive of the answer and AskExpired. A check decided
	// on its own coordinator is all Ask.
	Ask EngineTime
}

// Total is the time of every Engine call: Tick, Hot, Receive and Ask.
func (t Times) Total() EngineTime {
	return EngineTime{
		Wall: t.Tick.Wall + t.Hot.Wall + t.Receive.Wall + t.Ask.Wall,
		CPU:  t.Tick.CPU + t.Hot.CPU + t.Receive.CPU + t.Ask.CPU,
		// A kind of call never made reads 0 and CPUOK false: the CPU
		// time is known when every call made was measured.
		CPUOK: t.Tick.CPUOK || t.Hot.CPUOK || t.Receive.CPUOK || t.Ask.CPUOK,
	}
}

// Sub is the time spent between an earlier reading t0 and t.
func (t Times) Sub(t0 Times) Times {
	return Times{Tick: t.Tick.Sub(t0.Tick), Hot: t.Hot.Sub(t0.Hot), Receive: t.Receive.Sub(t0.Receive), Ask: t.Ask.Sub(t0.Ask)}
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

// add is t and u together.
func (t EngineTime) add(u EngineTime) EngineTime {
	return EngineTime{Wall: t.Wall + u.Wall, CPU: t.CPU + u.CPU, CPUOK: t.CPUOK || u.CPUOK}
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
