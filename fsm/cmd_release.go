package fsm

import "fmt"

// ReleaseCommand gives a running job back to the queue without counting it
// as a failure.
type ReleaseCommand struct {
	Now    int64
	Ref    LeaseRef
	Actor  Actor
	Reason string
}

// ReleaseExCommand is a release that also keeps the job from being claimed
// again before NotBefore (a cooldown: the worker could not do it now, and
// should not get it straight back). A leader proposes it only with a
// cooldown, and only once every server applies it.
type ReleaseExCommand struct {
	ReleaseCommand
	NotBefore int64
}

func init() {
	register(CmdRelease, "release", func() command { return new(ReleaseCommand) })
	register(CmdReleaseEx, "release-ex", func() command { return new(ReleaseExCommand) })
}

func (c *ReleaseExCommand) encode(e *enc) {
	c.ReleaseCommand.encode(e)
	e.varint(c.NotBefore)
}

func (c *ReleaseExCommand) decode(d *dec) {
	c.ReleaseCommand.decode(d)
	c.NotBefore = d.varint()
}

func (c *ReleaseExCommand) apply(a *applier) *Result {
	a.t.jobControl = true
	return a.releaseUntil(&c.ReleaseCommand, c.NotBefore, false)
}

// ReleaseNotForCommand is a release (with a cooldown, or NotBefore 0)
// by a worker that cannot do the job: the job records the worker
// (Job.NotFor), and no claim-next of that worker takes it again.
type ReleaseNotForCommand struct {
	ReleaseExCommand
}

func init() {
	register(CmdReleaseNotFor, "release-not-for", func() command { return new(ReleaseNotForCommand) })
}

func (c *ReleaseNotForCommand) apply(a *applier) *Result {
	if c.Actor.WorkerID == "" {
		return fail(fmt.Errorf("release: %w: a release not for this worker names the worker", ErrInvalid))
	}
	a.t.jobControl, a.t.capabilities = true, true
	return a.releaseUntil(&c.ReleaseCommand, c.NotBefore, true)
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
