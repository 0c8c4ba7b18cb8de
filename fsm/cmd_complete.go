package fsm

// CompleteCommand finishes a running job with a result.
type CompleteCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Result []byte
	Stdout string
	Stderr string
}

func init() {
	register(CmdComplete, "complete", func() command { return new(CompleteCommand) })
}

func (c *CompleteCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.bytes(c.Result)
	e.str(c.Stdout)
	e.str(c.Stderr)
}

func (c *CompleteCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Result = d.bytes()
	c.Stdout = d.str()
	c.Stderr = d.str()
}

func (c *CompleteCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.bytes(4, &c.Result)
	f.str(5, &c.Stdout)
	f.str(6, &c.Stderr)
}

func (c *CompleteCommand) apply(a *applier) *Result { return a.complete(c) }
