package fsm

// CommentCommand appends a comment to a job.
type CommentCommand struct {
	Now   int64
	JobID string
	Actor Actor
	Text  string
}

func init() {
	register(CmdComment, "comment", func() command { return new(CommentCommand) })
}

func (c *CommentCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.JobID)
	e.actor(c.Actor)
	e.str(c.Text)
}

func (c *CommentCommand) decode(d *dec) {
	c.Now = d.varint()
	c.JobID = d.str()
	c.Actor = d.actor()
	c.Text = d.str()
}

func (c *CommentCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.JobID)
	f.actor(3, &c.Actor)
	f.str(4, &c.Text)
}

func (c *CommentCommand) apply(a *applier) *Result { return a.comment(c) }
