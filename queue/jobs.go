package queue

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spine-queue/spine/fsm"
)

// ValidName reports whether s may name a stream, a target or a worker:
// 1 to 128 letters, digits, '_', '.', ':' or '-', starting with a letter
// or digit. (A loop, not a regular expression: every claim and step checks
// one.)
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case i > 0 && (c == '_' || c == '.' || c == ':' || c == '-'):
		default:
			return false
		}
	}
	return true
}

const (
	maxAttemptsLimit = 1000
	// MaxTextBytes caps a comment, a release reason and a job error.
	MaxTextBytes      = 64 << 10
	maxLeaseSeconds   = 7 * 24 * 3600
	maxKeyBytes       = 256
	maxTaskClassBytes = 128
)

// CreateInput is a new job. Nil pointers take the defaults; a set one must
// be valid (an explicit zero attempts or lease, or an empty stream, is
// refused rather than silently defaulted).
type CreateInput struct {
	Payload        json.RawMessage
	MaxAttempts    *int
	Target         string
	Stream         *string
	LeaseSeconds   *int64
	TaskClass      string
	IdempotencyKey string
	Priority       int
	// RunAt (unix nanoseconds) or Delay schedules the job; BackoffBase and
	// BackoffMax (seconds) set its retry backoff when BackoffSet (a zero
	// base: none); without BackoffSet the job gets Config.RetryBackoff.
	RunAt                   int64
	Delay                   time.Duration
	BackoffSet              bool
	BackoffBase, BackoffMax int64
	// ConcurrencyKey and ConcurrencyLimit (default 1 with a key).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// DependsOn names jobs that must be done first; with RunOnDepFailure,
	// jobs that must have ended first, however.
	DependsOn       []string
	RunOnDepFailure bool
	// Requires lists the capabilities a claim must have to take the job.
	Requires []string
	// ResultSchema is the job's result contract (contract.go): a JSON
	// Schema of the supported subset; empty takes the stream's default.
	ResultSchema json.RawMessage
	// RateLimit limits how often its key's jobs are claimed (ratelimit).
	RateLimit *RateInput
	Actor     fsm.Actor

	// template, when set, makes Create a check: the create command it
	// would propose is written here and nothing is proposed (a schedule's
	// job template, schedules.go).
	template *fsm.CreateCommand
}

// maxConcurrencyLimit caps a concurrency key's limit.
const maxConcurrencyLimit = 10000

// maxSchedule bounds how far ahead a job may be scheduled, and a backoff.
const maxSchedule = 365 * 24 * time.Hour

// MaxScheduleDays is maxSchedule in days, as the API documents it.
const MaxScheduleDays = 365

// RunAtNanos converts a requested runAt to the unix nanoseconds of
// CreateInput.RunAt. A time before 1970 or past what nanoseconds since 1970
// hold (the year 2262) is refused as Create refuses one more than
// MaxScheduleDays ahead: such a time would otherwise wrap around and run
// the job at once.
func RunAtNanos(t time.Time) (int64, error) {
	if t.Before(time.Unix(0, 0)) || t.After(time.Unix(0, math.MaxInt64)) {
		return 0, runAtRange(t)
	}
	return t.UnixNano(), nil
}

func runAtRange(t time.Time) error {
	return invalid("runAt must be between 1970-01-01T00:00:00Z and %d days from now (a past time means now), got %s",
		MaxScheduleDays, t.UTC().Format(time.RFC3339))
}

