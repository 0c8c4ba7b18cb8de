package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spine-queue/spine/api"
	"github.com/spine-queue/spine/contract"
	"github.com/spine-queue/spine/fsm"
)

// Result contracts (package contract, fsm/contract.go). A schema is
// checked and made canonical where it enters (a create, a stream's
// defaults); a result is checked on the node that serves the complete (the
// leader, as followers forward writes), before anything is proposed:
//
//   - The node reads the job from its own state. The schema is fixed at the
//     job's create and never changes, so any state that has the job has
//     its schema: a node behind the log checks against the same schema as
//     one that is not.
//   - A node that does not have the job yet (its state machine behind the
//     create and the claim, as a leader just elected may be) makes its
//     state linearizable (confirm: the commit index, applied here) and
//     reads again. A worker holds a lease
//     only after its claim committed, and its claim followed the create,
//     so after that the job is there; if it still is not, the job does not
//     exist for this caller and the complete is answered not found without
//     a proposal.
//   - A result that does not match is never proposed: what is proposed is
//     a record of the refusal (fsm.CompleteRefusedCommand), which the state
//     machine adds to the job's history if the caller holds the lease (at
//     most fsm.MaxRefusalsPerAttempt per attempt), leaving the job running
//     under the same lease.

// ResultMismatchError is a complete refused because its result does not
// match the job's resultSchema: nothing was completed, the job (as this
// node reads it after the refusal's record) still runs under the same
// lease.
type ResultMismatchError struct {
	Mismatches []api.ResultMismatch
	Job        *fsm.Job
}

func (e *ResultMismatchError) Error() string {
	n := len(e.Mismatches)
	what := "1 mismatch"
	if n != 1 {
		what = fmt.Sprintf("%d mismatches", n)
	}
	return fmt.Sprintf("complete refused: the result does not match the job's resultSchema (%s, listed in mismatches); "+
		"nothing was completed and the job still runs under your lease: fix the result and complete again", what)
}

// SchemaError is a resultSchema refused at create or in a stream's
// defaults: Keyword names the unsupported keyword, when that is why.
type SchemaError = contract.SchemaError

// resultSchema checks a schema a request carries and returns its
// canonical form ("" for none, as for null). Result contracts need
// LevelPolicies.
func (s *Service) resultSchema(ctx context.Context, raw json.RawMessage) (string, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return "", nil // none: the stream's default, if any
	}
	c, err := contract.Canonical(raw)
	if err != nil {
		return "", err
	}
	if !s.atLevel(ctx, fsm.LevelPolicies) {
		return "", ErrUpgradeInProgress
	}
	return c, nil
}

// checkResult checks a complete's result against its job's contract (see
// above). A mismatch answers a *ResultMismatchError once the refusal is
// recorded (or the attempt's records are at their bound); a caller that
// does not hold the lease gets the state machine's refusal of the record
// instead. index is the state the answer reflects.
func (s *Service) checkResult(ctx context.Context, in CompleteInput) (uint64, error) {
	j, err := s.jobForCheck(ctx, in.Ref.JobID)
	if err != nil {
		return 0, err
	}
	schema := j.Extra().ResultSchema
	if schema == "" {
		return 0, nil
	}
	ms, err := contract.Check(schema, in.Result)
	if err != nil {
		return 0, invalid("result: %v", err)
	}
	if len(ms) == 0 {
		return 0, nil
	}
	// Past the attempt's bound there is nothing to record: answer from
	// this node's state when it shows the caller holding the lease.
	r := s.state.Peek()
	if cur, err := r.Job(in.Ref.JobID); err == nil && cur.Lease != nil && r.MayAct("complete", in.Ref, in.Actor) == nil &&
		fsm.RefusalsOf(cur, cur.Lease.AttemptID) >= fsm.MaxRefusalsPerAttempt {
		return cur.ModifyIndex, &ResultMismatchError{Mismatches: ms, Job: cur}
	}
	res, idx, err := s.Propose(ctx, fsm.CmdCompleteRefused, &fsm.CompleteRefusedCommand{Now: s.now(), Ref: in.Ref, Actor: in.Actor,
		Text: contract.Summary(ms, fsm.MaxRefusalText)})
	if err != nil {
		var refusal *Refusal
		if errors.As(err, &refusal) && errors.Is(err, fsm.ErrNotFound) {
			return idx, notFound(in.Ref.JobID)
		}
		return idx, err
	}
	return idx, &ResultMismatchError{Mismatches: ms, Job: res.Job}
}

// jobForCheck reads job id for the check of its result: from this node's
// state, or, when it is not there, from a linearizable one.
func (s *Service) jobForCheck(ctx context.Context, id string) (*fsm.Job, error) {
	if j, err := s.state.Peek().Job(id); err == nil {
		return j, nil
	}
	if err := s.confirm(ctx); err != nil {
		return nil, err
	}
	j, err := s.state.Peek().Job(id)
	if err != nil {
		return nil, notFound(id)
	}
	return j, nil
}
