package fsm

// TaskState is a job's state in the control plane's vocabulary (seed 003),
// a mapping of the canonical states: the same job reads the same whichever
// API touches it.
//
//	queued          queued, never handed out or handed out and given back by a fail with requeue or a redrive
//	released        queued after its last attempt was released, or reaped (its lease ran out, or its worker was declared dead)
//	claimed         running, its current attempt not started (POST /v1/tasks/{id}/start)
//	running         running, its current attempt started
//	succeeded       done
//	failed          failed, or dead, unless its last attempt timed out
//	failed_timeout  failed or dead because its last attempt's lease ran out (or its worker died) with no complete or fail
//
// A cancelled job reads failed: the seed has no word for it.
type TaskState string

// Task states.
const (
	TaskQueued        TaskState = "queued"
	TaskReleased      TaskState = "released"
	TaskClaimed       TaskState = "claimed"
	TaskRunning       TaskState = "running"
	TaskSucceeded     TaskState = "succeeded"
	TaskFailed        TaskState = "failed"
	TaskFailedTimeout TaskState = "failed_timeout"
)

// TaskState maps j's canonical state to the control plane's vocabulary.
func (j *Job) TaskState() TaskState {
	switch j.State {
	case StateRunning:
		if at := j.CurrentAttempt(); at != nil && at.RunningAt != 0 {
			return TaskRunning
		}
		return TaskClaimed
	case StateDone:
		return TaskSucceeded
	case StateCancelled:
		return TaskFailed
	case StateFailed, StateDead:
		if at := j.AttemptLog(); len(at) > 0 && at[len(at)-1].Outcome == OutcomeExpired {
			return TaskFailedTimeout
		}
		return TaskFailed
	}
	// Queued: what put it there is the last event that moved it.
	h := j.History()
	for i := len(h) - 1; i >= 0; i-- {
		switch h[i].Type {
		case EventComment, EventHeartbeat, EventRouted:
			continue
		case EventReleased, EventReaped:
			return TaskReleased
		}
		break
	}
	return TaskQueued
}

// taskTransitions are the seed's legal transitions (from → to). Claims
// (queued|released → claimed) and the reaper's moves are the core's own.
var taskTransitions = map[TaskState][]TaskState{
	TaskQueued:   {TaskClaimed},
	TaskReleased: {TaskClaimed},
	TaskClaimed:  {TaskRunning, TaskReleased, TaskFailed, TaskFailedTimeout},
	TaskRunning:  {TaskSucceeded, TaskFailed, TaskReleased, TaskFailedTimeout},
}

// TaskTransitionLegal reports whether the seed's state machine allows from → to.
func TaskTransitionLegal(from, to TaskState) bool {
	for _, t := range taskTransitions[from] {
		if t == to {
			return true
		}
	}
	return false
}