// Create makes a job, or answers the job an earlier create with the same
// idempotency key made (created false). index is the state the answer
// reflects.
func (s *Service) Create(ctx context.Context, in CreateInput) (j *fsm.Job, created bool, index uint64, err error) {
	if len(in.Payload) == 0 || string(in.Payload) == "null" {
		return nil, false, 0, invalid("payload is required (any JSON value but null)")
	}
	cmd := fsm.CreateCommand{Payload: in.Payload, TaskClass: in.TaskClass, Actor: in.Actor}
	if in.MaxAttempts != nil {
		if *in.MaxAttempts < 1 || *in.MaxAttempts > maxAttemptsLimit {
			return nil, false, 0, invalid("maxAttempts must be between 1 and %d", maxAttemptsLimit)
		}
		cmd.MaxAttempts = *in.MaxAttempts
	}
	if in.Stream != nil {
		if !ValidName(*in.Stream) {
			return nil, false, 0, invalid("stream must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
		}
		cmd.Stream = *in.Stream
	}
	if in.Target != "" {
		if !ValidName(in.Target) {
			return nil, false, 0, invalid("target must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
		}
		if in.Target == fsm.HeadRole {
			return nil, false, 0, invalid("target: head claims no jobs; target a claw role (left_claw, right_claw) or a worker id")
		}
		cmd.Target = in.Target
	}
	if in.LeaseSeconds != nil {
		if *in.LeaseSeconds < 1 || *in.LeaseSeconds > maxLeaseSeconds {
			return nil, false, 0, invalid("leaseSeconds must be between 1 and %d", maxLeaseSeconds)
		}
		cmd.LeaseSeconds = *in.LeaseSeconds
	}
	if len(in.TaskClass) > maxTaskClassBytes {
		return nil, false, 0, invalid("taskClass is too long")
	}
	if len(in.IdempotencyKey) > maxKeyBytes {
		return nil, false, 0, invalid("idempotency key is longer than %d bytes", maxKeyBytes)
	}
	if strings.HasPrefix(in.IdempotencyKey, fsm.ScheduleKeyPrefix) {
		return nil, false, 0, invalid("idempotency keys starting with %q are the schedules' (each names a schedule's tick): choose another", fsm.ScheduleKeyPrefix)
	}
	cmd.IdempotencyKey = in.IdempotencyKey
	if key := in.IdempotencyKey; key != "" {
		// A retried create is answered from the job it made, with no entry.
		if j := s.state.Peek().JobByIdempotencyKey(key); j != nil {
			return j, false, j.ModifyIndex, nil
		}
	}
	if in.Priority < fsm.MinPriority || in.Priority > fsm.MaxPriority {
		return nil, false, 0, invalid("priority must be between %d and %d", fsm.MinPriority, fsm.MaxPriority)
	}
	cmd.Now, cmd.ID = s.now(), s.cfg.NewID()
	ex := &cmd // the options
	ex.Priority, ex.BackoffBase, ex.BackoffMax = in.Priority, in.BackoffBase, in.BackoffMax
	switch {
	case in.RunAt != 0 && in.Delay != 0:
		return nil, false, 0, invalid("give runAt or delaySeconds, not both")
	case in.Delay < 0 || in.Delay > maxSchedule:
		return nil, false, 0, invalid("delaySeconds must be 0 to %d (%d days)", int64(maxSchedule.Seconds()), MaxScheduleDays)
	case in.RunAt < 0 || in.RunAt > cmd.Now+maxSchedule.Nanoseconds():
		return nil, false, 0, runAtRange(time.Unix(0, in.RunAt))
	case in.Delay > 0:
		ex.RunAt = cmd.Now + in.Delay.Nanoseconds()
	case in.RunAt > cmd.Now:
		ex.RunAt = in.RunAt
	}
	if in.BackoffBase < 0 || in.BackoffMax < 0 || in.BackoffBase > int64(maxSchedule.Seconds()) || in.BackoffMax > int64(maxSchedule.Seconds()) {
		return nil, false, 0, invalid("backoff base and max must be 0 to %d seconds", int64(maxSchedule.Seconds()))
	}
	if in.BackoffMax != 0 && in.BackoffMax < in.BackoffBase {
		return nil, false, 0, invalid("backoff max must not be below its base")
	}
	switch {
	case in.ConcurrencyKey == "" && in.ConcurrencyLimit != 0:
		return nil, false, 0, invalid("concurrencyLimit needs a concurrencyKey")
	case in.ConcurrencyKey != "" && !ValidName(in.ConcurrencyKey):
		return nil, false, 0, invalid("concurrencyKey must be 1-128 characters of letters, digits, '_', '.', ':' or '-'")
	case in.ConcurrencyLimit < 0 || in.ConcurrencyLimit > maxConcurrencyLimit:
		return nil, false, 0, invalid("concurrencyLimit must be 1 to %d", maxConcurrencyLimit)
	case in.ConcurrencyKey != "":
		// A limit left 0 is the stream's default limit, or 1 (the state
		// machine fills it in from the stream's defaults).
		ex.ConcurrencyKey, ex.ConcurrencyLimit = in.ConcurrencyKey, in.ConcurrencyLimit
	}
	if ex.Rate, err = s.rateFor(ctx, in.RateLimit); err != nil {
		return nil, false, 0, err
	}
	if len(in.DependsOn) > fsm.MaxDependencies {
		return nil, false, 0, invalid("at most %d dependencies", fsm.MaxDependencies)
	}
	for _, id := range in.DependsOn {
		if id == "" || len(id) > 128 {
			return nil, false, 0, invalid("dependsOn holds an empty or too long job id")
		}
	}
	ex.DependsOn = in.DependsOn
	if !in.BackoffSet && s.cfg.RetryBackoff.Base > 0 && s.atLevel(ctx, fsm.LevelIdentity) {
		// The cluster's default, once the cluster's level has backoffs
		// (during a rolling upgrade from a build without them, retries
		// stay immediate).
		ex.BackoffBase, ex.BackoffMax = s.cfg.RetryBackoff.Base, s.cfg.RetryBackoff.Max
	}
	reqKey, err := fsm.CapabilityKey(in.Requires, fsm.MaxRequires)
	if err != nil {
		return nil, false, 0, labelsInvalid("requires", err)
	}
	var res *fsm.Result
	if in.RunOnDepFailure {
		if len(in.DependsOn) == 0 {
			return nil, false, 0, invalid("onDependencyFailure needs dependsOn")
		}
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, false, 0, ErrUpgradeInProgress
		}
		cmd.RunOnDepFailure = true
	} else if reqKey != "" {
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, false, 0, ErrUpgradeInProgress
		}
	} else if ex.Priority != 0 || ex.RunAt != 0 || ex.BackoffBase != 0 || ex.ConcurrencyKey != "" || len(ex.DependsOn) > 0 {
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, false, 0, ErrUpgradeInProgress
		}
	}
	cmd.Requires = fsm.Labels(reqKey)
	if cmd.ResultSchema, err = s.resultSchema(ctx, in.ResultSchema); err != nil {
		return nil, false, 0, err
	}
	if in.template != nil {
		*in.template = cmd
		return nil, false, 0, nil
	}
	res, index, err = s.proposeCreate(ctx, &cmd)
	if err != nil {
		return nil, false, index, err
	}
	return res.Job, !res.Duplicate, index, nil
}

