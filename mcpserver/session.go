package mcpserver

import (
	"slices"
	"strings"
	"sync"
	"time"
)

// lease is what a claim handed the session for one job: what fences its
// heartbeats, complete, fail and release.
type lease struct {
	JobID      string
	AttemptID  string
	LeaseToken string
	WorkerID   string
	Stream     string
	// HeartbeatEvery is how often the server wants a heartbeat.
	HeartbeatEvery time.Duration
	ClaimedAt      time.Time
}

// leases are the leases a session holds, by job id. A lease is forgotten
// when its job is finished or released through the session, or when a call
// learns that it ended; one that simply runs out stays until the next call
// about its job says so (or the session ends).
type leases struct {
	mu sync.Mutex
	m  map[string]lease
}

func newLeases() *leases { return &leases{m: map[string]lease{}} }

func (l *leases) put(x lease) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.m[x.JobID] = x
}

func (l *leases) get(jobID string) (lease, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	x, ok := l.m[jobID]
	return x, ok
}

// drop forgets the lease on jobID if it is still the one with token.
func (l *leases) drop(jobID, token string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if x, ok := l.m[jobID]; ok && x.LeaseToken == token {
		delete(l.m, jobID)
	}
}

// all returns the leases, oldest claim first.
func (l *leases) all() []lease {
	l.mu.Lock()
	out := make([]lease, 0, len(l.m))
	for _, x := range l.m {
		out = append(out, x)
	}
	l.mu.Unlock()
	slices.SortFunc(out, func(a, b lease) int {
		if c := a.ClaimedAt.Compare(b.ClaimedAt); c != 0 {
			return c
		}
		return strings.Compare(a.JobID, b.JobID)
	})
	return out
}
