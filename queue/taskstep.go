package queue

import (
	"context"
	"encoding/json"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// TaskStepInput is one step of the control plane's task state machine
// (seed 003) on the lease Ref names.
type TaskStepInput struct {
	Op    fsm.TaskOp
	Ref   fsm.LeaseRef
	Actor fsm.Actor
	// Complete.
	Result         json.RawMessage
	Stdout, Stderr string
	// Fail: Requeue puts the task back while it has attempts left (the
	// seed's failed is final, so the default is not to).
	Error   fsm.JobError
	Requeue bool
	// Release.
	Reason string
}

// TaskStep takes one step of the seed's state machine: start (claimed →
// running), complete (running → succeeded), fail or release. The state
// machine refuses a step the seed does not allow with
// fsm.ErrIllegalTransition naming the seed's from and to, and answers a
// repeat as the core does.
func (s *Service) TaskStep(ctx context.Context, in TaskStepInput) (*fsm.Result, uint64, error) {
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, 0, ErrUpgradeInProgress
	}
	e := in.Error
	if len(e.Message)+len(e.Stack)+len(e.Code) > MaxTextBytes || len(in.Reason) > MaxTextBytes {
		return nil, 0, invalid("error and reason must each stay under %d bytes", MaxTextBytes)
	}
	if in.Op == fsm.TaskComplete || in.Op == fsm.TaskFail {
		in.Ref = s.namedAttempt(in.Ref)
	}
	if err := s.mayAct(ctx, in.Op.String(), in.Ref, in.Actor); err != nil {
		return nil, 0, err
	}
	if in.Op == fsm.TaskComplete {
		// The job's result contract holds here too (contract.go).
		if idx, err := s.checkResult(ctx, CompleteInput{Ref: in.Ref, Actor: in.Actor, Result: in.Result}); err != nil {
			return nil, idx, err
		}
	}
	return s.Propose(ctx, fsm.CmdTaskStep, &fsm.TaskStepCommand{Op: in.Op, Now: s.now(), Ref: in.Ref, Actor: in.Actor,
		Result: in.Result, Stdout: in.Stdout, Stderr: in.Stderr, Error: e, Requeue: in.Requeue, Reason: in.Reason})
}

// FeedStarter returns the leader's routine that turns the event feed on
// once the cluster's level has it (a snapshot holding the feed is of a
// version older builds cannot read), then ends.
func (s *Service) FeedStarter(interval time.Duration) func(context.Context) {
	logger := s.cfg.Logger.Named("feed")
	return func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			on, err := s.StartFeed(ctx)
			switch {
			case on:
				return
			case err != nil && ctx.Err() == nil:
				logger.Warn("event feed not turned on", "error", err)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}
}

// StartFeed turns the event feed on if the cluster's level has it and it
// is off, and reports whether it is on.
func (s *Service) StartFeed(ctx context.Context) (bool, error) {
	if s.state.Peek().FeedOn() {
		return true, nil
	}
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return false, nil
	}
	if _, _, err := s.Propose(ctx, fsm.CmdFeedOn, &fsm.FeedOnCommand{Now: s.now()}); err != nil {
		return false, err
	}
	s.cfg.Logger.Named("feed").Info("event feed on")
	return true, nil
}

// FeedPage is a read of the event feed.
type FeedPage struct {
	Events []*fsm.FeedEvent
	// Oldest is the seq of the oldest event the feed still holds (0: none),
	// Latest the seq of the latest event ever fed.
	Oldest, Latest uint64
	// On is whether the feed records yet.
	On bool
	// Changed is closed when the feed gains an event after this read.
	Changed <-chan struct{}
}

// Feed reads up to max events after seq after from this node's state.
func (s *Service) Feed(after uint64, max int) FeedPage {
	changed := s.state.Peek().FeedSignal() // before the read: nothing slips between
	evs, oldest, latest, on := s.state.Read().Feed(after, max)
	return FeedPage{Events: evs, Oldest: oldest, Latest: latest, On: on, Changed: changed}
}
