package fsm

import (
	"fmt"
	"slices"
)

// Ending an attempt: heartbeat, complete, fail and release of a running
// job's lease, the checks they share, and killing a job out of attempts.

// kill marks a queued job dead because it has no attempts left.
func (a *applier) kill(old *Job, now int64, actor, why string) *Job {
	j := copyJob(old)
	j.State = StateDead
	j.FinishedAt = now
	j.addEvent(Event{At: now, Type: EventDead, Actor: actor, From: old.State.Code(), To: StateDead.Code(), Text: why})
	a.put(old, j, now)
	return j
}

// repeated recognises a complete or fail that repeats one already applied
// for a finished attempt of j, by the same claimant (strict: its role and
// worker), and returns the first answer.
func repeated(j *Job, ref LeaseRef, want Outcome, actor Actor, strict bool) *Result {
	if ref.AttemptID == "" || ref.Token == "" {
		return nil
	}
	at := j.FindAttempt(ref.AttemptID)
	if at == nil || at.Token != ref.Token || at.Outcome != want || !at.ByHolder || !ownsAttempt(at, actor, strict) {
		return nil
	}
	return &Result{Job: j, Duplicate: true, Requeued: at.Requeued, DLQ: at.DLQ}
}

func (a *applier) lookupRunning(op string, ref LeaseRef, actor Actor, want Outcome) (*Job, *Result) {
	old, err := a.get(ref.JobID)
	if err != nil {
		panic(err)
	}
	if old == nil {
		return nil, notFound(ref.JobID)
	}
	strict := a.t.level >= LevelIdentity
	if want != "" {
		if r := repeated(old, ref, want, actor, strict); r != nil {
			return nil, r
		}
	}
	if err := authorize(op, old, ref, actor, strict); err != nil {
		return nil, &Result{Job: old, Err: err}
	}
	return old, nil
}

// endAttempt closes the current attempt of j (a copy) and drops its lease.
func endAttempt(j *Job, now int64, outcome Outcome, jerr *JobError) *Attempt {
	at := j.CurrentAttempt()
	if at != nil {
		at.EndedAt = now
		at.Outcome = outcome
		at.Error = jerr
	}
	j.Lease = nil
	return at
}

func (a *applier) heartbeat(c *HeartbeatCommand) *Result {
	old, r := a.lookupRunning("heartbeat", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	j := copyJob(old)
	j.Lease.ExpiresAt = c.Now + j.leaseNanos(c.LeaseNanos)
	j.addEvent(Event{At: c.Now, Type: EventHeartbeat, Actor: a.in.actor(c.Actor), AttemptID: j.Lease.AttemptID, WorkerID: c.Actor.WorkerID})
	a.put(old, j, c.Now)
	a.seeCaps(j.Extra().ClaimCaps, c.Now) // its worker is alive
	a.useWorker(Actor{Role: j.Lease.Owner, WorkerID: j.Lease.WorkerID}, c.Now, false)
	return &Result{Job: j}
}

func (a *applier) complete(c *CompleteCommand) *Result {
	old, r := a.lookupRunning("complete", c.Ref, c.Actor, OutcomeCompleted)
	if r != nil {
		return r
	}
	if old.IsTask() && !hasSummary(c.Result) {
		return &Result{Job: old, Err: fmt.Errorf("complete: %w: a task's result must be a JSON object with a string \"summary\" (the task stays running)", ErrInvalid)}
	}
	j := copyJob(old)
	at := endAttempt(j, c.Now, OutcomeCompleted, nil)
	at.ByHolder = c.Ref.Token != "" // authorize checked it is the lease's token
	j.State = StateDone
	j.Result = c.Result
	j.Error = nil
	if c.Stdout != "" || c.Stderr != "" || j.extra != nil {
		j.extraMut().Stdout, j.extraMut().Stderr = c.Stdout, c.Stderr
	}
	j.FinishedAt = c.Now
	j.addEvent(Event{At: c.Now, Type: EventCompleted, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: StateDone.Code(),
		AttemptID: at.ID, WorkerID: c.Actor.WorkerID})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}

func (a *applier) fail(c *FailCommand) *Result {
	old, r := a.lookupRunning("fail", c.Ref, c.Actor, OutcomeFailed)
	if r != nil {
		return r
	}
	j := copyJob(old)
	jerr := c.Error
	at := endAttempt(j, c.Now, OutcomeFailed, &jerr)
	at.ByHolder = c.Ref.Token != ""
	j.Error = &jerr
	if c.Stdout != "" || c.Stderr != "" {
		j.extraMut().Stdout, j.extraMut().Stderr = c.Stdout, c.Stderr
	}
	res := &Result{Job: j}
	switch {
	case old.CancelRequested():
		// The worker stopped as asked: the job ends cancelled, whatever
		// the fail asked for.
		j.State = StateCancelled
		j.FinishedAt = c.Now
	case c.Requeue && j.Attempts < j.MaxAttempts:
		j.State = StateQueued
		j.QueueIndex = a.index
		if d := retryDelay(j); d > 0 {
			j.NotBefore = c.Now + d // the retry backoff
		}
		res.Requeued = true
	case c.Requeue:
		j.State = StateDead
		j.FinishedAt = c.Now
		res.DLQ = true
	default:
		j.State = StateFailed
		j.FinishedAt = c.Now
		res.DLQ = true
	}
	at.Requeued, at.DLQ = res.Requeued, res.DLQ
	if j.State == StateCancelled {
		a.cancelled(j, c.Now, a.in.actor(c.Actor), jerr.Message)
	} else {
		j.addEvent(Event{At: c.Now, Type: EventFailed, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: j.State.Code(),
			AttemptID: at.ID, WorkerID: c.Actor.WorkerID, Text: jerr.Message})
	}
	a.put(old, j, c.Now)
	return res
}

func (a *applier) release(c *ReleaseCommand) *Result { return a.releaseUntil(c, 0, false) }

// releaseUntil is release; a notBefore after c.Now keeps the job from being
// claimed again until then (the promoter queues it then).
func (a *applier) releaseUntil(c *ReleaseCommand, notBefore int64, notForMe bool) *Result {
	old, r := a.lookupRunning("release", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	j := copyJob(old)
	if old.CancelRequested() {
		// Given back after a cancel: it ends cancelled, not queued again.
		endAttempt(j, c.Now, OutcomeCancelled, nil)
		a.cancelled(j, c.Now, a.in.actor(c.Actor), c.Reason)
		a.put(old, j, c.Now)
		return &Result{Job: j}
	}
	at := endAttempt(j, c.Now, OutcomeReleased, nil)
	// A release gives the attempt back: it does not count against the limit.
	j.Attempts--
	j.State = StateQueued
	j.QueueIndex = a.index
	if notBefore > c.Now {
		j.NotBefore = notBefore
	}
	if w := c.Actor.WorkerID; notForMe && !slices.Contains(j.Extra().NotFor, w) {
		j.extraMut().NotFor = append(slices.Clone(j.Extra().NotFor[max(0, len(j.Extra().NotFor)-MaxNotFor+1):]), w)
	}
	j.addEvent(Event{At: c.Now, Type: EventReleased, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: StateQueued.Code(),
		AttemptID: at.ID, WorkerID: c.Actor.WorkerID, Text: c.Reason})
	a.put(old, j, c.Now)
	return &Result{Job: j, Requeued: true}
}
