package queue

import (
	"context"
	"errors"
)

// Consistency is how fresh a read must be.
type Consistency int

const (
	// ReadDefault: the leader answers from its own state while it holds
	// its read lease; every write it acknowledged is in it.
	ReadDefault Consistency = iota
	// ReadConsistent: linearizable; the leader confirms its leadership
	// with a quorum round and applies everything committed before it reads.
	ReadConsistent
	// ReadStale: this node's state as applied, whatever its role.
	ReadStale
)

// ErrNotLeader: the read must be answered by the leader.
var ErrNotLeader = errors.New("queue: this node is not the leader")

// Read runs fn on this node's state at the consistency asked for, with the
// index the state reflects. It returns ErrNotLeader when only the leader
// may answer.
//
// fn may run twice. A default read runs it at once with tentative set, and
// checks the read lease after it: a leader paused mid-read (SIGSTOP, a
// stalled VM) wakes to find the lease gone, and then the tentative answer
// does not stand: fn runs again, not tentative, after a quorum round, or
// Read fails (ErrNotLeader if another node leads now). So a tentative run
// must hold its answer back, and release it only if Read reports that it
// stands.
func (s *Service) Read(ctx context.Context, c Consistency, fn func(index uint64, tentative bool) error) (tentativeStands bool, err error) {
	if c == ReadStale {
		return false, fn(s.cluster.AppliedIndex(), false)
	}
	if !s.cluster.IsLeader() {
		return false, ErrNotLeader
	}
	if c == ReadDefault {
		err := fn(s.cluster.AppliedIndex(), true)
		if s.cluster.StillRecent() {
			return true, err
		}
		s.leaseMisses.Add(1)
		if !s.cluster.IsLeader() {
			return false, ErrNotLeader
		}
	}
	idx, err := s.cluster.ConsistentIndex(ctx)
	if err != nil {
		return false, err
	}
	if err := s.cluster.WaitForApplied(ctx, idx); err != nil {
		return false, err
	}
	return false, fn(s.cluster.AppliedIndex(), false)
}
