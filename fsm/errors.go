package fsm

import (
	"errors"
	"fmt"
)

// Domain errors returned (never panicked) by Apply. The leader hands them back
// to the caller; the HTTP layer maps each to a status code.
var (
	// ErrNotFound: no job (or blob) with that id.
	ErrNotFound = errors.New("not found")
	// ErrIllegalTransition: the command is not allowed in the job's state.
	ErrIllegalTransition = errors.New("illegal transition")
	// ErrNotOwner: the caller does not hold the job's lease.
	ErrNotOwner = errors.New("not the lease owner")
	// ErrNotAllowed: the caller's role may not change that registry entry.
	ErrNotAllowed = errors.New("not allowed")
	// ErrStaleLease: the lease token or attempt id is not the job's current one.
	ErrStaleLease = errors.New("stale lease")
	// ErrTargetMismatch: the job is targeted at someone else.
	ErrTargetMismatch = errors.New("job targeted at another claimant")
	// ErrMaxAttempts: a claim found the job out of attempts and marked it dead.
	ErrMaxAttempts = errors.New("max attempts reached")
	// ErrInvalid: the command itself is malformed (a bug in the proposer).
	ErrInvalid = errors.New("invalid command")
	// ErrBlobIncomplete: a blob commit found chunks missing.
	ErrBlobIncomplete = errors.New("blob incomplete")
	// ErrStreamEnded: the stream is ended: it takes no new jobs and hands
	// out none.
	ErrStreamEnded = errors.New("stream ended")
	// ErrStreamPaused: an operator paused the stream: it takes new jobs but
	// hands out none until resumed.
	ErrStreamPaused = errors.New("stream paused")
	// ErrMissingCapability: the job requires a capability the claim did
	// not name.
	ErrMissingCapability = errors.New("missing capability")
	// ErrExists: a session or stream with that name exists.
	ErrExists = errors.New("already exists")
	// ErrEnded: the session is ended (no new streams).
	ErrEnded = errors.New("ended")
	// ErrNoHealthyGateway: no healthy gateway with free capacity meets a
	// route's requirements; nothing was routed.
	ErrNoHealthyGateway = errors.New("no healthy gateway")
	// ErrNotYetClaimable: a claim by id of a queued job that waits for its
	// runAt (a schedule, a retry backoff or a release's cooldown); the
	// refusal's job says when it becomes claimable.
	ErrNotYetClaimable = errors.New("not yet claimable")
)

// TransitionError says which transition was refused and why. It matches
// its Kind with errors.Is.
type TransitionError struct {
	Kind  error
	JobID string
	State State
	Op    string
	Msg   string
	// From and To, when set, are the refused transition in the control
	// plane's vocabulary (TaskState).
	From, To TaskState
}

func (e *TransitionError) Error() string {
	if e.Msg != "" {
		return fmt.Sprintf("%s: job %s is %s: %s", e.Op, e.JobID, e.State, e.Msg)
	}
	return fmt.Sprintf("%s: job %s is %s: %v", e.Op, e.JobID, e.State, e.Kind)
}

// Unwrap lets errors.Is match the kind.
func (e *TransitionError) Unwrap() error { return e.Kind }

func refuse(kind error, op string, j *Job, msg string) error {
	return &TransitionError{Kind: kind, JobID: j.ID, State: j.State, Op: op, Msg: msg}
}
