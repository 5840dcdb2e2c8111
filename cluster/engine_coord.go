package cluster

import (
	"fmt"
	"time"

	"github.com/limiterd/limiterd/counter"
)

// Coordinator returns the name of key's coordinator as this engine sees
// the cluster: CoordinatorOf over this node and its up peers. Nodes that
// see the same members agree; during a change of membership two nodes may
// each take another for the coordinator for a moment (see package counter
// for what that costs).
func (e *Engine) Coordinator(key string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	best, bestScore := e.cfg.Self, mix64(fnv64(key)^e.selfHash)
	kh := fnv64(key)
	for name, p := range e.peers {
		if !p.Up {
			continue
		}
		if s := mix64(kh ^ p.nameHash); s > bestScore || s == bestScore && name < best {
			best, bestScore = name, s
		}
	}
	return best
}

// AskMessage encodes ask, under the asker's id, for the key's coordinator.
// The answer comes back through EngineConfig.OnAnswer with the same id.
func (e *Engine) AskMessage(now time.Time, id uint64, ask *counter.Ask) ([]byte, error) {
	return encodeAsk(e.h, e.cfg.Self, now, id, ask)
}

// ReleaseMessage encodes the release of ask id: sent to the coordinator
// when no answer came in time, so that a grant it may have made, and this
// node did not count, stops counting there at once.
func (e *Engine) ReleaseMessage(now time.Time, id uint64, ask *counter.Ask) ([]byte, error) {
	return encodeRelease(e.h, e.cfg.Self, now, id, ask)
}

// member reports whether messages from name are heard (EngineConfig.Members).
func (e *Engine) member(name string) bool {
	return e.cfg.Members == nil || e.cfg.Members(name)
}

// isCoordKind reports whether a message is an ask, answer or release.
func isCoordKind(b []byte) bool {
	return len(b) > 0 && (b[0] == kindAsk || b[0] == kindAnswer || b[0] == kindRelease)
}

// receiveCoord handles an ask (decided here, the answer returned for the
// sender), an answer (handed to OnAnswer) or a release.
func (e *Engine) receiveCoord(now time.Time, b []byte) (string, []Outbound, error) {
	switch b[0] {
	case kindAsk:
		var a counter.Ask
		from, _, id, err := decodeAsk(e.h, b, e.cfg.Limits, &a)
		if err != nil {
			e.Stats.DecodeErrors.Add(1)
			return "", nil, err
		}
		if from == e.cfg.Self {
			return from, nil, nil
		}
		if !e.member(from) {
			e.Stats.NotMember.Add(1)
			return from, nil, fmt.Errorf("%w: %.64q is no member here", ErrNotMember, from)
		}
		e.Stats.AsksAnswered.Add(1)
		res := make([]counter.Result, len(a.Limits))
		d, cerr := e.c.Coordinate(now, from, id, &a, res)
		status := answerDecided
		if cerr != nil {
			status = answerUnable
		}
		msg, err := encodeAnswer(e.h, e.cfg.Self, now, id, status, d.Allowed && cerr == nil, res)
		if err != nil {
			return from, nil, err
		}
		return from, []Outbound{{To: from, Purpose: PurposeAnswer, Msgs: [][]byte{msg}, Reliable: len(msg) > e.cfg.DatagramBytes}}, nil
	case kindAnswer:
		a, err := decodeAnswer(e.h, b, e.cfg.Limits)
		if err != nil {
			e.Stats.DecodeErrors.Add(1)
			return "", nil, err
		}
		if e.cfg.OnAnswer != nil {
			e.cfg.OnAnswer(a)
		}
		return a.From, nil, nil
	default: // kindRelease
		m, err := decodeRelease(e.h, b, e.cfg.Limits)
		if err != nil {
			e.Stats.DecodeErrors.Add(1)
			return "", nil, err
		}
		if !e.member(m.From) {
			e.Stats.NotMember.Add(1)
			return m.From, nil, fmt.Errorf("%w: %.64q is no member here", ErrNotMember, m.From)
		}
		e.Stats.Releases.Add(1)
		e.c.Release(now, m.From, m.ID, m.Key, m.Limits)
		return m.From, nil, nil
	}
}