// notFound is fsm's not-found error for a job id.
func notFound(id string) error { return &jobNotFound{id: id} }

type jobNotFound struct{ id string }

func (e *jobNotFound) Error() string { return "job " + e.id + ": not found" }
func (e *jobNotFound) Unwrap() error { return fsm.ErrNotFound }

// List pages through the jobs role may see.
func (s *Service) List(c Caller, f fsm.ListFilter) ([]*fsm.Job, uint64, error) {
	r := s.state.Read()
	if c.ViewRole() != fsm.HeadRole || c.Scoped() {
		f.Visible = func(j *fsm.Job) bool { return c.SeesJob(r, j) }
	}
	return r.List(s.bounded(f))
}

// bounded is f with the service's scan bound, unless f sets its own.
func (s *Service) bounded(f fsm.ListFilter) fsm.ListFilter {
	if f.MaxScan == 0 {
		f.MaxScan = s.cfg.MaxScan
	}
	return f
}

// MaxHeld bounds the answer of Held.
const MaxHeld = 1000

// Held returns the running jobs whose lease the claimant role holds for
// worker (at most MaxHeld, oldest first): what a worker that lost its
// claim answers (a restarted agent, an MCP session on a node that died)
// is still working on, read from the replicated state. Its cost grows
// with the number of running jobs.
func (s *Service) Held(c Caller, worker string) ([]*fsm.Job, error) {
	if worker == "" {
		worker = c.WorkerID
	}
	if err := CheckWorkerID("worker_id", worker, true); err != nil {
		return nil, err
	}
	if err := c.CheckWorker(worker); err != nil {
		return nil, err
	}
	role := c.ViewRole()
	r := s.state.Read()
	if b := r.WorkerIDRole(worker); b != "" && b != role && role != fsm.HeadRole {
		return nil, fmt.Errorf("%w: %s is in use by another role", fsm.ErrWorkerIDTaken, worker)
	}
	jobs, _, err := r.List(s.bounded(fsm.ListFilter{State: fsm.StateRunning, Limit: MaxHeld, Visible: func(j *fsm.Job) bool {
		return j.Lease != nil && j.Lease.Owner == role && j.Lease.WorkerID == worker && c.InScope(j.Stream)
	}}))
	return jobs, err
}

