package fsm

// HeartbeatCommand extends a running job's lease.
type HeartbeatCommand struct {
	Now        int64
	Ref        LeaseRef
	Actor      Actor
	LeaseNanos int64
}

func init() {
	register(CmdHeartbeat, "heartbeat", func() command { return new(HeartbeatCommand) })
}

func (c *HeartbeatCommand) encode(e *enc) {
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.varint(c.LeaseNanos)
}

func (c *HeartbeatCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.LeaseNanos = d.varint()
}

func (c *HeartbeatCommand) apply(a *applier) *Result { return a.heartbeat(c) }
