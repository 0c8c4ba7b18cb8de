package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// Expiry and retention: reaping expired leases, ending attempts a death cut
// short, and purging finished jobs.

func (a *applier) reap(c *ReapCommand) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("reap: %w: max must be positive", ErrInvalid))
	}
	// Collect first: the lease index changes under us as we write.
	var expired []*Job
	a.t.lease.Ascend(func(it timeItem) bool {
		if len(expired) == c.Max || it.at > c.Now {
			return false
		}
		expired = append(expired, it.j)
		return true
	})
	res := &Result{}
	for _, old := range expired {
		res.Jobs = append(res.Jobs, a.expire(old, c.Now, ""))
	}
	return res
}

// expire ends a running job's attempt as its lease running out does: the
// job is queued again, or dead when out of attempts; a task fails
// (auto-fail, seed 004). deadWorker, if set, is the registered worker
// whose death ended the lease early (cmd_health.go).
func (a *applier) expire(old *Job, now int64, deadWorker string) *Job {
	return a.expireDead(old, now, deadWorker, "")
}

// expireDead is expire for a lease a death ended: of worker deadWorker
// itself, or, when deadGateway is set, of that gateway of the worker (or,
// with no worker, the push gateway the task was delivered to). The
// event (and a task's auto-fail message) names what died; a gateway's
// death is named from LevelDelivery on (event text is replicated state),
// and below it reads as the worker's, as older builds write it.
func (a *applier) expireDead(old *Job, now int64, deadWorker, deadGateway string) *Job {
	dead := ""
	switch {
	case deadWorker == "" && deadGateway != "":
		dead = "gateway " + deadGateway // a task delivered to it (dispatch.go)
	case deadWorker != "":
		dead = "worker " + deadWorker
		if deadGateway != "" && a.t.level >= LevelDelivery {
			dead = "gateway " + deadGateway + " of worker " + deadWorker
		}
	}
	j := copyJob(old)
	if old.CancelRequested() {
		// Its worker never reported after the cancel: the lease's end
		// ends the job cancelled, not queued again.
		at := endAttempt(j, now, OutcomeCancelled, nil)
		text := "lease expired after a cancel"
		if dead != "" {
			text = dead + " declared dead after a cancel"
		}
		j.addEvent(Event{At: now, Type: EventReaped, Actor: "reaper", From: StateRunning.Code(), To: StateCancelled.Code(),
			AttemptID: at.ID, WorkerID: at.WorkerID, Text: text})
		a.cancelled(j, now, "reaper", text)
		a.put(old, j, now)
		return j
	}
	var jerr *JobError
	if j.IsTask() {
		// A task's lease is twice its timeout: its worker crashed or lost
		// its way, and the task fails rather than runs again (seed 004).
		jerr = &JobError{Code: AutoFailCode, Message: autoFailMessage(j.Extra().Timeout)}
		switch {
		case dead == "":
		case deadWorker == "":
			jerr.Message = "Auto-failed: the gateway " + deadGateway + " it was delivered to was declared dead with no complete/fail reported."
		case deadGateway != "" && a.t.level >= LevelDelivery:
			jerr.Message = "Auto-failed: the gateway " + deadGateway + " of its worker " + deadWorker + " was declared dead with no complete/fail reported."
		default:
			jerr.Message = "Auto-failed: its worker " + deadWorker + " was declared dead with no complete/fail reported."
		}
	}
	at := endAttempt(j, now, OutcomeExpired, jerr)
	text := "lease expired"
	if dead != "" {
		text = dead + " declared dead"
	}
	switch {
	case jerr != nil:
		at.DLQ = true
		j.Error = jerr
		j.State = StateFailed
		j.FinishedAt = now
		text = jerr.Message
	case j.Attempts >= j.MaxAttempts:
		j.State = StateDead
		j.FinishedAt = now
	default:
		j.State = StateQueued
		j.QueueIndex = a.index
	}
	j.addEvent(Event{At: now, Type: EventReaped, Actor: "reaper", From: StateRunning.Code(), To: j.State.Code(),
		AttemptID: at.ID, WorkerID: at.WorkerID, Text: text})
	a.put(old, j, now)
	return j
}

// purge deletes done jobs that finished before c.Before, oldest first, at
// most c.Max of them. Their idempotency keys are freed with them.
func (a *applier) purge(c *PurgeCommand) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("purge: %w: max must be positive", ErrInvalid))
	}
	if a.t.level >= LevelIdentity {
		a.dropLapsedBindings(c.Now-WorkerIDIdle, c.Max)
	}
	return &Result{Jobs: a.deleteFinished(a.t.finished, c.Before, c.Max)}
}

// deleteFinished deletes the jobs of a finish-time index (done jobs, or
// finished tasks) that finished before before, oldest first, at most max
// of them, and returns them.
func (a *applier) deleteFinished(idx *btree.BTreeG[timeItem], before int64, max int) []*Job {
	// Collect first: the index changes under us as we delete.
	var old []*Job
	idx.Ascend(func(it timeItem) bool {
		if len(old) == max || it.at >= before {
			return false
		}
		old = append(old, it.j)
		return true
	})
	for _, j := range old {
		a.putJob(j, nil)
	}
	return old
}