// ListDLQ pages through the failed and dead jobs (f.State, if set, must be
// one of them): it walks only their lanes, so its cost grows with the page
// and the dead letters, not with the other jobs.
func (s *Service) ListDLQ(f fsm.ListFilter) ([]*fsm.Job, uint64, error) {
	switch f.State {
	case "", fsm.StateFailed, fsm.StateDead:
		f.States = []fsm.State{fsm.StateFailed, fsm.StateDead}
	default:
		return nil, 0, invalid("the dead-letter view holds only failed and dead jobs")
	}
	return s.state.Read().List(s.bounded(f))
}

// ListDLQFor is ListDLQ as caller c may see it (a scoped token, its
// streams' dead letters).
func (s *Service) ListDLQFor(c Caller, f fsm.ListFilter) ([]*fsm.Job, uint64, error) {
	if c.Scoped() {
		f.Visible = func(j *fsm.Job) bool { return c.InScope(j.Stream) }
	}
	return s.ListDLQ(f)
}

// ClaimJob claims the job id for actor, who has the capabilities caps
// (the v0 claim by id): ClaimNext with the job named.
func (s *Service) ClaimJob(ctx context.Context, id string, actor fsm.Actor, caps []string) (*fsm.Job, uint64, error) {
	return s.ClaimNext(ctx, ClaimNextInput{JobID: id, Actor: actor, Capabilities: caps})
}

// Cancel cancels a job (head): a queued one at once, a running one once
// its worker stops (fsm.CancelCommand). A repeat changes nothing
// (res.Duplicate); a done, failed or dead job is refused.
func (s *Service) Cancel(ctx context.Context, id, reason string, actor fsm.Actor) (*fsm.Result, uint64, error) {
	if len(reason) > MaxTextBytes {
		return nil, 0, invalid("reason is larger than %d bytes", MaxTextBytes)
	}
	if !s.atLevel(ctx, fsm.LevelIdentity) {
		return nil, 0, ErrUpgradeInProgress
	}
	return s.Propose(ctx, fsm.CmdCancel, &fsm.CancelCommand{Now: s.now(), JobID: id, Reason: reason, Actor: actor})
}

// CompleteInput completes the attempt Ref names.
type CompleteInput struct {
	Ref            fsm.LeaseRef
	Actor          fsm.Actor
	Result         json.RawMessage
	Stdout, Stderr string
}

// Complete completes an attempt. A repeat of an attempt's complete is
// answered as the first (res.Duplicate).
func (s *Service) Complete(ctx context.Context, in CompleteInput) (*fsm.Result, uint64, error) {
	cmd, idx, err := s.completeCommand(ctx, in)
	if err != nil {
		return nil, idx, err
	}
	return s.Propose(ctx, fsm.CmdComplete, cmd)
}

// FailInput fails the attempt Ref names; Requeue puts the job back while it
// has attempts left.
type FailInput struct {
	Ref            fsm.LeaseRef
	Actor          fsm.Actor
	Error          fsm.JobError
	Requeue        bool
	Stdout, Stderr string
}

// Fail fails an attempt.
func (s *Service) Fail(ctx context.Context, in FailInput) (*fsm.Result, uint64, error) {
	e := in.Error
	if len(e.Message)+len(e.Stack)+len(e.Code) > MaxTextBytes {
		return nil, 0, invalid("error is larger than %d bytes", MaxTextBytes)
	}
	in.Ref = s.namedAttempt(in.Ref)
	if err := s.mayAct(ctx, "fail", in.Ref, in.Actor); err != nil {
		return nil, 0, err
	}
	return s.Propose(ctx, fsm.CmdFail, &fsm.FailCommand{Now: s.now(), Ref: in.Ref, Actor: in.Actor,
		Error: e, Requeue: in.Requeue, Stdout: in.Stdout, Stderr: in.Stderr})
}

// Release gives a running job back to its queue without counting the
// attempt.
func (s *Service) Release(ctx context.Context, ref fsm.LeaseRef, actor fsm.Actor, reason string) (*fsm.Result, uint64, error) {
	return s.ReleaseFor(ctx, ref, actor, reason, 0, false)
}

// MaxCooldown bounds a release's cooldown.
const MaxCooldown = 24 * time.Hour

