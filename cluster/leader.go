package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"
)

// leaderHook is a function registered with RunWhileLeader.
type leaderHook struct {
	name string
	fn   func(ctx context.Context)
}

// leaderSession is one term of ready leadership: hooks run under ctx.
type leaderSession struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// RunWhileLeader registers fn to run in its own goroutine whenever this node
// becomes the ready leader (after its post-election Barrier). fn's ctx is
// cancelled when leadership is lost or the node shuts down; fn must return
// promptly then. It may be called before or after New's node starts leading:
// if the node is already the ready leader, fn starts at once.
func (n *Node) RunWhileLeader(name string, fn func(ctx context.Context)) {
	n.hooksMu.Lock()
	defer n.hooksMu.Unlock()
	h := leaderHook{name: name, fn: fn}
	n.hooks = append(n.hooks, h)
	if n.session != nil {
		n.startHookLocked(n.session, h)
	}
}

func (n *Node) startHookLocked(s *leaderSession, h leaderHook) {
	n.hookWG.Add(1)
	go func() {
		defer n.hookWG.Done()
		n.logger.Debug("leader hook starting", "hook", h.name)
		h.fn(s.ctx)
		n.logger.Debug("leader hook stopped", "hook", h.name)
	}()
}

// leaderLoop follows raft's leadership signal. raft.LeaderCh keeps only the
// latest value, so after rapid flaps we may see true twice in a row: every
// signal ends the current session and a true starts a fresh one.
func (n *Node) leaderLoop() {
	defer n.wg.Done()
	var cancel context.CancelFunc
	stop := func() {
		if cancel != nil {
			cancel()
			cancel = nil
		}
		n.endSession()
	}
	for {
		select {
		case <-n.shutdownCh:
			stop()
			return
		case isLeader := <-n.raft.LeaderCh():
			stop()
			if isLeader {
				ctx, c := context.WithCancel(context.Background())
				cancel = c
				n.wg.Add(1)
				go n.establishLeadership(ctx, c)
			} else {
				n.logger.Info("lost leadership")
			}
			n.notifyLeaderChange()
		}
	}
}

// establishLeadership issues a Barrier so the FSM holds every entry
// committed in earlier terms, then marks the node ready and starts hooks.
// Until then IsLeader is false and consistent reads are refused.
func (n *Node) establishLeadership(ctx context.Context, cancel context.CancelFunc) {
	defer n.wg.Done()
	backoff := 50 * time.Millisecond
	for {
		// Wait for the barrier or for leadership to end, whichever comes
		// first: with BatchApplyCh a barrier can sit in raft's buffered
		// apply channel when raft shuts down, and raft never answers it.
		barrier := n.raft.Barrier(n.cfg.ApplyTimeout)
		done := make(chan error, 1)
		go func() { done <- barrier.Error() }()
		var err error
		select {
		case err = <-done:
		case <-ctx.Done():
			return
		}
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			break
		}
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) ||
			errors.Is(err, raft.ErrRaftShutdown) {
			return // the leader loop will get the signal
		}
		n.logger.Warn("leadership barrier failed; retrying", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff = min(backoff*2, time.Second)
		}
	}
	n.hooksMu.Lock()
	if ctx.Err() != nil {
		n.hooksMu.Unlock()
		return
	}
	s := &leaderSession{ctx: ctx, cancel: cancel}
	n.session = s
	n.ready.Store(true)
	for _, h := range n.hooks {
		n.startHookLocked(s, h)
	}
	n.hooksMu.Unlock()
	n.logger.Info("leadership established", "term", n.raft.CurrentTerm())
	n.notifyLeaderChange()
}

// endSession marks the node not ready and cancels running hooks.
func (n *Node) endSession() {
	n.hooksMu.Lock()
	n.ready.Store(false)
	if n.session != nil {
		n.session.cancel()
		n.session = nil
	}
	n.hooksMu.Unlock()
}
