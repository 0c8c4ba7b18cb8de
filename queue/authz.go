package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/spine-queue/spine/fsm"
)

// Authorization: what a caller may see and do. Every surface (the v0 job
// routes, the worker contract, the task API, the developer queue, the
// control plane, the web UI, MCP, the event feed, lists and counts) asks
// these functions, which ask the state machine's rules (fsm/identity.go):
// the role comes from the caller's credential, a worker id it names is
// checked, never trusted.
//
// On the leader every write is checked here before it is proposed, by the
// rules in force from fsm.LevelIdentity on, whatever the cluster's level:
// the state machine applies the same rules again from that level on, so a
// race between the check and the entry (a claim of a worker id another
// role binds meanwhile) is refused when the entry applies. A lease step's
// check needs no such backstop: a lease token is drawn for one claim by
// one role and worker, so whatever state the check reads, a token that is
// current there is current with the same holder in every later state.

// CheckWorkerID refuses a worker id no caller may use: one that is not a
// name (1-128 letters, digits, '_', '.', ':' or '-') or that is a role's
// name. field names it in the caller's terms ("worker_id", "agent_id").
// An empty id is refused when required.
func CheckWorkerID(field, id string, required bool) error {
	switch {
	case id == "" && required:
		return invalid("%s is required", field)
	case id == "":
		return nil
	case !ValidName(id):
		return invalid("%s must be 1-128 characters of letters, digits, '_', '.', ':' or '-'", field)
	case fsm.IsRole(id):
		return invalid("%s %q is a role's name; a worker id names one worker, choose another", field, id)
	}
	return nil
}

// Sees reports whether a caller of role may read j (fsm.Reader.Sees).
func (s *Service) Sees(role string, j *fsm.Job) bool { return s.state.Peek().Sees(role, j) }

// Lookup reads a job role may see from r; a job it may not see is not
// found (as is one that does not exist).
func Lookup(r *fsm.Reader, role, id string) (*fsm.Job, error) {
	j, err := r.Job(id)
	if err != nil {
		return nil, err
	}
	if !r.Sees(role, j) {
		return nil, notFound(id)
	}
	return j, nil
}

// Job reads job id as role may see it, from this node's state.
func (s *Service) Job(role, id string) (*fsm.Job, error) { return Lookup(s.state.Peek(), role, id) }

// mayAct checks that actor may take step op of the job ref names
// (fsm.Reader.MayAct), as the state machine's entry does from
// fsm.LevelIdentity on: a job it may not read is not found, exactly as an
// unknown id; a lease or attempt another role or worker holds is refused.
// Below the level the check is made on this node's latest state before
// proposing, and a refusal is answered from a linearizable view (confirm),
// as the state machine's would be.
func (s *Service) mayAct(ctx context.Context, op string, ref fsm.LeaseRef, actor fsm.Actor) error {
	if err := CheckWorkerID("worker_id", actor.WorkerID, false); err != nil {
		return err
	}
	r := s.state.Peek()
	if r.Level() >= fsm.LevelIdentity {
		// The entry applies these very rules (fsm authorize) and refuses as
		// they would, with an entry as an unknown id's refusal has; a job
		// the caller may not read is then not found (ForCaller). The check
		// here is for a cluster below the level, whose entries do not.
		return nil
	}
	if r.MayAct(op, ref, actor) == nil {
		return nil
	}
	if err := s.confirm(ctx); err != nil {
		return err
	}
	switch err := s.state.Peek().MayAct(op, ref, actor); {
	case errors.Is(err, fsm.ErrNotFound):
		return notFound(ref.JobID)
	case err != nil:
		return s.refusal(err, ref.JobID)
	}
	return nil
}

