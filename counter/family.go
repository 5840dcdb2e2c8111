package counter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// ErrFamilyFull is returned by (*Counter).Limit for a new (window, slices)
// pair of a family (Family) that has registered as many pairs as it may.
var ErrFamilyFull = errors.New("counter: limit family full")

// family is a declared family of limits: its registrations so far, at
// most maxPairs of them.
type family struct {
	maxPairs int
	pairs    int
}

// Family declares name a family of limits: limits whose max is stated
// per call (Limit.WithMax) rather than by a registration, such as the
// limits a request carries (package limiter's overrides). A family has at
// most maxPairs registrations, one per (window, slices) pair, however they
// come: (*Counter).Limit, or on first sight of a well-formed identity
// (LimitID) of the family in Merge's entries or in an ask (Coordinate), so
// that a node which never checked a pair itself still keeps its peers'
// counts of it and can coordinate it. Past maxPairs, Limit returns
// ErrFamilyFull, and a peer's entries or ask of a new pair are treated as
// of an unknown limit (MergeStats.Unknown, ErrUnknownLimit): the registry
// grows by at most maxPairs, whatever the requests or messages.
//
// A family registration's max, where no call is at hand, is MaxLimit,
// fixed, whatever the calls' maxes (doc.go, "Limits stated per call"):
// a Limit of the family always carries its call's max (WithMax), and an
// ask of one states it (Ask.Max), which Coordinate requires.
//
// Declare a family before any limit of its name is registered (a limiter
// declares its overrides' family in New): Family refuses a name with plain
// registrations, and a second declaration with another maxPairs. Declaring
// the same family again is a no-op.
func (c *Counter) Family(name string, maxPairs int) error {
	if name == "" || strings.Contains(name, "|") {
		return fmt.Errorf("%w: a family name must be non-empty and without '|', got %q", ErrInvalidLimit, name)
	}
	if maxPairs < 1 || maxPairs > 1<<12 {
		return fmt.Errorf("%w: a family has 1 to %d (window, slices) pairs, got %d", ErrInvalidLimit, 1<<12, maxPairs)
	}
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if f, ok := c.families[name]; ok {
		if f.maxPairs != maxPairs {
			return fmt.Errorf("%w: family %q is declared with %d pairs already, not %d", ErrInvalidLimit, name, f.maxPairs, maxPairs)
		}
		return nil
	}
	for _, in := range c.infos {
		if n, _, _, ok := parseLimitID(in.id); ok && n == name {
			return fmt.Errorf("%w: %q names registered limits already; declare the family first", ErrInvalidLimit, name)
		}
	}
	if c.families == nil {
		c.families = make(map[string]*family)
	}
	c.families[strings.Clone(name)] = &family{maxPairs: maxPairs}
	return nil
}

// parseLimitID splits a LimitID into its name, window in ms and slices.
// The name may itself hold '|': the last two fields are the numbers.
func parseLimitID(id string) (name string, windowMs int64, slices int, ok bool) {
	rest, s, ok1 := cutLast(id)
	name, w, ok2 := cutLast(rest)
	if !ok1 || !ok2 {
		return "", 0, 0, false
	}
	wm, err1 := strconv.ParseInt(w, 10, 64)
	sl, err2 := strconv.Atoi(s)
	if err1 != nil || err2 != nil {
		return "", 0, 0, false
	}
	return name, wm, sl, true
}

func cutLast(s string) (before, after string, ok bool) {
	i := strings.LastIndexByte(s, '|')
	if i < 0 {
		return "", "", false
	}
	return s[:i], s[i+1:], true
}

// checkLimit validates a limit's max, window and slices as Limit does.
func checkLimit(max int64, window time.Duration, slices int) error {
	switch {
	case max < 1 || max > MaxLimit:
		return fmt.Errorf("%w: limit must be between 1 and %d, got %d", ErrInvalidLimit, MaxLimit, max)
	case window < time.Millisecond || window > MaxWindow || window%time.Millisecond != 0:
		return fmt.Errorf("%w: window must be a whole number of milliseconds between 1ms and %v, got %v", ErrInvalidLimit, MaxWindow, window)
	case slices < 1 || slices > MaxSlices:
		return fmt.Errorf("%w: slices must be between 1 and %d, got %d", ErrInvalidLimit, MaxSlices, slices)
	case window/time.Millisecond < time.Duration(slices):
		return fmt.Errorf("%w: a slice must last at least 1ms, got window %v over %d slices", ErrInvalidLimit, window, slices)
	}
	return nil
}

// register returns the slot of the limit id, registering it first if it
// is new; under regMu. A registration of a family (fam non-nil) counts
// against the family's pairs and keeps MaxLimit as its max; a plain one
// takes max.
func (c *Counter) register(id string, max, windowMs int64, slices int, fam *family) (uint16, error) {
	if slot, ok := c.slots[id]; ok {
		if fam == nil && c.infos[slot].max != max {
			c.infos[slot].max = max
			c.regGen.Add(1)
		}
		return slot, nil
	}
	if len(c.slots) > 1<<16-1 {
		return 0, fmt.Errorf("%w: more than %d distinct limits registered", ErrInvalidLimit, 1<<16)
	}
	if fam != nil {
		if fam.pairs >= fam.maxPairs {
			return 0, fmt.Errorf("%w: its %d (window, slices) pairs are registered already", ErrFamilyFull, fam.maxPairs)
		}
		fam.pairs++
		max = MaxLimit
	}
	slot := uint16(len(c.slots))
	id = strings.Clone(id) // the caller's may alias a message
	c.slots[id] = slot
	c.infos = append(c.infos, limitInfo{id: id, windowMs: windowMs, sliceMs: windowMs / int64(slices), max: max, family: fam != nil})
	c.regGen.Add(1)
	return slot, nil
}

// lookupOrRegister is lookupLimit that registers, on first sight, a
// well-formed identity of a declared family with room (Family): for
// Merge and Coordinate, which meet the pairs that peers checked.
func (c *Counter) lookupOrRegister(id string) (uint16, limitInfo, bool) {
	c.regMu.Lock()
	defer c.regMu.Unlock()
	if slot, ok := c.slots[id]; ok {
		return slot, c.infos[slot], true
	}
	name, windowMs, slices, ok := parseLimitID(id)
	if !ok || windowMs > int64(MaxWindow/time.Millisecond) {
		return 0, limitInfo{}, false
	}
	fam := c.families[name]
	if fam == nil || checkLimit(1, time.Duration(windowMs)*time.Millisecond, slices) != nil || LimitID(name, time.Duration(windowMs)*time.Millisecond, slices) != id {
		// Not a family's, out of range, or not in the canonical form
		// ("08" for 8): one pair, one identity.
		return 0, limitInfo{}, false
	}
	slot, err := c.register(id, MaxLimit, windowMs, slices, fam)
	if err != nil {
		return 0, limitInfo{}, false
	}
	return slot, c.infos[slot], true
}
