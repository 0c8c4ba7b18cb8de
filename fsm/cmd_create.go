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

	// The options (each optional): a priority, a time before which the job
	// is not claimable (RunAt, unix nanoseconds; 0 or past: at once) and a
	// retry backoff (seconds).
	Priority                int
	RunAt                   int64
	BackoffBase, BackoffMax int64
	// ConcurrencyKey and ConcurrencyLimit: at most the limit (at least 1)
	// of the key's jobs run at once (concurrency.go).
	ConcurrencyKey   string
	ConcurrencyLimit int
	// DependsOn names jobs that must be done before this one is claimable
	// (depends.go); RunOnDepFailure makes the job run once every one of
	// them has ended, however each ended.
	DependsOn       []string
	RunOnDepFailure bool
	// Requires: only claims with these capabilities take the job
	// (capabilities.go).
	Requires []string
	// ResultSchema is the job's result contract (contract.go), canonical
	// JSON; "" takes the stream's default. From LevelPolicies.
	ResultSchema string
	// Rate: the job's key may be claimed at most so often (ratelimit.go);
	// applied from LevelPolicies on.
	Rate *RateLimit

	// form is the command type of an entry of a build before LevelTagged
	// (0: a tagged entry): create, create-ex, create-requires or
	// create-opts, one per set of options, each with side effects of its
	// own on the snapshot flags.
	form CommandType
}

func init() {
	for _, f := range []struct {
		t    CommandType
		name string
	}{{CmdCreate, "create"}, {CmdCreateEx, "create-ex"}, {CmdCreateRequires, "create-requires"}, {CmdCreateOpts, "create-opts"}} {
		if f.t == CmdCreate {
			register(CmdCreate, "create", func() command { return new(CreateCommand) })
		}
		registerForm(f.t, f.name, CmdCreate, func() command { return new(CreateCommand) }, decodeCreateV1)
	}
}

func (c *CreateCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.istr(3, &c.Stream)
	f.istr(4, &c.Target)
	f.bytes(5, &c.Payload)
	f.int(6, &c.MaxAttempts)
	f.i64(7, &c.LeaseSeconds)
	f.istr(8, &c.TaskClass)
	f.str(9, &c.IdempotencyKey)
	f.actor(10, &c.Actor)
	f.int(11, &c.Priority)
	f.i64(12, &c.RunAt)
	f.i64(13, &c.BackoffBase)
	f.i64(14, &c.BackoffMax)
	f.istr(15, &c.ConcurrencyKey)
	f.int(16, &c.ConcurrencyLimit)
	f.strs(17, &c.DependsOn)
	f.bool(18, &c.RunOnDepFailure)
	f.strs(19, &c.Requires)
	f.schema(20, &c.ResultSchema)
	rateField(f, 21, &c.Rate)
}

func (c *CreateCommand) setForm(t CommandType) { c.form = t }

// exOptions reports whether the create uses an option of create-ex.
func (c *CreateCommand) exOptions() bool {
	return c.Priority != 0 || c.RunAt != 0 || c.BackoffBase != 0 || c.ConcurrencyKey != "" || len(c.DependsOn) > 0
}

// v1Form is the oldest form that carries the create's options.
func (c *CreateCommand) v1Form() CommandType {
	switch {
	case c.RunOnDepFailure:
		return CmdCreateOpts
	case len(c.Requires) > 0:
		return CmdCreateRequires
	case c.exOptions():
		return CmdCreateEx
	}
	return CmdCreate
}

// encodeV1 writes the positional body of the create's form: each form is
// the one before it and its own fields at the end.
func (c *CreateCommand) encodeV1(e *enc) CommandType {
	form := c.v1Form()
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
	if form == CmdCreate {
		return form
	}
	e.int(c.Priority)
	e.varint(c.RunAt)
	e.varint(c.BackoffBase)
	e.varint(c.BackoffMax)
	e.str(c.ConcurrencyKey)
	e.int(c.ConcurrencyLimit)
	e.strs(c.DependsOn)
	if form == CmdCreateEx {
		return form
	}
	e.strs(c.Requires)
	if form == CmdCreateOpts {
		e.bool(c.RunOnDepFailure)
	}
	return form
}

func decodeCreateV1(d *dec, t CommandType) command {
	c := &CreateCommand{form: t}
	d.create(c)
	if t == CmdCreate {
		return c
	}
	c.Priority = d.int()
	c.RunAt = d.varint()
	c.BackoffBase = d.varint()
	c.BackoffMax = d.varint()
	c.ConcurrencyKey = d.istr()
	c.ConcurrencyLimit = d.int()
	c.DependsOn = d.strs()
	if t == CmdCreateEx {
		return c
	}
	c.Requires = d.strs()
	if t == CmdCreateOpts {
		c.RunOnDepFailure = d.bool()
	}
	return c
}

func (c *CreateCommand) apply(a *applier) *Result {
	form := c.form
	if form == 0 {
		form = c.v1Form()
	}
	if form == CmdCreate {
		return a.create(c)
	}
	// The checks and flags in the order the forms applied them: the
	// dependency policy, the requirements, then the other options.
	if c.RunOnDepFailure && len(c.DependsOn) == 0 {
		return fail(fmt.Errorf("create: %w: a dependency policy needs dependencies", ErrInvalid))
	}
	var requires string
	if len(c.Requires) > 0 || form == CmdCreateRequires {
		key, err := CapabilityKey(c.Requires, MaxRequires)
		if err != nil {
			return fail(fmt.Errorf("create: requires: %w", err))
		}
		a.t.capabilities = true
		requires = key
	}
	if form == CmdCreateOpts {
		a.t.version8 = true
	}
	if c.Priority < MinPriority || c.Priority > MaxPriority {
		return fail(fmt.Errorf("create: %w: priority %d out of %d..%d", ErrInvalid, c.Priority, MinPriority, MaxPriority))
	}
	if c.BackoffBase < 0 || c.BackoffMax < 0 {
		return fail(fmt.Errorf("create: %w: a negative backoff", ErrInvalid))
	}
	if c.ConcurrencyLimit < 0 || (c.ConcurrencyKey == "" && c.ConcurrencyLimit != 0) {
		return fail(fmt.Errorf("create: %w: a concurrency limit needs a key and may not be negative", ErrInvalid))
	}
	deps, pending, err := a.dependencies(c.DependsOn, c.RunOnDepFailure)
	if err != nil {
		return fail(err)
	}
	a.t.jobControl = true
	return a.createWith(c, func(j *Job) {
		j.Priority = int32(c.Priority) // within MinPriority..MaxPriority (above)
		j.BackoffBase, j.BackoffMax = sat32(c.BackoffBase), sat32(c.BackoffMax)
		if deps != nil || pending != 0 || c.RunOnDepFailure || c.ConcurrencyKey != "" || c.ConcurrencyLimit != 0 || requires != "" {
			x := j.extraMut()
			x.DependsOn, x.DepsPending, x.RunOnDepFailure = deps, pending, c.RunOnDepFailure
			x.ConcurrencyKey, x.ConcurrencyLimit = c.ConcurrencyKey, c.ConcurrencyLimit
			x.Requires = requires
		}
		if c.RunAt > c.Now {
			j.NotBefore = c.RunAt
		}
	})
}
