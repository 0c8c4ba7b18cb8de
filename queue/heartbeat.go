package queue

import (
	"context"
	"fmt"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// HeartbeatInput extends the lease Ref names.
type HeartbeatInput struct {
	Ref   fsm.LeaseRef
	Actor fsm.Actor
	// Consistent asks for a linearizable answer: always from the leader,
	// after a quorum round.
	Consistent bool
	// Local is set when this node is a follower answering what it can from
	// its own state (ErrNeedLeader otherwise).
	Local bool
	// MinIndex is the highest index the caller has seen in an answer (the
	// index of its claim or of its last heartbeat's answer); 0 if unknown.
	MinIndex uint64
	// Progress and Checkpoint (raw JSON, nil: none) make the heartbeat a
	// write that also reports them (fsm.HeartbeatCommand with progress).
	Progress, Checkpoint []byte
}

// Limits of what a heartbeat reports.
const (
	MaxProgressBytes   = 4 << 10
	MaxCheckpointBytes = 64 << 10
)

// Heartbeat extends a lease, or answers from the committed lease when it
// is fresh enough (Config.LeaseRenewFraction) that a log entry would only
// move its expiry by a little. index is the state the answer reflects.
//
// A fresh lease the caller holds is confirmed at default consistency, with
// no quorum round: by the leader from its own state, which holds every
// write it acknowledged; or by a follower that heard from the leader within
// the leader lease, if the caller says what it has seen (MinIndex): the
// follower first applies that index and the commit index it knows (cluster
// RecentIndex). Every lease a node applies is committed, so no failover
// takes back what the answer says; it may only miss another client's
// change committed within the last leader lease (a head's release), which
// the next heartbeat or the fenced complete reports. With Consistent, and
// for every refusal, the leader answers from a linearizable view instead:
// it confirms its leadership with a quorum and waits until it has applied
// everything committed before the heartbeat arrived; a refusal needs no
// entry either.
func (s *Service) Heartbeat(ctx context.Context, in HeartbeatInput) (*fsm.Result, uint64, error) {
	if err := s.mayAct(ctx, "heartbeat", in.Ref, in.Actor); err != nil {
		if in.Local {
			return nil, 0, ErrNeedLeader // refusals are the leader's to make
		}
		return nil, 0, err
	}
	cmd := &fsm.HeartbeatCommand{Now: s.now(), Ref: in.Ref, Actor: in.Actor, LeaseNanos: s.cfg.Lease.Nanoseconds()}
	if in.Progress != nil || in.Checkpoint != nil {
		// Something to keep: always written, by the leader.
		switch {
		case len(in.Progress) > MaxProgressBytes:
			return nil, 0, &TooLargeError{Message: fmt.Sprintf("progress is larger than %d bytes", MaxProgressBytes)}
		case len(in.Checkpoint) > MaxCheckpointBytes:
			return nil, 0, &TooLargeError{Message: fmt.Sprintf("checkpoint is larger than %d bytes", MaxCheckpointBytes)}
		case in.Local:
			return nil, 0, ErrNeedLeader
		case !s.atLevel(ctx, fsm.LevelIdentity):
			return nil, 0, ErrUpgradeInProgress
		}
		cmd.Progress, cmd.Checkpoint = in.Progress, in.Checkpoint
		return s.Propose(ctx, fsm.CmdHeartbeat, cmd)
	}
	f := s.cfg.LeaseRenewFraction
	if f > 0 && !in.Consistent && (!in.Local || in.MinIndex > 0) {
		if res, idx, ok := s.recentHeartbeat(ctx, cmd, f, in.MinIndex); ok {
			return res, idx, nil
		}
	}
	if in.Local {
		return nil, 0, ErrNeedLeader
	}
	if f > 0 {
		// A local look first, so a heartbeat that will be written pays for
		// no quorum round trip.
		if _, ok := s.state.Peek().Heartbeat(cmd, f); ok {
			idx, err := s.cluster.ConsistentIndex(ctx)
			if err != nil {
				return nil, 0, err
			}
			if err := s.cluster.WaitForApplied(ctx, idx); err != nil {
				return nil, 0, err
			}
			if res, ok := s.state.Peek().Heartbeat(cmd, f); ok {
				idx := s.cluster.AppliedIndex()
				if res.Err != nil {
					return res, idx, &Refusal{Err: res.Err, Job: res.Job, Index: idx}
				}
				return res, idx, nil
			}
		}
	}
	return s.Propose(ctx, fsm.CmdHeartbeat, cmd)
}

// recentWait bounds how long a node waits to apply the commit index it
// knows before answering a heartbeat itself; past it the leader answers.
const recentWait = 50 * time.Millisecond

// recentHeartbeat confirms a fresh lease from this node's own recent state
// (see Heartbeat), once it has applied the commit index it knows. ok is
// false when this node cannot vouch for its state, does not yet know
// minIndex to be committed, or the lease is not the caller's or is due for
// an extension.
func (s *Service) recentHeartbeat(ctx context.Context, cmd *fsm.HeartbeatCommand, renewFraction float64, minIndex uint64) (*fsm.Result, uint64, bool) {
	idx, ok := s.cluster.RecentIndex()
	if !ok || idx < minIndex {
		// A follower learns that an entry is committed from the leader's
		// next append; until then the caller's write is not its to read.
		return nil, 0, false
	}
	if s.cluster.AppliedIndex() < idx {
		wctx, cancel := context.WithTimeout(ctx, recentWait)
		err := s.cluster.WaitForApplied(wctx, idx)
		cancel()
		if err != nil {
			return nil, 0, false
		}
	}
	res, ok := s.state.Peek().Heartbeat(cmd, renewFraction)
	if !ok || res.Err != nil {
		return nil, 0, false
	}
	// Checked again after the read: a node paused since RecentIndex may
	// have read a state the cluster has moved on from.
	if !s.cluster.StillRecent() {
		s.leaseMisses.Add(1)
		return nil, 0, false
	}
	s.localHeartbeats.Add(1)
	return res, idx, true
}
