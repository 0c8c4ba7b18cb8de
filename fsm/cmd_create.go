package fsm

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

func init() {
	register(CmdCreate, "create", func() command { return new(CreateCommand) })
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
