package fsm

// FailCommand ends a running attempt with an error. With Requeue the job goes
// back to the queue while it has attempts left, else to dead; without, it
// goes to failed.
type FailCommand struct {
	Now     int64
	Ref     LeaseRef
	Actor   Actor
	Error   JobError
	Requeue bool
	Stdout  string
	Stderr  string
}

func init() {
	register(CmdFail, "fail", func() command { return new(FailCommand) })
}

func (c *FailCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.jobError(&c.Error)
	e.bool(c.Requeue)
	e.str(c.Stdout)
	e.str(c.Stderr)
}

func (c *FailCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Error = d.jobError()
	c.Requeue = d.bool()
	c.Stdout = d.str()
	c.Stderr = d.str()
}

func (c *FailCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.jobError(4, &c.Error)
	f.bool(5, &c.Requeue)
	f.str(6, &c.Stdout)
	f.str(7, &c.Stderr)
}

func (c *FailCommand) apply(a *applier) *Result { return a.fail(c) }
