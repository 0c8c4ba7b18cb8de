package main

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/spine-queue/spine/fsm"
)

// reapBatch bounds the jobs one reap entry takes back, keeping entries small.
const reapBatch = 512

type reapNode interface {
	Apply(ctx context.Context, cmd []byte) (interface{}, uint64, error)
}

// reaper runs on the leader only: every interval it proposes "reap leases
// expired as of now", stamped with the leader's clock. The state machine
// re-checks each lease when the entry applies, so a heartbeat committed
// first wins.
type reaper struct {
	node     reapNode
	state    interface{ Read() *fsm.Reader }
	interval time.Duration
	// grace delays the first reap after gaining leadership, so claimants
	// whose heartbeats failed during the election can reach the new leader.
	grace  time.Duration
	logger hclog.Logger
}

func (r *reaper) run(ctx context.Context) {
	r.logger.Info("reaper started", "interval", r.interval, "grace", r.grace)
	defer r.logger.Info("reaper stopped")
	if r.grace > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.grace):
		}
	}
	t := time.NewTicker(r.interval)
	defer t.Stop()
	for {
		r.reapOnce(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *reaper) reapOnce(ctx context.Context) {
	for ctx.Err() == nil {
		now := time.Now().UnixNano()
		next := r.state.Read().NextLeaseExpiry()
		if next == 0 || next > now {
			return
		}
		data := fsm.MustEncode(fsm.CmdReap, &fsm.ReapCommand{Now: now, Max: reapBatch})
		resp, _, err := r.node.Apply(ctx, data)
		if err != nil {
			r.logger.Warn("reap failed", "error", err)
			return
		}
		res, _ := resp.(*fsm.Result)
		if res == nil || len(res.Jobs) == 0 {
			return
		}
		for _, j := range res.Jobs {
			r.logger.Info("lease expired", "job", j.ID, "now", j.State, "attempts", j.Attempts)
		}
		if len(res.Jobs) < reapBatch {
			return
		}
	}
}
