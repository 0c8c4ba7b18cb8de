package queue

import (
	"context"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// LevelRaiser returns the leader's routine that raises the cluster's level
// (fsm/level.go) to the highest one every server applies, then ends once
// it is this build's latest. A cluster of one build reaches it at its first
// leader; during a rolling upgrade it waits for the last node.
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

// RaiseLevel raises the cluster's level as far as every server applies,
// and returns the level in force.
func (s *Service) RaiseLevel(ctx context.Context) (int, error) {
	cur := s.state.Peek().Level()
	to := cur
	for l := cur + 1; l <= fsm.LatestLevel && s.allApply(fsm.LevelGate(l)); l++ {
		to = l
	}
	if to == cur {
		return cur, nil
	}
	if _, _, err := s.Propose(ctx, fsm.CmdLevel, &fsm.LevelCommand{Now: s.now(), Level: to}); err != nil {
		return cur, err
	}
	s.cfg.Logger.Named("level").Info("cluster level raised", "from", cur, "to", to)
	return to, nil
}
