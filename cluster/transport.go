package cluster

import (
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// guardTransport is the transport raft is given: the real one, with three
// changes.
//
//  1. It refuses raft's heartbeat fast path. hashicorp/raft lets a
//     transport hand heartbeats to a handler on the transport's own
//     goroutine, and that handler adopts a newer term and steps the node
//     down without synchronizing with raft's main loop (hashicorp/raft#695,
//     open as of v1.7.3). A leader whose main loop is between its state
//     check and a dispatch (a process paused and resumed, a busy machine)
//     then writes its clients' entries under the new leader's term, at
//     indexes where the new leader has other entries of that same term:
//     two logs that Raft's log-matching rule says are identical differ, no
//     later append repairs it, and the replicas diverge for good. With the
//     handler refused, every AppendEntries, heartbeats included, goes
//     through the main loop like any other RPC (docs/design.md §2).
//  2. With the overlapped leader write it clamps the commit index sent to
//     followers to what the leader holds on disk (overlapLog.commitBound).
//  3. It records, for the leader's read lease, when each follower last
//     accepted an AppendEntries of this term (readLease).
//  4. It sends one snapshot at a time (snapshotStagger).
type guardTransport struct {
	raft.Transport
	bound func(uint64) uint64 // nil: no clamp
	lease *readLease
	snaps chan struct{} // holds a token while a snapshot is sent
}

// snapshotStagger bounds how long an InstallSnapshot waits for another
// to end before it is sent anyway. A follower installing a snapshot
// answers nothing else until it has restored it (raft's main loop does
// the install, and heartbeats go through that loop, above), so when two
// followers of a three-node cluster install at once, which a restore of a
// backup makes them do, the leader hears from no follower for the whole
// install and, past its lease, steps down: the restore's outcome is then
// unknown to the operator. One at a time, the other follower keeps
// answering heartbeats and the leader keeps its quorum. Delaying an RPC is
// safe in Raft (it is a slower network); the bound keeps a stalled
// install (a paused follower holding its connection) from keeping another
// follower behind for longer than this.
const snapshotStagger = 5 * time.Second

// guardPreVoteTransport keeps raft's pre-vote when the wrapped transport
// supports it.
type guardPreVoteTransport struct {
	*guardTransport
	pv raft.WithPreVote
}

func guard(t raft.Transport, bound func(uint64) uint64, lease *readLease) raft.Transport {
	g := &guardTransport{Transport: t, bound: bound, lease: lease, snaps: make(chan struct{}, 1)}
	if pv, ok := t.(raft.WithPreVote); ok {
		return &guardPreVoteTransport{guardTransport: g, pv: pv}
	}
	return g
}

// heartbeatFastPath lets benchmarks measure what refusing the fast path
// costs; it is never set outside them.
var heartbeatFastPath = false

// SetHeartbeatHandler installs nothing: heartbeats then reach raft through
// the consumer channel and its main loop (see guardTransport).
func (t *guardTransport) SetHeartbeatHandler(cb func(raft.RPC)) {
	if heartbeatFastPath {
		t.Transport.SetHeartbeatHandler(cb)
	}
}

// InstallSnapshot waits, up to snapshotStagger, for any other snapshot
// being sent to be done, then sends this one.
func (t *guardTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	wait := time.NewTimer(snapshotStagger)
	defer wait.Stop()
	select {
	case t.snaps <- struct{}{}:
		defer func() { <-t.snaps }()
	case <-wait.C:
	}
	return t.Transport.InstallSnapshot(id, target, args, resp, data)
}

func (t *guardTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.bound != nil {
		args.LeaderCommitIndex = t.bound(args.LeaderCommitIndex)
	}
	sent := time.Now()
	err := t.Transport.AppendEntries(id, target, args, resp)
	if err == nil && t.lease != nil {
		t.lease.answered(id, args.Term, sent, resp)
	}
	return err
}

func (t *guardTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.Transport.AppendEntriesPipeline(id, target)
	if err != nil || t.bound == nil {
		return p, err
	}
	return &clampPipeline{AppendPipeline: p, bound: t.bound}, nil
}

func (t *guardTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

func (t *guardPreVoteTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.pv.RequestPreVote(id, target, args, resp)
}

type clampPipeline struct {
	raft.AppendPipeline
	bound func(uint64) uint64
}

func (p *clampPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	args.LeaderCommitIndex = p.bound(args.LeaderCommitIndex)
	return p.AppendPipeline.AppendEntries(args, resp)
}

// readLease tells a leader whether it may still answer a read from its own
// state: whether a quorum of voters accepted one of its AppendEntries so
// recently that none of them can yet have voted for another leader.
//
// A follower that accepts an AppendEntries resets its election timer when
// it processes it, which is after the leader sent it, and hashicorp/raft's
// followers refuse to vote while they know a leader, which they forget only
// once that timer (at least HeartbeatTimeout) runs out. So if a quorum,
// counting the leader itself, accepted AppendEntries sent at or after t,
// no other leader can exist before t + HeartbeatTimeout; the lease ends at
// t + LeaderLeaseTimeout, which is no later. The one exception is a
// leadership transfer, whose target is elected at once: the leader gives up
// its lease before it starts one. Heartbeats go out every tenth of the
// heartbeat timeout, so a healthy leader's lease is renewed long before it
// runs out; a leader whose process was paused finds it expired on waking,
// before raft's own lease check has run.
//
// Times are Go's monotonic clock readings.
type readLease struct {
	timeout time.Duration // LeaderLeaseTimeout

	mu    sync.Mutex
	term  uint64
	since time.Time                   // send time of the first accepted AppendEntries in term
	acked map[raft.ServerID]time.Time // send time of the latest accepted AppendEntries in term
	// fresh is closed when an answer moves a follower's acked time
	// (ackedSince waits on it); nil when nobody waits.
	fresh       chan struct{}
	transfering int

	// gossiped is, on the leader, the followers it last gossiped as not
	// answering (reach.go).
	gossiped atomic.Pointer[[]string]
}

func newReadLease(timeout time.Duration) *readLease {
	return &readLease{timeout: timeout, acked: map[raft.ServerID]time.Time{}}
}

// answered records a follower's answer to an AppendEntries sent at sent.
func (l *readLease) answered(id raft.ServerID, term uint64, sent time.Time, resp *raft.AppendEntriesResponse) {
	if !resp.Success || resp.Term != term {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case term > l.term:
		l.term, l.since = term, sent
		clear(l.acked)
	case term < l.term:
		return
	}
	if sent.After(l.acked[id]) {
		l.acked[id] = sent
		if l.fresh != nil {
			close(l.fresh)
			l.fresh = nil
		}
	}
}

// ackedSince reports whether a quorum of voters (self counted) accepted, in
// term, AppendEntries sent at or after start; if not, it returns a channel
// closed when another answer is recorded.
func (l *readLease) ackedSince(self raft.ServerID, term uint64, voters []raft.ServerID, start time.Time) (bool, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, isVoter := 0, false
	for _, v := range voters {
		if v == self {
			n++
			isVoter = true
			continue
		}
		if t, ok := l.acked[v]; ok && term == l.term && !t.Before(start) {
			n++
		}
	}
	if isVoter && n > len(voters)/2 {
		return true, nil
	}
	if l.fresh == nil {
		l.fresh = make(chan struct{})
	}
	return false, l.fresh
}

// holds reports whether a leader of term whose voters are voters (itself
// included) holds the lease at now.
func (l *readLease) holds(self raft.ServerID, term uint64, voters []raft.ServerID, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.transfering > 0 || term != l.term && len(voters) > 1 {
		return false
	}
	fresh, isVoter := 0, false
	for _, v := range voters {
		if v == self {
			fresh++
			isVoter = true
			continue
		}
		if t, ok := l.acked[v]; ok && now.Sub(t) < l.timeout {
			fresh++
		}
	}
	return isVoter && fresh > len(voters)/2
}

// transfer suspends the lease while a leadership transfer is under way;
// the returned func ends the suspension.
func (l *readLease) transfer() func() {
	l.mu.Lock()
	l.transfering++
	l.mu.Unlock()
	return func() {
		l.mu.Lock()
		l.transfering--
		l.mu.Unlock()
	}
}
