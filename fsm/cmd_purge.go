package fsm

// PurgeCommand deletes up to Max done jobs that finished before Before (the
// retention cut-off the leader computed from its clock). Failed and dead
// jobs are kept: they wait in the dead-letter view for a human. From
// LevelIdentity on it also drops up to Max worker id bindings unused for
// WorkerIDIdle at Now (identity.go).
type PurgeCommand struct {
	Now    int64
	Before int64
	Max    int
}

func init() {
	register(CmdPurge, "purge", func() command { return new(PurgeCommand) })
}

func (c *PurgeCommand) encode(e *enc) {
	e.varint(c.Now)
	e.varint(c.Before)
	e.int(c.Max)
}

func (c *PurgeCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Before = d.varint()
	c.Max = d.int()
}

func (c *PurgeCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.i64(2, &c.Before)
	f.int(3, &c.Max)
}

func (c *PurgeCommand) apply(a *applier) *Result { return a.purge(c) }
