package fsm

import "fmt"

// SessionCreateCommand starts a session: a named, bounded period of work
// that groups streams. Names are unique.
type SessionCreateCommand struct {
	Now         int64
	ID          string
	Name        string
	Description string
	Actor       Actor
}

// SessionEndCommand ends a session and every stream of it.
type SessionEndCommand struct {
	Now   int64
	Name  string
	Actor Actor
}

func init() {
	register(CmdSessionCreate, "session-create", func() command { return new(SessionCreateCommand) })
	register(CmdSessionEnd, "session-end", func() command { return new(SessionEndCommand) })
}

func (c *SessionCreateCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.ID)
	e.str(c.Name)
	e.str(c.Description)
	e.actor(c.Actor)
}

func (c *SessionCreateCommand) decode(d *dec) {
	c.Now = d.varint()
	c.ID = d.str()
	c.Name = d.str()
	c.Description = d.str()
	c.Actor = d.actor()
}

func (c *SessionCreateCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.ID)
	f.str(3, &c.Name)
	f.str(4, &c.Description)
	f.actor(5, &c.Actor)
}

func (c *SessionCreateCommand) apply(a *applier) *Result {
	if c.ID == "" || c.Name == "" {
		return fail(fmt.Errorf("session create: %w: id and name are required", ErrInvalid))
	}
	if s := a.t.session(c.Name); s != nil {
		return &Result{Session: s, Err: fmt.Errorf("session %s: %w", c.Name, ErrExists)}
	}
	s := &Session{ID: c.ID, Name: c.Name, Description: c.Description, Status: StatusActive,
		StartedAt: c.Now, UpdatedAt: c.Now, CreateIndex: a.index}
	a.putSession(s)
	return &Result{Session: s}
}

func (c *SessionEndCommand) encode(e *enc) {
	e.varint(c.Now)
	e.str(c.Name)
	e.actor(c.Actor)
}

func (c *SessionEndCommand) decode(d *dec) {
	c.Now = d.varint()
	c.Name = d.str()
	c.Actor = d.actor()
}

func (c *SessionEndCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.str(2, &c.Name)
	f.actor(3, &c.Actor)
}

// apply ends the session and its active streams; ending an ended session
// changes nothing and answers it as it is.
func (c *SessionEndCommand) apply(a *applier) *Result {
	old := a.t.session(c.Name)
	if old == nil {
		return fail(fmt.Errorf("session %s: %w", c.Name, ErrNotFound))
	}
	if old.Status == StatusEnded {
		return &Result{Session: old, Duplicate: true}
	}
	s := *old
	s.Status, s.EndedAt, s.UpdatedAt = StatusEnded, c.Now, c.Now
	a.putSession(&s)
	res := &Result{Session: &s}
	var ending []*Stream
	a.t.streams.ascend(func(s *Stream) bool {
		if s.Session == c.Name && s.Status == StatusActive {
			ending = append(ending, s)
		}
		return true
	})
	for _, old := range ending {
		res.Streams = append(res.Streams, a.endStream(old, c.Now))
	}
	return res
}
