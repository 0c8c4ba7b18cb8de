package fsm

// ReapCommand returns to the queue (or kills, at the attempt limit) up to Max
// running jobs whose lease expired at or before Now. Expiry is judged when
// the entry applies, so a heartbeat committed first wins.
type ReapCommand struct {
	Now int64
	Max int
}

func init() {
	register(CmdReap, "reap", func() command { return new(ReapCommand) })
}

func (c *ReapCommand) encode(e *enc) {
	e.varint(c.Now)
	e.int(c.Max)
}

func (c *ReapCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Max = d.int()
}

func (c *ReapCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.int(2, &c.Max)
}

func (c *ReapCommand) apply(a *applier) *Result { return a.reap(c) }
