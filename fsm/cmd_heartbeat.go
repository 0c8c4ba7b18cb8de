package fsm

// HeartbeatCommand extends a running job's lease. It may also report
// progress, save a checkpoint, or both. Progress (small JSON: a
// percentage, a message) is shown on the job until the attempt ends; a new
// claim starts without it. A checkpoint (small JSON) is kept across
// attempts: the next claim hands it to its worker, so a retried long job
// resumes where the last one saved. A nil Progress or Checkpoint leaves
// the job's as it is.
type HeartbeatCommand struct {
	Now        int64
	Ref        LeaseRef
	Actor      Actor
	LeaseNanos int64
	Progress   []byte // raw JSON
	Checkpoint []byte // raw JSON

	// form: heartbeat or progress, the entry's type in a build before
	// LevelTagged (0: a tagged entry).
	form CommandType
}

func init() {
	newHeartbeat := func() command { return new(HeartbeatCommand) }
	register(CmdHeartbeat, "heartbeat", newHeartbeat)
	registerForm(CmdHeartbeat, "heartbeat", CmdHeartbeat, newHeartbeat, decodeHeartbeatV1)
	registerForm(CmdProgress, "progress", CmdHeartbeat, newHeartbeat, decodeHeartbeatV1)
}

func (c *HeartbeatCommand) fields(f *fields) {
	f.i64(1, &c.Now)
	f.ref(2, &c.Ref)
	f.actor(3, &c.Actor)
	f.i64(4, &c.LeaseNanos)
	f.bytes(5, &c.Progress)
	f.bytes(6, &c.Checkpoint)
}

func (c *HeartbeatCommand) setForm(t CommandType) { c.form = t }

func (c *HeartbeatCommand) v1Form() CommandType {
	if c.form != 0 {
		return c.form
	}
	if c.Progress != nil || c.Checkpoint != nil {
		return CmdProgress
	}
	return CmdHeartbeat
}

func (c *HeartbeatCommand) encodeV1(e *enc) CommandType {
	form := c.v1Form()
	e.varint(c.Now)
	e.ref(c.Ref)
	e.actor(c.Actor)
	e.varint(c.LeaseNanos)
	if form == CmdProgress {
		e.bytes(c.Progress)
		e.bytes(c.Checkpoint)
	}
	return form
}

func decodeHeartbeatV1(d *dec, t CommandType) command {
	c := &HeartbeatCommand{form: t}
	c.Now = d.varint()
	c.Ref = d.ref()
	c.Actor = d.actor()
	c.LeaseNanos = d.varint()
	if t == CmdProgress {
		c.Progress = d.bytes()
		c.Checkpoint = d.bytes()
	}
	return c
}

func (c *HeartbeatCommand) apply(a *applier) *Result {
	if c.v1Form() == CmdProgress {
		return c.progress(a)
	}
	return a.heartbeat(c)
}

// progress is a heartbeat that also reports progress, saves a
// checkpoint, or both.
func (c *HeartbeatCommand) progress(a *applier) *Result {
	old, r := a.lookupRunning("heartbeat", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	a.t.jobControl = true
	j := copyJob(old)
	j.Lease.ExpiresAt = c.Now + j.leaseNanos(c.LeaseNanos)
	text := ""
	if c.Progress != nil {
		j.extraMut().Progress, j.extraMut().ProgressAt = c.Progress, c.Now
		text = "progress"
	}
	if c.Checkpoint != nil {
		j.extraMut().Checkpoint, j.extraMut().CheckpointAt = c.Checkpoint, c.Now
		if text != "" {
			text += ", "
		}
		text += "checkpoint"
	}
	j.addEvent(Event{At: c.Now, Type: EventHeartbeat, Actor: a.in.actor(c.Actor), AttemptID: j.Lease.AttemptID, WorkerID: c.Actor.WorkerID, Text: text})
	a.put(old, j, c.Now)
	a.seeCaps(j.Extra().ClaimCaps, c.Now)
	return &Result{Job: j}
}
