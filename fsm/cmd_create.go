package fsm

import "fmt"

// CreateCommand adds a queued job. A create whose idempotency key is already
// taken returns the existing job and changes nothing.
type CreateCommand struct {
	Now            int64
	ID             string
	Stream         string
	Target         string
	Payload        []byte
	MaxAttempts    int
	LeaseSeconds   int64
	TaskClass      string
	IdempotencyKey string
	Actor          Actor
}

// CreateExCommand is a create with options CreateCommand has no fields
// for: a priority, a time before which the job is not claimable (RunAt,
// unix nanoseconds; 0 or past: at once) and a retry backoff (seconds). A
// leader proposes it only for a job that uses one, and only once every
// server applies it.
type CreateExCommand struct {
	CreateCommand
	Priority                int
	RunAt                   int64
	BackoffBase, BackoffMax int64
	// ConcurrencyKey and ConcurrencyLimit: at most the limit (at least 1)
	// of the key's jobs run at once (concurrency.go).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// DependsOn names jobs that must be done before this one is claimable
	// (depends.go).
	DependsOn []string

	// requires is the requirement key CreateRequiresCommand adds;
	// runOnDepFailure the dependency policy CreateOptsCommand adds.
	requires        string
	runOnDepFailure bool
}

func init() {
	register(CmdCreate, "create", func() command { return new(CreateCommand) })
	register(CmdCreateEx, "create-ex", func() command { return new(CreateExCommand) })
}

func (c *CreateExCommand) encode(e *enc) {
	c.CreateCommand.encode(e)
	e.int(c.Priority)
	e.varint(c.RunAt)
	e.varint(c.BackoffBase)
	e.varint(c.BackoffMax)
	e.str(c.ConcurrencyKey)
	e.int(c.ConcurrencyLimit)
	e.strs(c.DependsOn)
}

func (c *CreateExCommand) decode(d *dec) {
	d.create(&c.CreateCommand)
	c.Priority = d.int()
	c.RunAt = d.varint()
	c.BackoffBase = d.varint()
	c.BackoffMax = d.varint()
	c.ConcurrencyKey = d.istr()
	c.ConcurrencyLimit = d.int()
	c.DependsOn = d.strs()
}

func (c *CreateExCommand) apply(a *applier) *Result {
	if c.Priority < MinPriority || c.Priority > MaxPriority {
		return fail(fmt.Errorf("create: %w: priority %d out of %d..%d", ErrInvalid, c.Priority, MinPriority, MaxPriority))
	}
	if c.BackoffBase < 0 || c.BackoffMax < 0 {
		return fail(fmt.Errorf("create: %w: a negative backoff", ErrInvalid))
	}
	if c.ConcurrencyLimit < 0 || (c.ConcurrencyKey == "" && c.ConcurrencyLimit != 0) {
		return fail(fmt.Errorf("create: %w: a concurrency limit needs a key and may not be negative", ErrInvalid))
	}
	deps, pending, err := a.dependencies(c.DependsOn, c.runOnDepFailure)
	if err != nil {
		return fail(err)
	}
	a.t.jobControl = true
	return a.createWith(&c.CreateCommand, func(j *Job) {
		j.DependsOn, j.DepsPending, j.RunOnDepFailure = deps, pending, c.runOnDepFailure
		j.Priority = c.Priority
		j.BackoffBase, j.BackoffMax = c.BackoffBase, c.BackoffMax
		j.ConcurrencyKey, j.ConcurrencyLimit = c.ConcurrencyKey, c.ConcurrencyLimit
		j.Requires = c.requires
		if c.RunAt > c.Now {
			j.NotBefore = c.RunAt
		}
	})
}

func (c *CreateCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Stream)
	e.str(c.Target)
	e.bytes(c.Payload)
	e.int(c.MaxAttempts)
	e.varint(c.LeaseSeconds)
	e.str(c.TaskClass)
	e.str(c.IdempotencyKey)
	e.actor(c.Actor)
}

func (c *CreateCommand) decode(d *dec) {
	d.create(c)
}

func (c *CreateCommand) apply(a *applier) *Result { return a.create(c) }
