package fsm

import "fmt"

// TaskCreateCommand enqueues a developer-queue task: a job in a registered,
// active stream, running a registered tool. Its timeout is Timeout if set,
// else the tool's, else its task class's, as the registry in force when the
// entry applies says; its lease is twice that, so the reaper fails it at
// twice its timeout.
//
// With ClonedFrom set it is a requeue: the new task copies the tool, class,
// timeout and payload of that failed task (into Stream if set, else the
// same stream), which stays as it is.
type TaskCreateCommand struct {
	Now            int64
	ID             string
	Stream         string
	ToolName       string
	Timeout        int64 // seconds; 0: the tool's or its class's
	Payload        []byte
	IdempotencyKey string
	ClonedFrom     string
	Actor          Actor
}

// TaskPurgeCommand deletes up to Max finished tasks (done, failed or dead)
// that finished before Before, oldest first. Queued and running tasks are
// never touched.
type TaskPurgeCommand struct {
	Now    int64
	Before int64
	Max    int
}

func init() {
	register(CmdTaskCreate, "task-create", func() command { return new(TaskCreateCommand) })
	register(CmdTaskPurge, "task-purge", func() command { return new(TaskPurgeCommand) })
}

func (c *TaskCreateCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Stream)
	e.str(c.ToolName)
	e.varint(c.Timeout)
	e.bytes(c.Payload)
	e.str(c.IdempotencyKey)
	e.str(c.ClonedFrom)
	e.actor(c.Actor)
}

func (c *TaskCreateCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Stream = d.str()
	c.ToolName = d.str()
	c.Timeout = d.varint()
	c.Payload = d.bytes()
	c.IdempotencyKey = d.str()
	c.ClonedFrom = d.str()
	c.Actor = d.actor()
}

func (c *TaskCreateCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.str(3, &c.Stream)
	f.str(4, &c.ToolName)
	f.i64(5, &c.Timeout)
	f.bytes(6, &c.Payload)
	f.str(7, &c.IdempotencyKey)
	f.str(8, &c.ClonedFrom)
	f.actor(9, &c.Actor)
}

func (c *TaskCreateCommand) apply(a *applier) *Result {
	if c.ID == "" || c.Timeout < 0 {
		return fail(fmt.Errorf("task create: %w: an id is required and the timeout must not be negative", ErrInvalid))
	}
	if c.IdempotencyKey != "" {
		if j := a.t.jobByIdem(c.IdempotencyKey); j != nil {
			return &Result{Job: j, Duplicate: true}
		}
	}
	if a.t.job(c.ID) != nil {
		return fail(fmt.Errorf("task create: %w: job %s already exists", ErrInvalid, c.ID))
	}
	tool, class, timeout, payload, stream := c.ToolName, "", c.Timeout, c.Payload, c.Stream
	if c.ClonedFrom != "" {
		src := a.t.job(c.ClonedFrom)
		if src == nil || !src.IsTask() {
			return fail(fmt.Errorf("task %s: %w", c.ClonedFrom, ErrNotFound))
		}
		if src.State != StateFailed && src.State != StateDead {
			return &Result{Job: src, Err: refuse(ErrIllegalTransition, "requeue", src, "only a failed task can be requeued")}
		}
		x := src.Extra()
		tool, class, timeout, payload = x.ToolName, x.TaskClass, x.Timeout, src.Payload
		if stream == "" {
			stream = src.Stream
		}
	}
	st := a.t.stream(stream)
	if st == nil {
		return fail(fmt.Errorf("stream %s: %w (create it first)", stream, ErrNotFound))
	}
	if st.Ended() {
		return &Result{Stream: st, Err: fmt.Errorf("stream %s: %w (it takes no new tasks)", stream, ErrStreamEnded)}
	}
	if c.ClonedFrom == "" {
		t := a.t.registry.Tool(tool)
		if t == nil {
			return fail(fmt.Errorf("task create: %w: unknown tool %q; %s", ErrInvalid, tool, a.t.registry.toolNames()))
		}
		class = t.TaskClass
		if timeout == 0 {
			timeout = t.Timeout
		}
		if timeout == 0 {
			timeout, _ = a.t.registry.ClassTimeout(class)
		}
	}
	if len(payload) == 0 {
		payload = []byte("{}")
	}
	j := &Job{
		ID: c.ID, Stream: stream, Payload: payload, State: StateQueued, MaxAttempts: a.maxAttempts,
		IdempotencyKey: c.IdempotencyKey,
		extra:          &JobExtra{LeaseSeconds: 2 * timeout, TaskClass: class, ToolName: tool, Timeout: timeout, ClonedFrom: c.ClonedFrom},
		CreatedAt:      c.Now, CreateIndex: a.index, QueueIndex: a.index,
	}
	if a.t.level >= LevelTaskDefaults {
		a.applyDefaults(j)
		a.applyContract(j, "")
		if r := j.Extra().Rate; r != nil {
			a.defineRate(r, c.Now)
		}
	}
	text := ""
	if c.ClonedFrom != "" {
		text = "requeue of " + c.ClonedFrom
	}
	j.setCreated(Event{Seq: 1, At: c.Now, Type: EventCreated, Actor: a.in.actor(c.Actor), To: codeQueued, Text: text})
	a.put(nil, j, c.Now)
	return &Result{Job: j, Stream: st}
}

func (c *TaskPurgeCommand) encode(e *enc) {
	e.varint(c.Now)
	e.varint(c.Before)
	e.int(c.Max)
}

func (c *TaskPurgeCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Before = d.varint()
	c.Max = d.int()
}

func (c *TaskPurgeCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.i64(2, &c.Before)
	f.int(3, &c.Max)
}

func (c *TaskPurgeCommand) apply(a *applier) *Result {
	if c.Max <= 0 {
		return fail(fmt.Errorf("task purge: %w: max must be positive", ErrInvalid))
	}
	return &Result{Jobs: a.deleteFinished(a.t.taskEnded, c.Before, c.Max)}
}
