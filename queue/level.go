package queue

import (
	"context"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// The cluster's level (fsm/level.go) is the one thing the service asks
// before it uses newer behaviour: a command type, a field or a rule that a
// build older than some level does not apply. Every command type up to the
// level command needs fsm.LevelIdentity; the dispatch command needs
// fsm.LevelDelivery.

// levelWait bounds how long a request waits for the leader to raise the
// level every server already supports (a fresh cluster's first moments, or
// the moment a rolling upgrade's last node comes back).
const levelWait = 2 * time.Second

// level is the cluster's level in this node's state.
func (s *Service) level() int { return s.state.Peek().Level() }

// atLevel reports whether the service may use the behaviour of level l:
// the level is in force, or every server supports it and this node, as
// leader, has just raised the cluster to it (waiting at most levelWait).
// It is false while some server runs a build that does not support l:
// the caller answers ErrUpgradeInProgress, or goes on as the older build
// would. A follower that finds every server supporting l answers true: it
// cannot propose, and the leader raises the level.
func (s *Service) atLevel(ctx context.Context, l int) bool {
	if s.level() >= l {
		return true
	}
	if s.cluster.MinSupportedLevel() < l {
		return false
	}
	if !s.cluster.IsLeader() {
		return true
	}
	wctx, cancel := context.WithTimeout(ctx, levelWait)
	defer cancel()
	if _, err := s.RaiseLevel(wctx); err != nil && ctx.Err() == nil {
		s.cfg.Logger.Named("level").Warn("cluster level not raised", "wanted", l, "error", err)
	}
	return s.level() >= l || !s.cluster.IsLeader()
}

// LevelRaiser returns the leader's routine that raises the cluster's level
// to the highest one every server supports, at once and then every
// interval, and ends once it is this build's latest. A cluster of one
// build reaches it as its first leader is elected; during a rolling
// upgrade it waits for the last node.
func (s *Service) LevelRaiser(interval time.Duration) func(context.Context) {
	logger := s.cfg.Logger.Named("level")
	return func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			level, err := s.RaiseLevel(ctx)
			switch {
			case level >= fsm.LatestLevel:
				return
			case err != nil && ctx.Err() == nil:
				logger.Warn("cluster level not raised", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// RaiseLevel raises the cluster's level to the highest one every server
// supports (at most this build's latest), and returns the level in force.
// One raise runs at a time on a node: a caller that finds one under way
// waits for it, then finds the level raised and proposes nothing.
func (s *Service) RaiseLevel(ctx context.Context) (int, error) {
	select {
	case s.raising <- struct{}{}:
	case <-ctx.Done():
		return s.level(), ctx.Err()
	}
	defer func() { <-s.raising }()
	cur := s.level()
	to := min(s.cluster.MinSupportedLevel(), fsm.LatestLevel)
	if to <= cur {
		return cur, nil
	}
	if _, _, err := s.Propose(ctx, fsm.CmdLevel, &fsm.LevelCommand{Now: s.now(), Level: to}); err != nil {
		return cur, err
	}
	s.cfg.Logger.Named("level").Info("cluster level raised", "from", cur, "to", to)
	return to, nil
}