// confirm makes this node's state linearizable for a refusal: the leader
// confirms its leadership with a quorum and applies everything committed
// before the call (a job created, or a lease granted, by an entry committed
// but not yet applied here is then in its state).
func (s *Service) confirm(ctx context.Context) error {
	idx, err := s.cluster.ConsistentIndex(ctx)
	if err != nil {
		return err
	}
	return s.cluster.WaitForApplied(ctx, idx)
}

// claimable checks that actor may claim job id by id: one it may read, or
// one targeted at the worker id it claims as (targets). Not found is
// answered from a linearizable view (confirm).
func (s *Service) claimable(ctx context.Context, actor fsm.Actor, id string, targets []string) error {
	see := func() bool {
		r := s.state.Peek()
		j, err := r.Job(id)
		return err == nil && (r.Sees(actor.Role, j) || slices.Contains(targets, j.Target))
	}
	if see() {
		return nil
	}
	if err := s.confirm(ctx); err != nil {
		return err
	}
	if see() {
		return nil
	}
	return notFound(id)
}

// refusal wraps a refusal the service made from the state, as the state
// machine's refusals are (a *Refusal with the job, for the caller's view).
func (s *Service) refusal(err error, id string) error {
	j, _ := s.state.Peek().Job(id)
	return &Refusal{Err: err, Job: j, Index: s.cluster.AppliedIndex()}
}

// claimTargets checks actor's worker id and returns the targets its
// claims may take (fsm.Reader.ClaimTargets).
func (s *Service) claimTargets(r *fsm.Reader, actor fsm.Actor) ([]string, error) {
	if err := CheckWorkerID("worker_id", actor.WorkerID, false); err != nil {
		return nil, err
	}
	return r.ClaimTargets(actor)
}

// ForCaller keeps an error from showing a job its caller (of role) may not
// read: to a claw, such a job does not exist, whether it reads it or tries
// to claim, heartbeat or finish it, so the error becomes the read's 404
// and carries no job. id is the job the request named, if any.
func (s *Service) ForCaller(role, id string, err error) error {
	if err == nil || role == "" || role == fsm.HeadRole {
		return err
	}
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal) && refusal.Job != nil:
		if s.Sees(role, refusal.Job) {
			return err
		}
		id = refusal.Job.ID
	case errors.Is(err, fsm.ErrTargetMismatch) && id != "":
		if _, lerr := s.Job(role, id); !errors.Is(lerr, fsm.ErrNotFound) {
			return err
		}
	default:
		return err
	}
	return notFound(id)
}

// maxRegistered bounds the gateways and the workers registered (each).
const maxRegistered = 10_000

// mayChangeWorker checks that actor may register, update, heartbeat or
// remove the worker id: head may; a claw may for an id of its role's, or
// (registering) an id no role has yet, which becomes its role's. Below
// fsm.LevelIdentity no id is bound yet, and any claw may, as before.
func (s *Service) mayChangeWorker(actor fsm.Actor, id string, registering bool) error {
	r := s.state.Peek()
	if actor.Role == fsm.HeadRole || r.Level() < fsm.LevelIdentity {
		return nil
	}
	switch role := r.WorkerIDRole(id); {
	case role == actor.Role:
		return nil
	case role == "" && registering:
		return nil
	case role == "":
		return &ForbiddenError{Message: fmt.Sprintf("worker %s belongs to no role yet: register it with your token first "+
			"(POST /v1/workers), which makes its id your role's", id)}
	}
	return fmt.Errorf("%w: %s is in use by another role", fsm.ErrWorkerIDTaken, id)
}

// ForbiddenError is a call the caller's role may not make on that object.
type ForbiddenError struct{ Message string }

func (e *ForbiddenError) Error() string { return e.Message }

// maySchedule checks that actor may create, read or change recurring
// schedules (schedules.go): head alone, on every surface (a schedule makes
// jobs, which head alone creates).
func maySchedule(actor fsm.Actor) error {
	if actor.Role != fsm.HeadRole {
		return &ForbiddenError{Message: "schedules are head's: only a head token may create, read or change them"}
	}
	return nil
}
