package fsm

import "fmt"

// CancelCode is the error code a worker fails a cancelled job with (any
// code ends a cancel-requested job as cancelled; this one says why).
const CancelCode = "cancelled"

// CancelCommand is head's cancel of a job. A queued job is cancelled at
// once; a running one is marked cancel-requested: its worker learns it
// from its next heartbeat answer and stops, and whatever ends the attempt
// (a fail, a release, the lease running out) ends the job cancelled, not
// queued again. A complete still completes it: the work was done before
// the worker knew. A cancelled job stays cancelled (a repeat changes
// nothing); a done, failed or dead one is refused.
type CancelCommand struct {
	Now    int64
	JobID  string
	Reason string
	Actor  Actor
}

func init() {
	register(CmdCancel, "cancel", func() command { return new(CancelCommand) })
}

func (c *CancelCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.JobID)
	e.str(c.Reason)
	e.actor(c.Actor)
}

func (c *CancelCommand) decode(d *dec) {
	c.Now = d.varint()
	c.JobID = d.str()
	c.Reason = d.str()
	c.Actor = d.actor()
}

func (c *CancelCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.JobID)
	f.str(3, &c.Reason)
	f.actor(4, &c.Actor)
}

func (c *CancelCommand) apply(a *applier) *Result {
	old := a.t.job(c.JobID)
	if old == nil {
		return notFound(c.JobID)
	}
	a.t.jobControl = true
	switch {
	case old.State == StateCancelled, old.CancelRequested():
		return &Result{Job: old, Duplicate: true}
	case old.State == StateQueued:
		j := copyJob(old)
		j.extraMut().CancelReason = c.Reason
		a.cancelled(j, c.Now, a.in.actor(c.Actor), c.Reason)
		a.put(old, j, c.Now)
		return &Result{Job: j}
	case old.State == StateRunning:
		j := copyJob(old)
		j.extraMut().CancelRequestedAt, j.extraMut().CancelReason = c.Now, c.Reason
		j.addEvent(Event{At: c.Now, Type: EventCancelRequested, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: StateRunning.Code(),
			AttemptID: j.Lease.AttemptID, WorkerID: j.Lease.WorkerID, Text: c.Reason})
		a.put(old, j, c.Now)
		return &Result{Job: j}
	}
	return &Result{Job: old, Err: refuse(ErrIllegalTransition, "cancel", old, fmt.Sprintf("a %s job cannot be cancelled", old.State))}
}

// cancelled ends j (a copy, its attempt already ended if it ran) as
// cancelled.
func (a *applier) cancelled(j *Job, now int64, actor, text string) {
	from := j.State
	if j.Lease != nil {
		from = StateRunning
	}
	j.State = StateCancelled
	j.Lease = nil
	j.NotBefore = 0
	if j.extra != nil {
		j.extra.DepsPending = 0
	}
	j.FinishedAt = now
	j.addEvent(Event{At: now, Type: EventCancelled, Actor: actor, From: from.Code(), To: StateCancelled.Code(), Text: text})
}
