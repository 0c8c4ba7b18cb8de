package fsm

// RedriveCommand puts a failed or dead job back in the queue with its
// attempts reset.
type RedriveCommand struct {
	Now   int64
	JobID string
	Actor Actor
}

func init() {
	register(CmdRedrive, "redrive", func() command { return new(RedriveCommand) })
}

func (c *RedriveCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.JobID)
	e.actor(c.Actor)
}

func (c *RedriveCommand) decode(d *dec) {
	c.Now = d.varint()
	c.JobID = d.str()
	c.Actor = d.actor()
}

func (c *RedriveCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.JobID)
	f.actor(3, &c.Actor)
}

func (c *RedriveCommand) apply(a *applier) *Result { return a.redrive(c) }
