package fsm

import (
	"fmt"

	"github.com/google/btree"
)

// Dependencies. A job created with DependsOn waits, queued but in no lane,
// until every job it names is done; then it enters its queue as a job
// queued at that moment. If one of them ends failed, dead or cancelled
// instead, the waiting job fails at once (code dependency_failed), and so,
// in turn, do the jobs waiting on it; a job created with RunOnDepFailure
// instead waits until every job it names has ended, however. A job can
// only name jobs that exist when it is created, so no cycle can form.

// MaxDependencies caps the jobs one job may wait for.
const MaxDependencies = 100

// DependencyFailedCode is the error code of a job failed because a job it
// waited for did not end done.
const DependencyFailedCode = "dependency_failed"

// depItem keys a waiting job under one job it waits for.
type depItem struct {
	dep, id string
	j       *Job
}

func lessDep(a, b depItem) bool {
	if a.dep != b.dep {
		return a.dep < b.dep
	}
	return a.id < b.id
}

func newDepTree() *btree.BTreeG[depItem] { return btree.NewG(btreeDegree, lessDep) }

// waitingOnDeps reports whether j waits for jobs it depends on.
func waitingOnDeps(j *Job) bool { return j.State == StateQueued && j.Extra().DepsPending > 0 }

// putDeps keeps the dependents index up to date as old is replaced by j:
// a waiting job is listed under each job it still depends on.
func (w *writer) putDeps(old, j *Job) {
	was := old != nil && waitingOnDeps(old)
	is := j != nil && waitingOnDeps(j)
	if !was && !is {
		return
	}
	if was {
		for _, d := range old.Extra().DependsOn {
			w.t.dependents.Delete(depItem{dep: d, id: old.ID})
		}
	}
	if is {
		for _, d := range j.Extra().DependsOn {
			w.t.dependents.ReplaceOrInsert(depItem{d, j.ID, j})
		}
	}
	w.dirty[tDependents] = true
}

// settleDependents tells the jobs waiting on j, which has just finished,
// how it ended: done counts one dependency off (the last one makes the job
// claimable); any other end fails them, except those that run whatever
// their dependencies did (RunOnDepFailure), for which it counts off too.
func (a *applier) settleDependents(j *Job, now int64) {
	var waiting []*Job
	a.t.dependents.AscendGreaterOrEqual(depItem{dep: j.ID}, func(it depItem) bool {
		if it.dep != j.ID {
			return false
		}
		waiting = append(waiting, it.j)
		return true
	})
	for _, old := range waiting {
		cur := a.t.job(old.ID) // an earlier step may have changed it
		if cur == nil || !waitingOnDeps(cur) {
			continue
		}
		d := copyJob(cur)
		if j.State == StateDone || d.Extra().RunOnDepFailure {
			d.extraMut().DepsPending--
			if d.Extra().DepsPending == 0 {
				d.QueueIndex = a.index // it enters its queue now
			}
			a.put(cur, d, now)
			continue
		}
		d.State = StateFailed
		d.extraMut().DepsPending = 0
		d.FinishedAt = now
		d.Error = &JobError{Code: DependencyFailedCode, Message: fmt.Sprintf("job %s it depends on ended %s", j.ID, j.State)}
		d.addEvent(Event{At: now, Type: EventFailed, Actor: "dependencies", From: StateQueued.Code(), To: StateFailed.Code(), Text: d.Error.Message})
		a.put(cur, d, now)
	}
}

// dependencies checks the jobs a new job names and counts those not
// finished yet. A job named twice counts once; one that ended otherwise
// than done refuses the create, unless the new job runs whatever its
// dependencies did (runAnyway), for which any end is settled.
func (a *applier) dependencies(ids []string, runAnyway bool) (deps []string, pending int, err error) {
	if len(ids) > MaxDependencies {
		return nil, 0, fmt.Errorf("create: %w: at most %d dependencies", ErrInvalid, MaxDependencies)
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			continue
		}
		seen[id] = true
		dj := a.t.job(id)
		switch {
		case dj == nil:
			return nil, 0, fmt.Errorf("create: job %s it depends on: %w", id, ErrNotFound)
		case dj.State == StateDone, runAnyway && dj.State.Terminal():
		case dj.State.Terminal():
			return nil, 0, fmt.Errorf("create: %w: job %s it depends on ended %s", ErrInvalid, id, dj.State)
		default:
			pending++
		}
		deps = append(deps, id)
	}
	return deps, pending, nil
}
