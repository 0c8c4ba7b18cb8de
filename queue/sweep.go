package queue

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/fsm"
)

// sweepBatch bounds the jobs one reap or purge entry touches, keeping
// entries small and applies short.
const sweepBatch = 512

// sweeper runs on the leader only: every interval it proposes a time-driven
// command stamped with the leader's clock, while there is work for it. The
// state machine re-checks every job against the time in the entry when it
// applies, so whatever committed first (a heartbeat, say) wins.
type sweeper struct {
	name     string
	svc      *Service
	interval time.Duration
	// grace delays the first sweep after gaining leadership (the reaper's:
	// claimants whose heartbeats failed during the election get time to
	// reach the new leader).
	grace  time.Duration
	logger hclog.Logger
	// due says whether there is work as of now; command makes the entry.
	due     func(r *fsm.Reader, now int64) bool
	command func(now int64) (fsm.CommandType, interface{})
	// done is told what one entry did.
	done func(res *fsm.Result)
}

func (s *sweeper) run(ctx context.Context) {
	s.logger.Info(s.name+" started", "interval", s.interval, "grace", s.grace)
	defer s.logger.Info(s.name + " stopped")
	if s.grace > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(s.grace):
		}
	}
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		s.sweepOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (s *sweeper) sweepOnce(ctx context.Context) {
	for ctx.Err() == nil {
		now := s.svc.now()
		// A point look (Peek): taking a view per tick would make the
		// writer copy a path of every tree it then changes.
		if !s.due(s.svc.state.Peek(), now) {
			return
		}
		t, cmd := s.command(now)
		res, _, err := s.svc.Propose(ctx, t, cmd)
		if err != nil {
			s.logger.Warn(s.name+" failed", "error", err)
			return
		}
		if len(res.Jobs) == 0 {
			return
		}
		s.done(res)
		if len(res.Jobs) < sweepBatch {
			return
		}
	}
}

// Reaper returns the leader's reaper, to run while this node leads
// (cluster.Node.RunWhileLeader): every interval it returns expired leases
// to their queues (or kills jobs at their attempt limit), after grace.
func (s *Service) Reaper(interval, grace time.Duration) func(context.Context) {
	logger := s.cfg.Logger.Named("reaper")
	sw := &sweeper{
		name: "reaper", svc: s, interval: interval, grace: grace, logger: logger,
		due: func(r *fsm.Reader, now int64) bool {
			next := r.NextLeaseExpiry()
			return next != 0 && next <= now
		},
		command: func(now int64) (fsm.CommandType, interface{}) {
			return fsm.CmdReap, &fsm.ReapCommand{Now: now, Max: sweepBatch}
		},
		done: func(res *fsm.Result) {
			// One line per sweep (a sweep may take back thousands of leases
			// after a worker fleet dies); the jobs at debug level.
			if len(res.Jobs) == 0 {
				return
			}
			by := map[fsm.State]int{}
			for _, j := range res.Jobs {
				by[j.State]++
				logger.Debug("lease expired", "job", j.ID, "now", j.State, "attempts", j.Attempts)
			}
			logger.Info("leases expired", "jobs", len(res.Jobs), "requeued", by[fsm.StateQueued],
				"dead", by[fsm.StateDead], "failed", by[fsm.StateFailed])
		},
	}
	return sw.run
}

// PromoteInterval is how often the leader's promoter looks for scheduled
// jobs whose time has come: a job becomes claimable at most this late.
const PromoteInterval = 100 * time.Millisecond

// Promoter returns the leader's promoter, to run while this node leads:
// whenever the earliest scheduled time (a job's runAt, or the end of its
// retry backoff) has passed, it proposes a promote entry that makes those
// jobs claimable; so it does when a rate key that allowed no claim allows
// one again (the entry admits its jobs, which wakes the claims waiting). Each look is one read of the scheduled index's first
// item, however many jobs wait.
func (s *Service) Promoter() func(context.Context) {
	logger := s.cfg.Logger.Named("promoter")
	sw := &sweeper{
		name: "promoter", svc: s, interval: PromoteInterval, logger: logger,
		due: func(r *fsm.Reader, now int64) bool {
			// A job's time, or a rate key's next token (ratelimit).
			next, rate := r.NextScheduled(), r.NextRateDue()
			return ((next != 0 && next <= now) || (rate != 0 && rate <= now)) && r.Level() >= fsm.LevelIdentity
		},
		command: func(now int64) (fsm.CommandType, interface{}) {
			return fsm.CmdPromote, &fsm.PromoteCommand{Now: now, Max: sweepBatch}
		},
		done: func(res *fsm.Result) {
			logger.Debug("scheduled jobs due", "jobs", len(res.Jobs))
		},
	}
	return sw.run
}

// Purger returns the leader's purger, to run while this node leads: it
// deletes done jobs that finished more than retention ago (none when
// retention is 0), and the worker id bindings unused for fsm.WorkerIDIdle.
func (s *Service) Purger(retention time.Duration) func(context.Context) {
	logger := s.cfg.Logger.Named("retention")
	interval := min(max(retention/10, 100*time.Millisecond), time.Minute)
	if retention <= 0 {
		interval = time.Minute
	}
	before := func(now int64) int64 {
		if retention <= 0 {
			return 0
		}
		return now - retention.Nanoseconds()
	}
	sw := &sweeper{
		name: "retention", svc: s, interval: interval, logger: logger,
		due: func(r *fsm.Reader, now int64) bool {
			oldest := r.OldestFinished()
			seen := r.OldestBinding()
			return (oldest != 0 && oldest < before(now)) || (seen != 0 && seen < now-fsm.WorkerIDIdle)
		},
		command: func(now int64) (fsm.CommandType, interface{}) {
			return fsm.CmdPurge, &fsm.PurgeCommand{Now: now, Before: before(now), Max: sweepBatch}
		},
		done: func(res *fsm.Result) {
			if len(res.Jobs) > 0 {
				logger.Info("purged finished jobs past retention", "jobs", len(res.Jobs), "retention", retention)
			}
		},
	}
	return sw.run
}

// TaskPurger returns the leader's task purger, to run while this node
// leads: at once and then every interval, it deletes the finished tasks
// older than the registry's retention (purge.older_than_days, default 3),
// each entry carrying the leader's cut-off.
func (s *Service) TaskPurger(interval time.Duration) func(context.Context) {
	logger := s.cfg.Logger.Named("task-purge")
	retention := func(r *fsm.Reader) int64 { return r.Registry().RetentionNanos() }
	var before int64
	sw := &sweeper{
		name: "task purge", svc: s, interval: interval, logger: logger,
		due: func(r *fsm.Reader, now int64) bool {
			oldest := r.OldestTaskEnded()
			if oldest == 0 {
				return false
			}
			before = now - retention(r)
			return oldest < before && r.Level() >= fsm.LevelIdentity
		},
		command: func(now int64) (fsm.CommandType, interface{}) {
			return fsm.CmdTaskPurge, &fsm.TaskPurgeCommand{Now: now, Before: before, Max: sweepBatch}
		},
		done: func(res *fsm.Result) {
			logger.Info("purged finished tasks past retention", "tasks", len(res.Jobs))
		},
	}
	return sw.run
}
