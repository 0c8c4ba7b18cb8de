package fsm

import "fmt"

// ReleaseCommand gives a running job back to the queue without counting it
// as a failure. NotBefore keeps it from being claimed again before then (a
// cooldown: the worker could not do it now, and should not get it straight
// back). NotFor says the worker cannot do the job at all: the job records
// the worker (Job.NotFor), and no claim-next of that worker takes it again.
type ReleaseCommand struct {
	Now       int64
	Ref       LeaseRef
	Actor     Actor
	Reason    string
	NotBefore int64
	NotFor    bool

	// form: release, release-ex or release-not-for, the entry's type in a
	// build before LevelTagged (0: a tagged entry).
	form CommandType
}

func init() {
	newRelease := func() command { return new(ReleaseCommand) }
	register(CmdRelease, "release", newRelease)
	registerForm(CmdRelease, "release", CmdRelease, newRelease, decodeReleaseV1)
	registerForm(CmdReleaseEx, "release-ex", CmdRelease, newRelease, decodeReleaseV1)
	registerForm(CmdReleaseNotFor, "release-not-for", CmdRelease, newRelease, decodeReleaseV1)
}

func (c *ReleaseCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.str(4, &c.Reason)
	f.i64(5, &c.NotBefore)
	f.bool(6, &c.NotFor)
}

func (c *ReleaseCommand) setForm(t CommandType) { c.form = t }

func (c *ReleaseCommand) v1Form() CommandType {
	switch {
	case c.form != 0:
		return c.form
	case c.NotFor:
		return CmdReleaseNotFor
	case c.NotBefore != 0:
		return CmdReleaseEx
	}
	return CmdRelease
}

func (c *ReleaseCommand) encodeV1(e *enc) CommandType {
	form := c.v1Form()
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.str(c.Reason)
	if form != CmdRelease {
		e.varint(c.NotBefore)
	}
	return form
}

func decodeReleaseV1(d *dec, t CommandType) command {
	c := &ReleaseCommand{form: t}
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.Reason = d.str()
	if t != CmdRelease {
		c.NotBefore = d.varint()
	}
	c.NotFor = t == CmdReleaseNotFor
	return c
}

func (c *ReleaseCommand) apply(a *applier) *Result {
	switch c.v1Form() {
	case CmdReleaseNotFor:
		if c.Actor.WorkerID == "" {
			return fail(fmt.Errorf("release: %w: a release not for this worker names the worker", ErrInvalid))
		}
		a.t.jobControl, a.t.capabilities = true, true
		return a.releaseUntil(c, c.NotBefore, true)
	case CmdReleaseEx:
		a.t.jobControl = true
		return a.releaseUntil(c, c.NotBefore, false)
	}
	return a.release(c)
}