// ReleaseFor is Release with a cooldown: the job is not claimable again
// for that long (0: at once), so the worker that could not do it is not
// handed it straight back.
func (s *Service) ReleaseFor(ctx context.Context, ref fsm.LeaseRef, actor fsm.Actor, reason string, cooldown time.Duration, notForMe bool) (*fsm.Result, uint64, error) {
	if len(reason) > MaxTextBytes {
		return nil, 0, invalid("reason is larger than %d bytes", MaxTextBytes)
	}
	if cooldown < 0 || cooldown > MaxCooldown {
		return nil, 0, invalid("cooldown_ms must be 0 to %d", MaxCooldown.Milliseconds())
	}
	if err := s.mayAct(ctx, "release", ref, actor); err != nil {
		return nil, 0, err
	}
	cmd := fsm.ReleaseCommand{Now: s.now(), Ref: ref, Actor: actor, Reason: reason}
	if notForMe {
		if actor.WorkerID == "" {
			return nil, 0, invalid("not_for_me needs the worker_id of the worker it is not for")
		}
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, 0, ErrUpgradeInProgress
		}
		cmd.NotFor = true
		if cooldown > 0 {
			cmd.NotBefore = cmd.Now + cooldown.Nanoseconds()
		}
		return s.Propose(ctx, fsm.CmdRelease, &cmd)
	}
	if cooldown > 0 {
		if !s.atLevel(ctx, fsm.LevelIdentity) {
			return nil, 0, ErrUpgradeInProgress
		}
		cmd.NotBefore = cmd.Now + cooldown.Nanoseconds()
	}
	return s.Propose(ctx, fsm.CmdRelease, &cmd)
}

// A job keeps at most MaxComments comments of at most MaxCommentBytes of
// text together: every answer about a job carries its comments.
const (
	MaxComments     = 100
	MaxCommentBytes = 256 << 10
)

// CommentLimitError: the job has as many comments, or as much comment
// text, as a job keeps; nothing was added.
type CommentLimitError struct{ Message string }

func (e *CommentLimitError) Error() string { return e.Message }

// Comment attaches a note to a job actor may see, unless the job already
// has MaxComments comments or the note would take their text past
// MaxCommentBytes.
//
// The limits are checked here, on the leader before proposing, not when the
// entry applies: a node of an older version applies every comment entry,
// and a refusal only the new version made in apply would leave the
// replicas disagreeing during a rolling upgrade. Comments on one job are
// serialized on this node (each is proposed once the last is applied), so
// while one node leads the limits hold exactly; across a change of leader,
// the comments the old leader had proposed and not yet seen applied can
// still commit, so a job can exceed the limits by at most that many
// comments (one per job whose comment was in flight, or a few more if their
// callers retried an unknown outcome).
func (s *Service) Comment(ctx context.Context, id string, actor fsm.Actor, text string) (*fsm.Result, uint64, error) {
	if strings.TrimSpace(text) == "" {
		return nil, 0, invalid("text is required")
	}
	if len(text) > MaxTextBytes {
		return nil, 0, invalid("text is larger than %d bytes", MaxTextBytes)
	}
	unlock, err := s.comments.lock(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	defer unlock()
	j, err := Lookup(s.state.Peek(), RoleCaller(actor.Role), id)
	if err != nil {
		return nil, 0, err
	}
	if len(j.Extra().Comments) >= MaxComments {
		return nil, 0, &CommentLimitError{Message: fmt.Sprintf("job %s has %d comments, the most a job keeps; nothing was added", id, len(j.Extra().Comments))}
	}
	size := 0
	for _, c := range j.Extra().Comments {
		size += len(c.Text)
	}
	if size+len(text) > MaxCommentBytes {
		return nil, 0, &CommentLimitError{Message: fmt.Sprintf(
			"job %s has %d bytes of comments; this %d-byte comment would take them past the %d bytes a job keeps; nothing was added",
			id, size, len(text), MaxCommentBytes)}
	}
	return s.Propose(ctx, fsm.CmdComment, &fsm.CommentCommand{Now: s.now(), JobID: id, Actor: actor, Text: text})
}

// Redrive puts a failed or dead job back in its queue with fresh attempts.
func (s *Service) Redrive(ctx context.Context, id string, actor fsm.Actor) (*fsm.Result, uint64, error) {
	return s.Propose(ctx, fsm.CmdRedrive, &fsm.RedriveCommand{Now: s.now(), JobID: id, Actor: actor})
}
