package cluster

// Reads: what a node may answer from its own state, and when. A linearizable
// read takes the commit index, confirms leadership with a quorum and waits
// for that index to be applied (ConsistentIndex, WaitForApplied); a read of
// bounded staleness takes the index this node knows (RecentIndex) and is
// answered only if the node can still vouch for it after reading
// (StillRecent, the read lease of transport.go).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
)

// VerifyLeader confirms with a quorum that this node is still the leader. It
// returns ErrNotLeader if not (or if the node is not yet ready).
func (n *Node) VerifyLeader(ctx context.Context) error {
	if n.isShutdown() {
		return ErrShutdown
	}
	if !n.IsLeader() {
		return ErrNotLeader
	}
	start := time.Now()
	term := n.raft.CurrentTerm()
	err, ctxDone := n.waitFuture(ctx, n.raft.VerifyLeader())
	if ctxDone {
		return err
	}
	if err != nil {
		if errors.Is(err, raft.ErrRaftShutdown) {
			return ErrShutdown
		}
		return fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	return n.quorumSince(ctx, term, start)
}

// quorumSince waits until a quorum of voters has accepted AppendEntries of
// term sent after start. raft's VerifyLeader counts any successful answer
// that arrives after it begins, including one to a request sent before: a
// leader paused (SIGSTOP, a stalled VM) while a new one was elected finds,
// on waking, answers its followers gave before the election waiting in its
// sockets, and would confirm itself on them. An answer to a request sent
// after the verification began cannot predate it. Heartbeats go out every
// tenth of the heartbeat timeout, so a leader that is one waits about that
// long at most; one that is not gives up after the leader lease.
func (n *Node) quorumSince(ctx context.Context, term uint64, start time.Time) error {
	cfg := n.raft.GetConfiguration().Configuration()
	voters := make([]raft.ServerID, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
		}
	}
	deadline := time.NewTimer(max(n.cfg.LeaderLeaseTimeout, 100*time.Millisecond))
	defer deadline.Stop()
	for {
		if n.raft.CurrentTerm() != term || n.raft.State() != raft.Leader {
			return fmt.Errorf("%w: leadership changed while it was being confirmed", ErrNotLeader)
		}
		ok, fresh := n.lease.ackedSince(raft.ServerID(n.cfg.NodeID), term, voters, start)
		if ok {
			return nil
		}
		select {
		case <-fresh:
		case <-deadline.C:
			return fmt.Errorf("%w: no quorum answered after the leadership check began", ErrNotLeader)
		case <-ctx.Done():
			return ctx.Err()
		case <-n.shutdownCh:
			return ErrShutdown
		}
	}
}

// ConsistentIndex implements a linearizable read index: on the ready leader it
// records the commit index, confirms leadership with a quorum and returns that
// index. The caller then WaitForApplied(index) and reads local state.
func (n *Node) ConsistentIndex(ctx context.Context) (uint64, error) {
	if !n.IsLeader() {
		return 0, ErrNotLeader
	}
	idx := n.raft.CommitIndex()
	if err := n.VerifyLeader(ctx); err != nil {
		return 0, err
	}
	return idx, nil
}

// RecentIndex is the index at which this node may answer a read from its own
// state with bounded staleness, without a quorum round: the commit index it
// knows. ok is true on the ready leader (raft steps a leader down once it has
// not reached a quorum for LeaderLeaseTimeout, the same bound default reads
// rely on) and on a follower that heard from a leader within
// LeaderLeaseTimeout (so what it knows to be committed was the leader's
// commit index no longer ago than that). A candidate, a follower cut off
// from the leader, or a node still starting answers ok false. The caller
// waits for the index (WaitForApplied) before reading.
//
// A process can be paused between taking the index and answering (SIGSTOP,
// a stalled VM, a long GC): the caller reads its state, then asks
// StillRecent before it answers, and answers from a quorum instead if that
// says no.
func (n *Node) RecentIndex() (index uint64, ok bool) {
	if n.IsLeader() {
		if !n.leaseHeld() {
			return 0, false
		}
		return n.raft.CommitIndex(), true
	}
	if n.raft.State() != raft.Follower {
		return 0, false
	}
	if _, lid := n.raft.LeaderWithID(); lid == "" {
		return 0, false
	}
	// The contact time first, then the commit index: raft records a contact
	// after taking the commit index an append carried, so the index read
	// second is at least the one the leader sent in its latest append.
	// Heartbeats carry none: a follower whose appends lag behind its
	// heartbeats knows an older commit index than the contact suggests,
	// which the caller's X-Spine-Min-Index bounds for its own writes and
	// lease fencing makes harmless for others' (design.md §7).
	if time.Since(n.raft.LastContact()) >= n.cfg.LeaderLeaseTimeout {
		return 0, false
	}
	return n.raft.CommitIndex(), true
}

// StillRecent reports whether what this node read from its own state after
// RecentIndex said ok may still be answered: it checks again, after the
// read, that the leader holds its read lease (readLease) or that the
// follower heard from its leader within LeaderLeaseTimeout. A node paused
// after taking the index, or after reading, wakes up to find this false.
func (n *Node) StillRecent() bool {
	if n.IsLeader() {
		return n.leaseHeld()
	}
	_, ok := n.RecentIndex()
	return ok
}

// leaseHeld reports whether this leader holds its read lease now.
func (n *Node) leaseHeld() bool {
	term := n.raft.CurrentTerm()
	cfg := n.raft.GetConfiguration().Configuration()
	voters := make([]raft.ServerID, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		if s.Suffrage == raft.Voter {
			voters = append(voters, s.ID)
		}
	}
	return n.lease.holds(raft.ServerID(n.cfg.NodeID), term, voters, time.Now()) && n.raft.State() == raft.Leader
}

// AppliedIndex returns the highest log index up to which every entry has been
// applied to the local FSM. Entries the FSM never sees (no-ops, barriers)
// count as applied once raft has dispatched them.
func (n *Node) AppliedIndex() uint64 {
	fsmIdx := n.tracker.applied.Load()
	raftIdx := n.raft.AppliedIndex()
	if raftIdx <= fsmIdx {
		return fsmIdx
	}
	// Entries in (fsmIdx, raftIdx] were handed to the FSM goroutine. Skip
	// over the ones it will not pass to the FSM; stop at the first that it
	// will (it is still in flight). Bounded: the gap is normally 1-2.
	limit := min(raftIdx, fsmIdx+128)
	var l raft.Log
	for i := fsmIdx + 1; i <= limit; i++ {
		if err := n.stores.logs.GetLog(i, &l); err != nil {
			return i - 1
		}
		switch l.Type {
		case raft.LogNoop, raft.LogBarrier, raft.LogAddPeerDeprecated, raft.LogRemovePeerDeprecated:
		default:
			return i - 1
		}
	}
	return limit
}

// pollInterval bounds how long WaitForApplied sleeps between checks when no
// FSM apply wakes it (entries the FSM never sees do not notify).
const pollInterval = 5 * time.Millisecond

// WaitForApplied blocks until the local FSM has applied every entry up to
// index, ctx is done, or ApplyTimeout passes if ctx has no deadline.
func (n *Node) WaitForApplied(ctx context.Context, index uint64) error {
	if n.AppliedIndex() >= index {
		return nil
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, n.cfg.ApplyTimeout)
		defer cancel()
	}
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		wake := n.tracker.wait()
		if n.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-wake:
		case <-t.C:
		case <-ctx.Done():
			return fmt.Errorf("wait for applied index %d (at %d): %w", index, n.AppliedIndex(), ctx.Err())
		case <-n.shutdownCh:
			return ErrShutdown
		}
	}
}
