package fsm

import (
	"errors"
	"fmt"
)

// TaskOp is a step of the control plane's task state machine that a
// worker takes (seed 003): start, complete, fail or release.
type TaskOp byte

// Task steps.
const (
	TaskStart    TaskOp = 1 // claimed → running
	TaskComplete TaskOp = 2 // running → succeeded
	TaskFail     TaskOp = 3 // claimed|running → failed (or back to the queue with Requeue)
	TaskRelease  TaskOp = 4 // claimed|running → released
)

// To is the state the step moves a task to.
func (op TaskOp) To() TaskState {
	switch op {
	case TaskStart:
		return TaskRunning
	case TaskComplete:
		return TaskSucceeded
	case TaskFail:
		return TaskFailed
	case TaskRelease:
		return TaskReleased
	}
	return ""
}

func (op TaskOp) String() string {
	switch op {
	case TaskStart:
		return "start"
	case TaskComplete:
		return "complete"
	case TaskFail:
		return "fail"
	case TaskRelease:
		return "release"
	}
	return fmt.Sprintf("task-op-%d", byte(op))
}

// TaskStepCommand takes one step of the seed's state machine on a job under
// the lease Ref names. Start marks the current attempt running; complete,
// fail and release are the core's, with the seed's rules first: a task
// completes only once started, and anything the core refuses as illegal
// is answered with the seed's from and to. Repeats are answered as the
// core answers them (a repeated complete or fail of a finished attempt
// gets the first answer; a repeated start changes nothing).
type TaskStepCommand struct {
	Op    TaskOp
	Now   int64
	Ref   LeaseRef
	Actor Actor
	// Complete.
	Result         []byte
	Stdout, Stderr string
	// Fail.
	Error   JobError
	Requeue bool
	// Release.
	Reason string
}

func init() {
	register(CmdTaskStep, "task-step", func() command { return new(TaskStepCommand) })
}

func (c *TaskStepCommand) encode(e *enc) {
	e.byte1(byte(c.Op))
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.bytes(c.Result)
	e.str(c.Stdout)
	e.str(c.Stderr)
	e.jobError(&c.Error)
	e.bool(c.Requeue)
	e.str(c.Reason)
}

func (c *TaskStepCommand) decode(d *dec) {
	c.Op = TaskOp(d.byte1())
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Result = d.bytes()
	c.Stdout = d.str()
	c.Stderr = d.str()
	c.Error = d.jobError()
	c.Requeue = d.bool()
	c.Reason = d.str()
}

func (c *TaskStepCommand) fields(f *fields) {
	f.u8(1, (*uint8)(&c.Op))
	f.i64(2, &c.Now)
	f.ref(3, &c.Ref)
	f.actor(4, &c.Actor)
	f.bytes(5, &c.Result)
	f.str(6, &c.Stdout)
	f.str(7, &c.Stderr)
	f.jobError(8, &c.Error)
	f.bool(9, &c.Requeue)
	f.str(10, &c.Reason)
}

func (c *TaskStepCommand) apply(a *applier) *Result { return a.taskStep(c) }

func (a *applier) taskStep(c *TaskStepCommand) *Result {
	to := c.Op.To()
	if to == "" {
		return fail(fmt.Errorf("task step: %w: unknown step %d", ErrInvalid, byte(c.Op)))
	}
	// Attempts record when they started, which snapshots before the
	// feed's version do not carry.
	a.feedOn()
	old, err := a.get(c.Ref.JobID)
	if err != nil {
		panic(err)
	}
	if old == nil {
		return notFound(c.Ref.JobID)
	}
	from := old.TaskState()
	current := old.State == StateRunning && old.Lease != nil &&
		(c.Ref.AttemptID == "" || c.Ref.AttemptID == old.Lease.AttemptID)
	// A task delivered to a push gateway runs once the gateway has it: its
	// complete may come before the leader records the gateway's yes.
	if current && c.Op == TaskComplete && from == TaskClaimed && !old.Dispatching() {
		return &Result{Job: old, Err: &TransitionError{Kind: ErrIllegalTransition, JobID: old.ID, State: old.State, Op: "complete",
			Msg: "a claimed task completes only once started (POST /v1/tasks/{id}/start)", From: from, To: to}}
	}
	var res *Result
	switch c.Op {
	case TaskStart:
		res = a.startTask(c)
	case TaskComplete:
		res = a.complete(&CompleteCommand{Now: c.Now, Ref: c.Ref, Actor: c.Actor, Result: c.Result, Stdout: c.Stdout, Stderr: c.Stderr})
	case TaskFail:
		res = a.fail(&FailCommand{Now: c.Now, Ref: c.Ref, Actor: c.Actor, Error: c.Error, Requeue: c.Requeue, Stdout: c.Stdout, Stderr: c.Stderr})
	case TaskRelease:
		res = a.release(&ReleaseCommand{Now: c.Now, Ref: c.Ref, Actor: c.Actor, Reason: c.Reason})
	}
	var te *TransitionError
	if res.Err != nil && errors.As(res.Err, &te) && errors.Is(te.Kind, ErrIllegalTransition) && te.From == "" {
		// The core refused a job that is not running: name the seed's
		// states. The error is the core's own (a result no reader shares).
		te.From, te.To = from, to
	}
	return res
}

// startTask marks the current attempt of a running job started (claimed →
// running). A repeated start of a started attempt changes nothing.
func (a *applier) startTask(c *TaskStepCommand) *Result {
	old, r := a.lookupRunning("start", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	if at := old.CurrentAttempt(); at == nil || at.RunningAt != 0 {
		return &Result{Job: old, Duplicate: at != nil}
	}
	j := copyJob(old)
	at := j.CurrentAttempt()
	at.RunningAt = c.Now
	j.addEvent(Event{At: c.Now, Type: EventStarted, Actor: a.in.actor(c.Actor), From: StateRunning.Code(), To: StateRunning.Code(),
		AttemptID: at.ID, WorkerID: c.Actor.WorkerID})
	a.put(old, j, c.Now)
	return &Result{Job: j}
}
