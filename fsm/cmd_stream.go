package fsm

import "fmt"

// StreamCreateCommand adds a stream to an active session. Stream names are
// unique across sessions; a job's Stream names its lane.
type StreamCreateCommand struct {
	Now          int64
	ID           string
	Name         string
	Session      string
	Instructions string
	Actor        Actor
}

// StreamEndCommand ends a stream: it takes no new jobs, and its queued jobs
// stay where they are, unclaimed.
type StreamEndCommand struct {
	Now   int64
	Name  string
	Actor Actor
}

func init() {
	register(CmdStreamCreate, "stream-create", func() command { return new(StreamCreateCommand) })
	register(CmdStreamEnd, "stream-end", func() command { return new(StreamEndCommand) })
}

func (c *StreamCreateCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Name)
	e.str(c.Session)
	e.str(c.Instructions)
	e.actor(c.Actor)
}

func (c *StreamCreateCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Name = d.str()
	c.Session = d.str()
	c.Instructions = d.str()
	c.Actor = d.actor()
}

func (c *StreamCreateCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.str(3, &c.Name)
	f.str(4, &c.Session)
	f.str(5, &c.Instructions)
	f.actor(6, &c.Actor)
}

func (c *StreamCreateCommand) apply(a *applier) *Result {
	if c.ID == "" || c.Name == "" || c.Session == "" {
		return fail(fmt.Errorf("stream create: %w: id, name and session are required", ErrInvalid))
	}
	if s := a.t.stream(c.Name); s != nil {
		return &Result{Stream: s, Err: fmt.Errorf("stream %s: %w", c.Name, ErrExists)}
	}
	ses := a.t.session(c.Session)
	if ses == nil {
		return fail(fmt.Errorf("session %s: %w", c.Session, ErrNotFound))
	}
	if ses.Status == StatusEnded {
		return &Result{Session: ses, Err: fmt.Errorf("session %s: %w: it takes no new streams", c.Session, ErrEnded)}
	}
	s := &Stream{ID: c.ID, Name: c.Name, Session: c.Session, Instructions: c.Instructions, Status: StatusActive,
		CreatedAt: c.Now, UpdatedAt: c.Now, CreateIndex: a.index}
	a.putStream(s)
	return &Result{Stream: s}
}

func (c *StreamEndCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.Name)
	e.actor(c.Actor)
}

func (c *StreamEndCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Name = d.str()
	c.Actor = d.actor()
}

func (c *StreamEndCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.actor(3, &c.Actor)
}

// apply ends the stream; ending an ended stream changes nothing.
func (c *StreamEndCommand) apply(a *applier) *Result {
	old := a.t.stream(c.Name)
	if old == nil {
		return fail(fmt.Errorf("stream %s: %w", c.Name, ErrNotFound))
	}
	if old.Status == StatusEnded {
		return &Result{Stream: old, Duplicate: true}
	}
	return &Result{Stream: a.endStream(old, c.Now)}
}

func (a *applier) endStream(old *Stream, now int64) *Stream {
	s := *old
	s.Status, s.EndedAt, s.UpdatedAt = StatusEnded, now, now
	a.putStream(&s)
	return &s
}
