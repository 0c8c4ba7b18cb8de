package fsm

// ProgressCommand is a heartbeat that also reports progress, saves a
// checkpoint, or both. Progress (small JSON: a percentage, a message) is
// shown on the job until the attempt ends; a new claim starts without it.
// A checkpoint (small JSON) is kept across attempts: the next claim hands
// it to its worker, so a retried long job resumes where the last one saved.
// A nil Progress or Checkpoint leaves the job's as it is.
type ProgressCommand struct {
	HeartbeatCommand
	Progress   []byte // raw JSON
	Checkpoint []byte // raw JSON
}

func init() {
	register(CmdProgress, "progress", func() command { return new(ProgressCommand) })
}

func (c *ProgressCommand) encode(e *enc) {
	c.HeartbeatCommand.encode(e)
	e.bytes(c.Progress)
	e.bytes(c.Checkpoint)
}

func (c *ProgressCommand) decode(d *dec) {
	c.HeartbeatCommand.decode(d)
	c.Progress = d.bytes()
	c.Checkpoint = d.bytes()
}

func (c *ProgressCommand) apply(a *applier) *Result {
	old, r := a.lookupRunning("heartbeat", c.Ref, c.Actor, "")
	if r != nil {
		return r
	}
	a.t.jobControl = true
	j := copyJob(old)
	j.Lease.ExpiresAt = c.Now + j.leaseNanos(c.LeaseNanos)
	text := ""
	if c.Progress != nil {
		j.Progress, j.ProgressAt = c.Progress, c.Now
		text = "progress"
	}
	if c.Checkpoint != nil {
		j.Checkpoint, j.CheckpointAt = c.Checkpoint, c.Now
		if text != "" {
			text += ", "
		}
		text += "checkpoint"
	}
	j.addEvent(Event{At: c.Now, Type: EventHeartbeat, Actor: a.in.actor(c.Actor), AttemptID: j.Lease.AttemptID, WorkerID: c.Actor.WorkerID, Text: text})
	a.put(old, j, c.Now)
	a.seeCaps(j.ClaimCaps, c.Now)
	return &Result{Job: j}
}
