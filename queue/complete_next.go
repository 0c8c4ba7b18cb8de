package queue

import (
	"context"

	"github.com/spine-queue/spine/fsm"
)

// CompleteNext completes in's attempt and claims in.Actor's next jobs as
// next asks (next.Actor and next.JobID are ignored: the claimant is the
// complete's, and the claim is of the next job). next is checked first,
// so bad input changes nothing.
//
// When every server applies it (fsm.LevelCompleteNext) and a job is ready,
// the claim rides in the complete's own entry (fsm.CompleteCommand.Next):
// one commit ends the job and starts the next. Otherwise, and when the
// entry's claim found nothing after all, the claim is made after the
// complete commits, waiting up to next.Wait as ClaimNextBatch does.
//
// err is the complete's: once the complete is accepted, a claim that could
// not be made (the node stopped leading while it waited, or the caller
// left) answers no job, and the worker claims again. As with any claim, a
// caller that left while its claim committed has the jobs given back.
func (s *Service) CompleteNext(ctx context.Context, in CompleteInput, next ClaimNextInput) (res *fsm.Result, jobs []*fsm.Job, index uint64, err error) {
	next.Actor, next.JobID = in.Actor, ""
	p, err := s.planClaim(ctx, next)
	if err != nil {
		return nil, nil, 0, err
	}
	cmd, idx, err := s.completeCommand(ctx, in)
	if err != nil {
		return nil, nil, idx, err
	}
	actx := ctx
	if ready, _ := p.ready(s.state.Peek()); ready && s.atLevel(ctx, fsm.LevelCompleteNext) {
		cmd.Next = s.command(ctx, p)
		cmd.Next.Now = cmd.Now
		// The entry claims for the caller: learn its outcome even if the
		// caller leaves, to give the jobs back (as ClaimNextBatch does).
		var cancel context.CancelFunc
		actx, cancel = context.WithTimeout(context.WithoutCancel(ctx), claimApplyTimeout)
		defer cancel()
	}
	res, index, err = s.Propose(actx, fsm.CmdComplete, cmd)
	if err != nil {
		return res, nil, index, err
	}
	if jobs = claimed(res.Next); jobs != nil {
		jobs, _ = s.kept(ctx, jobs)
		return res, jobs, index, nil
	}
	jobs, cidx, err := s.claimWaiting(ctx, p, next.Wait)
	if err != nil {
		s.logger.Debug("complete: the next claim took no job", "worker", in.Actor.WorkerID, "error", err)
		return res, nil, index, nil
	}
	return res, jobs, max(index, cidx), nil
}

// completeCommand checks a complete (the caller may end the attempt, the
// result keeps the job's contract) and returns its command.
func (s *Service) completeCommand(ctx context.Context, in CompleteInput) (*fsm.CompleteCommand, uint64, error) {
	in.Ref = s.namedAttempt(in.Ref)
	if err := s.mayAct(ctx, "complete", in.Ref, in.Actor); err != nil {
		return nil, 0, err
	}
	if idx, err := s.checkResult(ctx, in); err != nil {
		return nil, idx, err
	}
	return &fsm.CompleteCommand{Now: s.now(), Ref: in.Ref, Actor: in.Actor, Result: in.Result, Stdout: in.Stdout, Stderr: in.Stderr}, 0, nil
}
