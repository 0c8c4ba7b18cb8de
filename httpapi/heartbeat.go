package httpapi

import (
	"context"
	"net/http"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// heartbeat extends a lease, or answers from the committed lease when it
// is fresh enough (Config.LeaseRenewFraction) that a log entry would only
// move its expiry by a little.
//
// A fresh lease the caller holds is confirmed at default consistency, with
// no quorum round: by the leader from its own state, which holds every
// write it acknowledged; or by a follower that heard from the leader within
// the leader lease, if the caller says what it has seen (X-Spine-Min-Index,
// the index of its claim or of its last answer): the follower first applies
// that index and the commit index it knows (cluster RecentIndex). Every
// lease a node applies is committed, so no failover takes back what the
// answer says; it may only miss another client's change committed within
// the last leader lease (a head's release), which the next heartbeat or
// the fenced complete reports. With ?consistent, and for every refusal, the
// leader answers from a linearizable view instead: it confirms its
// leadership with a quorum and waits until it has applied everything
// committed before the heartbeat arrived; a refusal needs no entry either.
func (s *Server) heartbeat(ctx context.Context, w http.ResponseWriter, c *call, cmd *fsm.HeartbeatCommand) (*fsm.Result, error) {
	f := s.cfg.LeaseRenewFraction
	if f > 0 && !c.consistent && (!c.local || c.minIndex > 0) {
		if res, idx, ok := s.recentHeartbeat(ctx, cmd, f, c.minIndex); ok {
			if w != nil {
				s.setIndex(w, idx)
			}
			return res, nil
		}
	}
	if c.local {
		return nil, errNeedLeader
	}
	if f > 0 {
		// A local look first, so a heartbeat that will be written pays for
		// no quorum round trip.
		if _, ok := s.state.Peek().Heartbeat(cmd, f); ok {
			idx, err := s.cluster.ConsistentIndex(ctx)
			if err != nil {
				return nil, err
			}
			if err := s.cluster.WaitForApplied(ctx, idx); err != nil {
				return nil, err
			}
			if res, ok := s.state.Peek().Heartbeat(cmd, f); ok {
				if w != nil {
					s.setIndex(w, s.cluster.AppliedIndex())
				}
				return s.result(res)
			}
		}
	}
	return s.apply(ctx, w, fsm.CmdHeartbeat, cmd)
}

// recentWait bounds how long a node waits to apply the commit index it
// knows before answering a heartbeat itself; past it the leader answers.
const recentWait = 50 * time.Millisecond

// recentHeartbeat confirms a fresh lease from this node's own recent state
// (see heartbeat), once it has applied the commit index it knows. ok is false
// when this node cannot vouch for its state, does not yet know minIndex to be
// committed, or the lease is not the caller's or is due for an extension.
func (s *Server) recentHeartbeat(ctx context.Context, cmd *fsm.HeartbeatCommand, renewFraction float64, minIndex uint64) (*fsm.Result, uint64, bool) {
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
