package fsm

import "sync"

// interner shares one copy of strings that repeat across jobs (streams,
// roles, targets, states), so a million queued jobs of stream
// "default" hold one "default" and not a million. It only saves memory: an
// interned string equals the one it replaces.
type interner struct {
	mu sync.Mutex // held by the one decoder using it (an apply batch or a restore)
	m  map[string]string
	// recent holds the strings last looked up, by a hash of their length
	// and ends: most lookups are of a few strings over and over (a
	// restore's "default", "queued", "created"...), found here by one
	// comparison rather than a map lookup.
	recent [64]string
}

// Bounds: a stream of distinct values (say, worker ids) must not grow the
// table without limit; past it, strings are simply copied.
const (
	internMaxEntries = 4096
	internMaxLen     = 64
)

func newInterner() *interner {
	in := &interner{m: make(map[string]string, 64)}
	for _, s := range []string{
		string(StateQueued), string(StateRunning), string(StateDone), string(StateFailed), string(StateDead), string(StateCancelled),
		string(OutcomeRunning), string(OutcomeCompleted), string(OutcomeFailed), string(OutcomeReleased),
		string(OutcomeExpired), string(OutcomeCancelled),
		DefaultStream, HeadRole, "reaper", "lease expired",
	} {
		in.m[s] = s
	}
	return in
}

// bytes returns p as a string, shared when it has been seen before.
func (in *interner) bytes(p []byte) string {
	var h uint
	if n := len(p); n > 0 {
		h = (uint(n) ^ uint(p[0])<<1 ^ uint(p[n-1])<<3 ^ uint(p[n/2])<<2) % uint(len(in.recent))
		if s := in.recent[h]; s == string(p) {
			return s
		}
	}
	s, ok := in.m[string(p)]
	if !ok {
		s = string(p)
		if len(in.m) < internMaxEntries && len(p) <= internMaxLen {
			in.m[s] = s
		}
	}
	if len(p) > 0 && len(p) <= internMaxLen {
		in.recent[h] = s
	}
	return s
}

// str returns s, or the shared copy of an equal string.
func (in *interner) str(s string) string {
	if t, ok := in.m[s]; ok {
		return t
	}
	if len(in.m) < internMaxEntries && len(s) <= internMaxLen {
		in.m[s] = s
	}
	return s
}

// actor returns a.String(), shared.
func (in *interner) actor(a Actor) string {
	if a.WorkerID == "" {
		return in.str(a.Role)
	}
	var buf [internMaxLen]byte
	k := append(append(append(buf[:0], a.Role...), '/'), a.WorkerID...)
	return in.bytes(k)
}
