package fsm

// ReleaseCommand gives a running job back to the queue without counting it
// as a failure.
type ReleaseCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Reason string
}

func init() {
	register(CmdRelease, "release", func() command { return new(ReleaseCommand) })
}

func (c *ReleaseCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.str(c.Reason)
}

func (c *ReleaseCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Reason = d.str()
}

func (c *ReleaseCommand) apply(a *applier) *Result { return a.release(c) }
